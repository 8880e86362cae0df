"""Idle release: give the context's memory back between request bursts, keep the weights.

An agent's requests come in bursts separated by tool runs and user think time. While it
waits, a loaded engine holds its KV cache and compute buffers (about 90 MB for SmolLM2 at
n_ctx=4096, more than the weights' resident pages of a small model). `IdleReleaser`
watches an engine from a daemon thread; after `idle_s` seconds without a forward pass it
saves each live sequence into a `StateStore` (when given one) and calls
`Engine.release()`, which frees the context but keeps the model loaded. The next request
needs no cooperation: the engine recreates its context on first use and the store
restores the saved state instead of prefilling the prompt again.

Activity is noticed from the engine's pass counter, so callers need not report it;
`touch()` and the `busy()` context manager mark activity explicitly (a request being
assembled, a long tool call that should keep the engine warm).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType

from toolweave.native.engine import Engine
from toolweave.native.states.store import StateStore

__all__ = [
    "IdleReleaser",
    "ReleaseRecord",
    "peak_resident_bytes",
    "reset_peak_resident",
    "resident_bytes",
]

_RSS = re.compile(r"^VmRSS:\s+(\d+)\s+kB", re.MULTILINE)
_HWM = re.compile(r"^VmHWM:\s+(\d+)\s+kB", re.MULTILINE)


def _trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc keeps them otherwise); best effort."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _status_kb(pattern: re.Pattern[str]) -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            found = pattern.search(fh.read())
    except OSError:
        return 0
    return int(found.group(1)) * 1024 if found else 0


def resident_bytes() -> int:
    """This process's resident memory (VmRSS from /proc/self/status); 0 if unavailable."""
    return _status_kb(_RSS)


def peak_resident_bytes() -> int:
    """Peak resident memory since start or `reset_peak_resident()` (VmHWM); 0 if unknown."""
    return _status_kb(_HWM)


def reset_peak_resident() -> bool:
    """Restart the peak at the current resident memory (Linux `clear_refs` 5); False if
    this system does not allow it, and the peak then covers the whole process life."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class ReleaseRecord:
    """One release: when, what was saved, and resident memory around it."""

    at: float
    saved_sequences: int
    save_ms: float
    release_ms: float
    rss_before: int
    rss_after: int


class IdleReleaser:
    """Release `engine` after `idle_s` seconds without activity (see module doc).

    `store`: where live sequences are saved before a release (`spill` then drops the
    in-memory copies of states already on disk, so they stop counting as resident).
    Without a store the next request prefills its prompt from scratch. `start()` runs
    the watcher thread; `release_if_idle()` is the same check, callable directly.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        idle_s: float = 30.0,
        store: StateStore | None = None,
        spill: bool = True,
        poll_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if idle_s < 0:
            raise ValueError("idle_s must be >= 0")
        self.engine = engine
        self.idle_s = idle_s
        self.store = store
        self.spill = spill
        self.poll_s = poll_s if poll_s is not None else min(1.0, max(0.01, idle_s / 4))
        self._clock = clock
        self._lock = threading.Lock()
        self._busy = 0
        self._last = clock()
        self._seen = self._activity()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.releases: list[ReleaseRecord] = []

    # ------------------------------------------------------------------ activity
    def _activity(self) -> tuple[int, int]:
        c = self.engine.counters
        return (id(c), c.forward_passes)

    def touch(self) -> None:
        """Count now as activity: the idle time starts again."""
        with self._lock:
            self._last = self._clock()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """No release while inside (nestable, thread-safe)."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                self._last = self._clock()

    def idle_for(self) -> float:
        """Seconds since the last activity seen (0 while busy)."""
        with self._lock:
            seen = self._activity()
            if seen != self._seen:
                self._seen = seen
                self._last = self._clock()
            if self._busy:
                return 0.0
            return self._clock() - self._last

    # ------------------------------------------------------------------ release
    def release_if_idle(self) -> ReleaseRecord | None:
        """Release now if the engine has been idle for `idle_s` and nobody holds it."""
        if self.engine.released or self.idle_for() < self.idle_s:
            return None
        if not self.engine.lock.acquire(blocking=False):
            return None  # a request is running: not idle after all
        try:
            if self._busy or self.engine.released:
                return None
            return self._release_locked()
        finally:
            self.engine.lock.release()

    def release_now(self) -> ReleaseRecord:
        """Save the live sequences and release, whatever the idle time (waits for the lock)."""
        with self.engine.lock:
            return self._release_locked()

    def _release_locked(self) -> ReleaseRecord:
        rss_before = resident_bytes()
        t0 = time.perf_counter()
        saved = 0
        if self.store is not None and not self.engine.released:
            for seq in sorted(self.engine.seq_tokens):
                if self.store.save(self.engine, seq) is not None:
                    saved += 1
            if self.spill and self.store.directory is not None:
                self.store.release_memory()
        t1 = time.perf_counter()
        self.engine.release()
        _trim_heap()  # the spilled states were freed into the heap, not to the OS
        t2 = time.perf_counter()
        record = ReleaseRecord(
            at=time.time(),
            saved_sequences=saved,
            save_ms=(t1 - t0) * 1000,
            release_ms=(t2 - t1) * 1000,
            rss_before=rss_before,
            rss_after=resident_bytes(),
        )
        self.releases.append(record)
        with self._lock:
            self._seen = self._activity()
        return record

    # ------------------------------------------------------------------ thread
    def start(self) -> IdleReleaser:
        """Start the watcher thread (idempotent); returns self."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="toolweave-idle", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the watcher thread (the engine is left as it is)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.release_if_idle()

    def __enter__(self) -> IdleReleaser:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
