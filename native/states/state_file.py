"""The on-disk format of a saved KV state: one file per state, named by its key.

A file is the magic, a little-endian u32 header length, a JSON header (format version,
the model fingerprint, the session, the state's tokens and the payload size) and the
payload `Engine.state_get` returned. The key hashes the model fingerprint and the tokens,
so the same prompt on the same model always lands in the same file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "SUFFIX",
    "StateHeader",
    "mapped_state",
    "model_fingerprint",
    "read_header",
    "state_key",
    "touch",
    "unlink",
    "write_state_file",
]

SUFFIX = ".twstate"
_MAGIC = b"TWSTATE1"
_HEADER = struct.Struct("<8sI")  # magic, header length
_VERSION = 1


def model_fingerprint(path: str | os.PathLike[str]) -> str:
    """A model's identity for saved states: size plus hashes of the first and last MiB."""
    p = Path(path)
    size = p.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with p.open("rb") as fh:
        h.update(fh.read(1 << 20))
        fh.seek(max(0, size - (1 << 20)))
        h.update(fh.read(1 << 20))
    return h.hexdigest()[:32]


def state_key(model_id: str, tokens: Sequence[int]) -> str:
    """The key (and file stem) of the state of `tokens` on the model `model_id`."""
    h = hashlib.sha256(model_id.encode())
    h.update(np.asarray(tokens, dtype=np.int32).tobytes())
    return h.hexdigest()[:24]


@dataclass(frozen=True)
class StateHeader:
    """What a state file says about its payload."""

    model_id: str
    session: str
    tokens: NDArray[np.int32]
    n_bytes: int


def write_state_file(
    path: Path, *, model_id: str, session: str, tokens: Sequence[int], payload: bytes
) -> int:
    """Write a state file atomically (a temporary file renamed); returns its size."""
    header = {
        "version": _VERSION,
        "model_id": model_id,
        "session": session,
        "tokens": [int(t) for t in tokens],
        "n_bytes": len(payload),
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        fh.write(_HEADER.pack(_MAGIC, len(head)))
        fh.write(head)
        fh.write(payload)
    os.replace(tmp, path)
    return _HEADER.size + len(head) + len(payload)


def read_header(path: Path) -> StateHeader:
    """The header of a state file; `ValueError`, `KeyError` or `TypeError` when the file
    is not one (or is damaged), `OSError` when it cannot be read."""
    with path.open("rb") as fh:
        magic, n = _HEADER.unpack(fh.read(_HEADER.size))
        if magic != _MAGIC:
            raise ValueError(f"{path} is not a toolweave state file")
        header = json.loads(fh.read(n))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: malformed header")
    return StateHeader(
        model_id=str(header["model_id"]),
        session=str(header.get("session", "")),
        tokens=np.asarray(header["tokens"], dtype=np.int32),
        n_bytes=int(header["n_bytes"]),
    )


@contextlib.contextmanager
def mapped_state(path: Path, model_id: str) -> Iterator[memoryview]:
    """The payload of a state file as a writable copy-on-write mapping (no read, no copy);
    `ValueError` unless the file holds a whole state of the model `model_id`."""
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) as mm:
        magic, n = _HEADER.unpack(mm[: _HEADER.size])
        if magic != _MAGIC:
            raise ValueError(f"{path} is not a toolweave state file")
        header = json.loads(mm[_HEADER.size : _HEADER.size + n])
        start = _HEADER.size + n
        if not isinstance(header, dict) or header.get("model_id") != model_id:
            raise ValueError(f"{path} belongs to another model")
        if header.get("n_bytes") != len(mm) - start:
            raise ValueError(f"{path}: truncated or malformed")
        view = memoryview(mm)[start:]
        try:
            yield view
        finally:
            view.release()


def touch(path: Path) -> None:
    """Mark a state file used now (its mtime is its last use after a restart)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def unlink(path: Path) -> None:
    """Delete a state file if it is there."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
