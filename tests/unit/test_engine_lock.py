"""The engine lock: re-entrant for its holder, owned by frames, never a silent deadlock."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from toolweave.native.concurrency import (
    DecodeCancelledError,
    EngineBusyError,
    EngineLock,
    cancel_scope,
    check_cancelled,
)


def held_stream(lock: EngineLock, n: int = 3) -> Iterator[int]:
    """A decoder-like generator: holds the lock from its first item to its last."""
    with lock:
        for i in range(n):
            with lock:  # what an engine call inside the decoder does
                pass
            yield i


def in_thread(fn: object) -> list[object]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())  # type: ignore[operator]
        except Exception as exc:
            out.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    assert not t.is_alive()
    return out


def test_reentrant_for_the_holder_and_exclusive_for_others() -> None:
    lock = EngineLock()
    with lock, lock:
        assert lock.locked()
        assert in_thread(lambda: lock.acquire(blocking=False)) == [False]
        assert in_thread(lambda: lock.acquire(timeout=0.1)) == [False]
    assert not lock.locked()
    assert in_thread(lambda: lock.acquire(blocking=False)) == [True]  # and never released:
    assert in_thread(lambda: lock.acquire(timeout=0.1)) == [False]


def test_a_paused_stream_is_a_clear_error_on_its_own_thread_at_once() -> None:
    lock = EngineLock(park_timeout=60)
    stream = held_stream(lock)
    assert next(stream) == 0
    t0 = time.perf_counter()
    with pytest.raises(EngineBusyError, match="paused stream"), lock:
        pass  # an RLock would let this second request in, over the stream's sequences
    assert time.perf_counter() - t0 < 5
    assert list(stream) == [1, 2]
    assert not lock.locked()


def test_a_paused_stream_times_out_on_other_threads_and_closing_frees_it() -> None:
    lock = EngineLock(park_timeout=0.3)
    stream = held_stream(lock)
    next(stream)
    t0 = time.perf_counter()
    [err] = in_thread(lambda: lock.acquire())
    assert isinstance(err, EngineBusyError)
    assert 0.3 <= time.perf_counter() - t0 < 5
    stream.close()
    assert not lock.locked()
    assert in_thread(lambda: lock.acquire(timeout=1)) == [True]


def test_a_stream_resumed_on_another_thread_keeps_its_lock() -> None:
    lock = EngineLock(park_timeout=0.3)
    stream = held_stream(lock, 4)
    assert next(stream) == 0
    assert in_thread(lambda: list(stream)) == [[1, 2, 3]]  # an RLock: deadlock or RuntimeError
    assert not lock.locked()


def test_a_waiter_gets_the_lock_when_the_running_holder_finishes() -> None:
    lock = EngineLock(park_timeout=0.1)
    started = threading.Event()

    def slow() -> None:
        with lock:
            started.set()
            time.sleep(0.5)  # running, not paused: waiters wait past park_timeout

    t = threading.Thread(target=slow)
    t.start()
    started.wait(5)
    t0 = time.perf_counter()
    with lock:
        waited = time.perf_counter() - t0
    t.join()
    assert 0.2 < waited < 5


def test_an_unreachable_paused_stream_is_collected_not_a_deadlock() -> None:
    lock = EngineLock(park_timeout=60)
    stream = held_stream(lock)
    next(stream)
    cycle: list[object] = [stream]
    cycle.append(cycle)  # only the cycle collector can close it
    del stream, cycle
    with lock:
        pass
    assert not lock.locked()


def test_cancel_scope() -> None:
    check_cancelled()  # no scope: nothing to cancel
    event = threading.Event()
    with cancel_scope(event):
        check_cancelled()
        event.set()
        with pytest.raises(DecodeCancelledError):
            check_cancelled()
    check_cancelled()
