"""Where a `StateStore`'s saved states live: in memory and, with a directory, in files.

`StateStorage` holds the store's entries and their bytes, evicts them by the store's
policy, and keeps them on disk: with a `directory`, every state is also written there (one
file per state, holding its tokens and the model fingerprint, so no other model loads it)
by a background thread, and a store opened later over the same directory - a restarted
process - reuses them. `close()` finishes pending writes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from toolweave.checkpoints import CheckpointPolicy, StoreCosts
from toolweave.disk_cache import enforce_cache_limit, limit_scope, resolve_cache_limit
from toolweave.native.engine import Engine
from toolweave.native.states.records import StoredState
from toolweave.native.states.state_file import (
    SUFFIX,
    StateFileError,
    StateHeader,
    checked_headers,
    mapped_state,
    one_line,
    state_key,
    touch,
    unlink,
    write_state_file,
)

__all__ = ["StateStorage"]

log = logging.getLogger("toolweave.states")


class StateStorage:
    """The saved states of one store, their memory and their files (see module doc).

    Callers hold `lock` (the store's) around everything but `flush`, `close` and
    `release_memory`, which take it themselves; the writer thread takes it as well.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None,
        disk_limit: int | str | None,
        lock: threading.RLock,
    ) -> None:
        self.directory = None if directory is None else Path(directory).expanduser().resolve()
        self.disk_limit = resolve_cache_limit(disk_limit)
        self._scope = [] if self.directory is None else limit_scope(self.directory)
        self._lock = lock
        self.entries: dict[str, StoredState] = {}
        self._writer: ThreadPoolExecutor | None = None
        self.write_errors: list[str] = []
        if self.directory is not None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                log.warning("cannot keep states in %s (%s): memory only", self.directory, exc)
                self.directory, self._scope = None, []
            self._scan()

    # ------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        """Wait until every deferred save, file write and delete has finished."""
        self._barrier()  # deferred saves queue their file writes as they run
        with self._lock:
            pending = [e.pending for e in self.entries.values() if e.pending is not None]
        for fut in pending:
            fut.result()
        self._barrier()  # and writes may queue deletes

    def _barrier(self) -> None:
        """Wait for what the writer thread has queued so far."""
        with self._lock:
            writer = self._writer
        if writer is not None:
            # Shut down at interpreter exit (before atexit callbacks): its queue already ran.
            with contextlib.suppress(RuntimeError):
                writer.submit(lambda: None).result()

    def close(self) -> None:
        """Finish pending writes and stop the writer thread (the storage stays usable)."""
        self.flush()
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)

    def submit(self, fn: Callable[..., None], *args: object) -> Future[None]:
        """Run `fn(*args)` on the writer thread (started on first use)."""
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolweave-states")
        return self._writer.submit(fn, *args)

    # ------------------------------------------------------------------ entries
    def memory_bytes(self) -> int:
        with self._lock:
            return sum(len(e.data) for e in self.entries.values() if e.data is not None)

    def disk_bytes(self) -> int:
        with self._lock:
            return sum(e.file_bytes for e in self.entries.values() if e.path is not None)

    def usable(self, model: str, n_ctx: int) -> Iterator[StoredState]:
        """The states of `model` that fit a context of `n_ctx` tokens."""
        for e in list(self.entries.values()):
            if e.model_id == model and len(e.tokens) <= n_ctx:
                yield e

    def add(self, entry: StoredState, data: bytes | bytearray) -> None:
        """Keep a new state, and queue the write of its file when there is a directory."""
        self.entries[entry.key] = entry
        if self.directory is not None:
            entry.pending = self.submit(self._write_job, entry, data)

    def load(self, engine: Engine, seq: int, entry: StoredState) -> None:
        """Put the state `entry` in `seq`, from memory or from its file."""
        if entry.data is not None:
            engine.state_set(seq, entry.data)
        elif entry.path is not None:
            # Mapped, not read: llama.cpp copies straight from the page cache.
            with mapped_state(entry.path, entry.model_id) as payload:
                engine.state_set(seq, payload)
        else:
            raise ValueError(f"state {entry.key} has neither memory nor file")

    def touch(self, entry: StoredState) -> None:
        """Mark `entry`'s file as just used (the disk limit evicts the oldest first)."""
        if entry.path is not None:
            self.submit(touch, entry.path)

    def forget_unreadable(self, entry: StoredState, exc: OSError | ValueError) -> None:
        """Forget a state whose file is missing or damaged (delete it when damaged)."""
        if isinstance(exc, FileNotFoundError):
            log.info("state %s is gone (evicted?); prefilling instead", entry.key)
        else:
            log.warning("skipped the state file %s; it will be rebuilt", one_line(exc))
        if isinstance(exc, StateFileError) and not exc.damaged:
            self.entries.pop(entry.key, None)  # not damaged: not ours to delete
        else:
            self.drop(entry)

    def drop(self, entry: StoredState) -> None:
        """Forget `entry` and delete its file."""
        self.entries.pop(entry.key, None)
        entry.data = None
        if self.directory is not None:
            self.submit(unlink, self.directory / f"{entry.key}{SUFFIX}")

    # ------------------------------------------------------------------ memory and eviction
    def release_memory(self) -> int:
        """Drop the in-memory copies of states that are safely on disk; returns bytes freed."""
        self.flush()
        freed = 0
        with self._lock:
            for e in self.entries.values():
                if e.data is not None and e.path is not None:
                    freed += len(e.data)
                    e.data = None
        return freed

    def enforce_bounds(
        self, model: str, policy: CheckpointPolicy, costs: StoreCosts, max_memory_bytes: int
    ) -> None:
        """Evict `model`'s states beyond the policy's per-session budget, then the bytes
        in memory beyond `max_memory_bytes` (only their files stay, when there are any)."""
        mine = [e for e in self.entries.values() if e.model_id == model]
        for session in {e.session for e in mine}:
            group = [e.info() for e in mine if e.session == session]
            excess = len(group) - policy.max_per_session
            for info in policy.eviction_order(group, costs)[: max(0, excess)]:
                self.drop(self.entries[info.key])
        resident = [e for e in self.entries.values() if e.data is not None]
        total = sum(len(e.data) for e in resident if e.data is not None)
        if total <= max_memory_bytes:
            return
        infos = [e.info() for e in resident if e.model_id == model]
        for info in policy.eviction_order(infos, costs):
            if total <= max_memory_bytes:
                break
            entry = self.entries[info.key]
            if entry.data is None:
                continue
            size = len(entry.data)
            if self.directory is None:
                self.drop(entry)
            elif entry.pending is not None and not entry.pending.done():
                continue  # its file is still being written: the bytes stay for now
            elif entry.path is None:
                self.drop(entry)  # the write failed: nothing else holds this state
            else:
                entry.data = None
            total -= size

    # ------------------------------------------------------------------ files
    def _write_job(self, entry: StoredState, data: bytes | bytearray) -> None:
        if self.directory is None:
            return
        path = self.directory / f"{entry.key}{SUFFIX}"
        try:
            size = write_state_file(
                path,
                model_id=entry.model_id,
                session=entry.session,
                tokens=entry.tokens,
                payload=data,
            )
        except OSError as exc:
            log.warning("could not save the state %s: %s", path, exc)
            with self._lock:
                self.write_errors.append(f"{path}: {exc}")
            return
        with self._lock:
            if entry.key in self.entries:
                entry.path = path
                entry.file_bytes = size
            else:  # dropped while being written
                path.unlink(missing_ok=True)
        self._enforce_disk_limit()

    def _enforce_disk_limit(self) -> None:
        """Keep the limit's directories under `disk_limit`; forget the files it deletes."""
        if not self._scope:
            return
        gone = set(enforce_cache_limit(self._scope, self.disk_limit).deleted)
        if not gone:
            return
        with self._lock:
            for entry in list(self.entries.values()):
                if entry.path is not None and entry.path in gone:
                    entry.path, entry.file_bytes = None, 0
                    if entry.data is None:
                        self.entries.pop(entry.key, None)

    def _scan(self) -> None:
        """Index the directory's state files (after applying the disk limit).

        A damaged file is deleted, a file of another format version left for the
        toolweave that wrote it; both with one warning. Another model's files are indexed
        (never used by this model) so that `checkpoints()` shows them."""
        if self.directory is None:
            return
        self._enforce_disk_limit()

        def check(path: Path, header: StateHeader) -> None:
            if state_key(header.model_id, header.tokens) != path.name[: -len(SUFFIX)]:
                raise StateFileError(path, "its name does not match its tokens", damaged=True)

        files = sorted(self.directory.glob(f"*{SUFFIX}"))
        for path, header, st in checked_headers(files, check, "state file", log):
            key = path.name[: -len(SUFFIX)]
            self.entries[key] = StoredState(
                key=key,
                model_id=header.model_id,
                tokens=header.tokens,
                session=header.session,
                n_bytes=header.n_bytes,
                last_used=st.st_mtime,
                path=path,
                file_bytes=st.st_size,
            )
