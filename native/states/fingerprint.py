"""A model file's identity for everything cached about it (states, the numerics bound).

The fingerprint is the SHA-256 of the whole file and its size, so two weight files that
differ in a single byte never share a state. Hashing runs at about 1 GB/s (98 MB of
SmolLM2 in 0.1 s on a 2-core CPU), once per file: the digest is kept by the file's
identity (resolved path, device, inode, size, modification time in ns) in memory and in
``<cache root>/fingerprints.json``, so later processes pay a `stat`. Replacing or editing
the file changes that identity and the file is hashed again. A damaged or foreign
fingerprints file is ignored with a warning and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from toolweave.disk_cache import atomic_write, cache_root

__all__ = ["model_fingerprint"]

log = logging.getLogger("toolweave.states")

_FORMAT = "toolweave-fingerprints-v1"
_FILE = "fingerprints.json"
_KEPT = 256  # files remembered on disk (the oldest entries are dropped first)
_CHUNK = 1 << 20
_lock = threading.Lock()
_known: dict[tuple[str, int, int, int, int], str] = {}


def model_fingerprint(path: str | os.PathLike[str]) -> str:
    """32 hex digits identifying the content of the model file at `path` (see module doc)."""
    real = Path(path).resolve()
    st = real.stat()
    ident = (str(real), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _lock:
        found = _known.get(ident)
        if found is not None:
            return found
        table = _read_table()
        entry = table.get(str(real))
        if isinstance(entry, dict) and _identity(entry) == ident[1:]:
            digest = str(entry.get("digest", ""))
            if len(digest) == 32:
                _known[ident] = digest
                return digest
        digest = _hash(real, st.st_size)
        _known[ident] = digest
        table.pop(str(real), None)
        table[str(real)] = {
            "dev": st.st_dev,
            "ino": st.st_ino,
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "digest": digest,
        }
        _write_table(dict(list(table.items())[-_KEPT:]))
        return digest


def _hash(path: Path, size: int) -> str:
    h = hashlib.sha256(f"gguf {size}\n".encode())
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()[:32]


def _identity(entry: dict[str, Any]) -> tuple[object, ...]:
    return (entry.get("dev"), entry.get("ino"), entry.get("size"), entry.get("mtime_ns"))


def _read_table() -> dict[str, Any]:
    path = cache_root() / _FILE
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring %s: %s; it will be rebuilt", path, _reason(exc))
        return {}
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        log.warning("ignoring %s: not a %s file; it will be rebuilt", path, _FORMAT)
        return {}
    files = data.get("files")
    return dict(files) if isinstance(files, dict) else {}


def _write_table(files: dict[str, Any]) -> None:
    path = cache_root() / _FILE
    body = json.dumps({"format": _FORMAT, "files": files}, indent=1).encode()
    try:
        atomic_write(path, body)
    except OSError as exc:  # a read-only cache only costs a hash at the next start
        log.warning("could not write %s: %s", path, exc)


def _reason(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
