"""The on-disk format of a saved KV state: one file per state, named by its key.

A file (format version 2) is ``b"TWSTATE"`` and the version digit, a little-endian u32
header length, the CRC-32 of the header, a JSON header (the model fingerprint, the
session, the state's tokens, the payload size and its CRC-32) and the payload
`Engine.state_get` returned. Every read checks all of it: a file that is truncated,
damaged, of another version or of another model raises `StateFileError` and is never
loaded. Writes are atomic (`toolweave.disk_cache.atomic_write`). The key hashes the model
fingerprint and the tokens, so the same prompt on the same model lands in the same file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from numpy.typing import NDArray

from toolweave.disk_cache import atomic_write
from toolweave.native.states.fingerprint import model_fingerprint

__all__ = [
    "SUFFIX",
    "VERSION",
    "StateFileError",
    "StateHeader",
    "checked_headers",
    "mapped_state",
    "model_fingerprint",
    "one_line",
    "read_header",
    "state_key",
    "touch",
    "unlink",
    "write_state_file",
]

SUFFIX = ".twstate"
VERSION = 2
_MAGIC = b"TWSTATE"
_PREFIX = struct.Struct("<8sII")  # magic + version digit, header length, header CRC-32
_MAX_HEADER = 1 << 24  # 16 MiB: far above any context's token list


class StateFileError(ValueError):
    """A file that is not a loadable state: ``damaged`` (truncated, corrupt, not a state
    file, or of an older format version: delete it) or not (another model, or a newer
    format version: leave it alone)."""

    def __init__(self, path: Path, reason: str, *, damaged: bool) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.damaged = damaged


def state_key(model_id: str, tokens: Sequence[int]) -> str:
    """The key (and file stem) of the state of `tokens` on the model `model_id`."""
    h = hashlib.sha256(model_id.encode())
    h.update(np.asarray(tokens, dtype=np.int32).tobytes())
    return h.hexdigest()[:24]


@dataclass(frozen=True)
class StateHeader:
    """What a state file says about its payload; ``offset`` is where the payload starts."""

    model_id: str
    session: str
    tokens: NDArray[np.int32]
    n_bytes: int
    crc32: int
    offset: int


def write_state_file(
    path: Path, *, model_id: str, session: str, tokens: Sequence[int], payload: bytes
) -> int:
    """Write a state file atomically; returns its size."""
    header = {
        "model_id": model_id,
        "session": session,
        "tokens": [int(t) for t in tokens],
        "n_bytes": len(payload),
        "crc32": zlib.crc32(payload),
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    magic = _MAGIC + str(VERSION).encode()
    prefix = _PREFIX.pack(magic, len(head), zlib.crc32(head))
    return atomic_write(path, [prefix, head, payload])


def _parse(path: Path, prefix: bytes, read: Any) -> StateHeader:
    """Check the prefix and header; `read(offset, n)` returns file bytes."""
    if len(prefix) < _PREFIX.size:
        raise StateFileError(path, f"truncated ({len(prefix)} bytes)", damaged=True)
    magic, n, crc = _PREFIX.unpack(prefix[: _PREFIX.size])
    if magic[:7] != _MAGIC:
        raise StateFileError(path, "not a toolweave state file", damaged=True)
    version = magic[7:8]
    if version != str(VERSION).encode():
        shown = version.decode("ascii", "replace")
        older = shown.isdigit() and int(shown) < VERSION  # obsolete: never read again
        raise StateFileError(
            path, f"format version {shown}, this toolweave reads {VERSION}", damaged=older
        )
    if n > _MAX_HEADER:
        raise StateFileError(path, "header length out of range", damaged=True)
    head = read(_PREFIX.size, n)
    if len(head) != n or zlib.crc32(head) != crc:
        raise StateFileError(path, "damaged header (checksum mismatch)", damaged=True)
    try:
        header = json.loads(head)
        tokens = np.asarray(header["tokens"], dtype=np.int32)
        out = StateHeader(
            model_id=str(header["model_id"]),
            session=str(header.get("session", "")),
            tokens=tokens,
            n_bytes=int(header["n_bytes"]),
            crc32=int(header["crc32"]),
            offset=_PREFIX.size + n,
        )
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise StateFileError(path, f"malformed header ({exc})", damaged=True) from None
    if tokens.ndim != 1:
        raise StateFileError(path, "malformed header (tokens)", damaged=True)
    return out


def read_header(path: Path) -> StateHeader:
    """The checked header of a state file (`StateFileError`; `OSError` if unreadable).

    Also checks that the file is as long as the header says (a truncated file fails)."""
    with path.open("rb") as fh:
        header = _parse(path, fh.read(_PREFIX.size), _reader(fh))
        size = os.fstat(fh.fileno()).st_size
    if size != header.offset + header.n_bytes:
        raise StateFileError(path, "truncated or padded payload", damaged=True)
    return header


def _reader(fh: BinaryIO) -> Any:
    def read(offset: int, n: int) -> bytes:
        fh.seek(offset)
        return fh.read(n)

    return read


@contextlib.contextmanager
def mapped_state(path: Path, model_id: str) -> Iterator[memoryview]:
    """The checked payload of a state file of the model `model_id`, as a writable
    copy-on-write mapping (no read, no copy); `StateFileError` unless the whole file
    checks out (header, model, length, payload checksum)."""
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < _PREFIX.size:
            raise StateFileError(path, f"truncated ({size} bytes)", damaged=True)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) as mm:
            header = _parse(path, mm[: _PREFIX.size], lambda off, n: mm[off : off + n])
            if header.model_id != model_id:
                raise StateFileError(path, "belongs to another model", damaged=False)
            if header.n_bytes != len(mm) - header.offset:
                raise StateFileError(path, "truncated or padded payload", damaged=True)
            view = memoryview(mm)[header.offset :]
            try:
                if zlib.crc32(view) != header.crc32:
                    raise StateFileError(path, "damaged payload (checksum mismatch)", damaged=True)
                yield view
            finally:
                view.release()


def touch(path: Path) -> None:
    """Mark a state file used now (its mtime is its last use, for the cache limit too)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def unlink(path: Path) -> None:
    """Delete a state file if it is there."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def one_line(exc: BaseException) -> str:
    """One line saying what went wrong."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text or type(exc).__name__


def checked_headers(
    paths: Iterable[Path],
    check: Callable[[Path, StateHeader], None],
    what: str,
    log: logging.Logger,
) -> Iterator[tuple[Path, StateHeader, os.stat_result]]:
    """The headers of `paths` that read and pass `check` (which raises `StateFileError`),
    with each file's stat. Each other file is skipped with one warning; a damaged one is
    deleted (it will be rebuilt), a foreign or future one kept."""
    for path in paths:
        try:
            header = read_header(path)
            check(path, header)
            st = path.stat()
        except StateFileError as exc:
            action = (
                "deleted; it will be rebuilt"
                if exc.damaged
                else "it will be rebuilt in this format"
            )
            log.warning("skipped the %s %s: %s; %s", what, path, exc.reason, action)
            if exc.damaged:
                unlink(path)
            continue
        except OSError as exc:
            log.warning("skipped the %s %s: %s", what, path, one_line(exc))
            continue
        yield path, header, st
