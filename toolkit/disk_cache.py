"""toolweave's cache directories on disk: where they are, atomic writes, and a size limit.

Everything toolweave keeps between runs (prompt states, prefix states, the numerics
bound, model fingerprints) lives under one cache root, ``$TOOLWEAVE_CACHE_DIR``, else
``$XDG_CACHE_HOME/toolweave``, else ``~/.cache/toolweave``. Three rules hold for every
file there:

- a write is atomic (`atomic_write`): a unique temporary file in the same directory,
  fsynced, then renamed over the target, so a crash leaves the old file or none;
- a reader that finds a file damaged, truncated or of another format skips it with one
  warning and rebuilds it (each reader checks its own format);
- the state directories together hold at most `resolve_cache_limit()` bytes
  (``$TOOLWEAVE_CACHE_LIMIT``, e.g. ``2GiB``; default `DEFAULT_CACHE_LIMIT`): after a
  write, `enforce_cache_limit` deletes the least recently used state files until the
  total fits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "CACHE_DIR_ENV",
    "CACHE_LIMIT_ENV",
    "DEFAULT_CACHE_LIMIT",
    "EVICTABLE",
    "STALE_TMP_S",
    "STATE_DIRS",
    "CacheFile",
    "Eviction",
    "atomic_write",
    "cache_root",
    "enforce_cache_limit",
    "format_size",
    "limit_scope",
    "parse_size",
    "plan_evictions",
    "resolve_cache_limit",
    "scan_cache",
]

log = logging.getLogger("toolweave.cache")

CACHE_DIR_ENV = "TOOLWEAVE_CACHE_DIR"
CACHE_LIMIT_ENV = "TOOLWEAVE_CACHE_LIMIT"
#: 4 GiB: under 2% of a 256 GB laptop disk; holds about 90 saved states of 2,000-token
#: prompts on SmolLM2-135M (46 MB each), or the pipeline benchmark's prefix states for a
#: budget of 40 combinations (2.2 GB) next to a working set of prompt states.
DEFAULT_CACHE_LIMIT = 4 << 30
#: The state directories under the cache root whose files count against the limit.
STATE_DIRS = ("prompt-states", "prefix-states", "numerics")
#: Suffixes of the files the limit may delete (state payloads, legacy ones included).
EVICTABLE = (".twstate", ".state")
#: A temporary file older than this is a crashed write's leftover and is deleted.
STALE_TMP_S = 3600.0
_TMP_SUFFIX = ".tmp"
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_NO_LIMIT = {"none", "off", "unlimited"}


# ---------------------------------------------------------------------- where
def cache_root() -> Path:
    """The cache root (see the module doc); read at each call, so the variables apply."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "toolweave"


def limit_scope(directory: str | os.PathLike[str]) -> list[Path]:
    """The directories whose files share one limit with `directory`: every state directory
    of the cache root when `directory` is inside it, else `directory` alone."""
    path = Path(directory).expanduser().resolve()
    root = cache_root().expanduser().resolve()
    if not path.is_relative_to(root):
        return [path]
    dirs = [root / name for name in STATE_DIRS]
    if not any(path.is_relative_to(d) for d in dirs):
        dirs.append(path)
    return dirs


# ---------------------------------------------------------------------- sizes
def parse_size(text: str) -> int | None:
    """Bytes in a size such as ``2GiB``, ``500MB``, ``1.5g`` or ``1048576``; None for
    ``none``/``off``/``unlimited``. ValueError otherwise."""
    if text.strip().lower() in _NO_LIMIT:
        return None
    found = _SIZE.match(text)
    unit = found.group(2).lower() if found else ""
    if found is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size (examples: 2GiB, 500MB, none)")
    return int(float(found.group(1)) * _UNITS[unit])


def format_size(n: int) -> str:
    """``n`` bytes for a log line: ``3.2 GiB``, ``512.0 MiB``, ``12 B``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def resolve_cache_limit(value: int | str | None = None) -> int | None:
    """The byte limit of the state directories: `value` (bytes or a size string), else
    ``$TOOLWEAVE_CACHE_LIMIT``, else `DEFAULT_CACHE_LIMIT`; None means no limit.

    A bad `value` raises ValueError; a bad variable is warned about and the default used
    (an environment typo must not stop a run).
    """
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"cache limit must be >= 0 bytes, not {value}")
        return value
    if isinstance(value, str):
        return parse_size(value)
    env = os.environ.get(CACHE_LIMIT_ENV)
    if env:
        try:
            return parse_size(env)
        except ValueError as exc:
            log.warning("ignoring %s: %s; using %s", CACHE_LIMIT_ENV, exc, _default_text())
    return DEFAULT_CACHE_LIMIT


def _default_text() -> str:
    return format_size(DEFAULT_CACHE_LIMIT)


# ---------------------------------------------------------------------- atomic writes
def atomic_write(
    path: str | os.PathLike[str],
    write: Callable[[BinaryIO], object] | bytes | Iterable[bytes],
) -> int:
    """Write `path` atomically; returns its size in bytes.

    `write` is the content (bytes, or an iterable of chunks) or a function given the open
    binary file. The data goes to a unique temporary file in the same directory (hidden,
    ending in ``.tmp``: no reader ever takes it for a finished file), is fsynced, then
    renamed over `path`. On any error the temporary file is removed and the error raised.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=_TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(write):
                write(fh)
            elif isinstance(write, bytes | bytearray | memoryview):
                fh.write(write)
            else:
                for chunk in write:
                    fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
            size = fh.tell()
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)
    return size


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (best effort: not every system can open a directory)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _is_temporary(path: Path) -> bool:
    """Whether `path` is an unfinished write (`atomic_write`'s or an older layout's)."""
    return path.name.endswith(_TMP_SUFFIX)


# ---------------------------------------------------------------------- the limit
@dataclass(frozen=True)
class CacheFile:
    """A file under a state directory: its size and last use (mtime; readers touch)."""

    path: Path
    size: int
    last_used: float

    @property
    def evictable(self) -> bool:
        return self.path.name.endswith(EVICTABLE) or _is_temporary(self.path)


@dataclass(frozen=True)
class Eviction:
    """What `enforce_cache_limit` did: files deleted, bytes freed, bytes left."""

    deleted: tuple[Path, ...]
    freed: int
    total: int
    limit: int | None


def scan_cache(dirs: Sequence[Path]) -> list[CacheFile]:
    """Every regular file under `dirs` (recursively; missing directories are empty)."""
    found: dict[Path, CacheFile] = {}
    stack = [d for d in dirs if d.is_dir()]
    seen: set[Path] = set()
    while stack:
        d = stack.pop()
        real = d.resolve()
        if real in seen:
            continue
        seen.add(real)
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    path = Path(entry.path)
                    found[path] = CacheFile(path, st.st_size, st.st_mtime)
            except OSError:
                continue  # deleted meanwhile
    return list(found.values())


def plan_evictions(
    files: Sequence[CacheFile], limit: int | None, *, now: float | None = None
) -> list[CacheFile]:
    """The files to delete: stale temporary files, then evictable files least recently
    used first until the total is at most `limit` (None: no limit)."""
    now = time.time() if now is None else now
    stale = [f for f in files if _is_temporary(f.path) and now - f.last_used > STALE_TMP_S]
    out = list(stale)
    total = sum(f.size for f in files) - sum(f.size for f in stale)
    if limit is None or total <= limit:
        return out
    gone = {f.path for f in stale}
    candidates = sorted(
        (f for f in files if f.evictable and f.path not in gone and not _is_temporary(f.path)),
        key=lambda f: (f.last_used, str(f.path)),
    )
    for f in candidates:
        if total <= limit:
            break
        out.append(f)
        total -= f.size
    return out


def enforce_cache_limit(dirs: Sequence[Path], limit: int | None) -> Eviction:
    """Delete what `plan_evictions` picks under `dirs`; log one line when anything goes."""
    files = scan_cache(dirs)
    victims = plan_evictions(files, limit)
    deleted: list[Path] = []
    freed = 0
    for f in victims:
        try:
            f.path.unlink()
        except FileNotFoundError:
            pass  # another process evicted it first
        except OSError as exc:
            log.warning("could not evict %s: %s", f.path, exc)
            continue
        deleted.append(f.path)
        freed += f.size
        log.debug("evicted %s (%s)", f.path, format_size(f.size))
    total = sum(f.size for f in files) - freed
    if deleted:
        shown = "none" if limit is None else format_size(limit)
        log.info(
            "cache limit %s: evicted %d least recently used files (%s); %s left",
            shown,
            len(deleted),
            format_size(freed),
            format_size(total),
        )
    return Eviction(tuple(deleted), freed, total, limit)
