"""The one thread of this process that runs llama.cpp's compute graphs.

llama.cpp's CPU backend, built with OpenMP (llama-cpp-python's default build), runs each
graph on a team of OpenMP threads that belongs to the thread that called
``llama_decode``. While one thread's team is alive, a graph run from another thread
gets no second core: measured on SmolLM2-135M with 2 threads on 2 cores, a decode step
took 11-12 ms from the thread that ran the first graph and 34 ms (one core busy
instead of two) from any other live thread. An agent decodes from many threads (a
sync `invoke` on the caller's thread, an async or streamed call on a worker, an
executor thread of LangGraph), so every `llama_decode` of toolweave goes through
`run`, on one long-lived daemon thread: a single team, every pass on all its threads.

A job waits for the jobs before it, so graphs of different engines run one at a time:
on a CPU they would share the same cores anyway. The hand-off costs tens of
microseconds against milliseconds for a pass. llama.cpp called directly from another
thread of the same process (llama-cpp-python's `Llama`) makes a second team: wrap its
decode with `route_llama` to keep one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["compute_thread", "route_llama", "run"]

T = TypeVar("T")
L = TypeVar("L")

_Job = tuple[Callable[..., Any], tuple[Any, ...], threading.Event, list[Any]]

_jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_start_lock = threading.Lock()


def _serve() -> None:
    while True:
        fn, args, done, box = _jobs.get()
        try:
            box.append((True, fn(*args)))
        except BaseException as exc:  # handed back to the caller, raised there
            box.append((False, exc))
        finally:
            done.set()


def compute_thread() -> threading.Thread:
    """The compute thread, started on first use."""
    global _thread
    with _start_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="toolweave-compute", daemon=True)
            _thread.start()
        return _thread


def run(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on the compute thread; its result, or its exception raised here.

    An interrupt (KeyboardInterrupt) while waiting is raised only once the job has
    finished, so no graph still runs on a context its caller goes on to free.
    """
    worker = compute_thread()
    if threading.current_thread() is worker:
        return fn(*args)
    done = threading.Event()
    box: list[Any] = []
    _jobs.put((fn, args, done, box))
    interrupted: BaseException | None = None
    while True:
        try:
            done.wait()
            break
        except BaseException as exc:  # wait for the pass, then raise
            interrupted = exc
    if interrupted is not None:
        raise interrupted
    ok, value = box[0]
    if not ok:
        raise value
    return value


def route_llama(llm: L) -> L:
    """Make llama-cpp-python's `Llama` instance `llm` decode on the compute thread (its
    `_ctx.decode`, the one call of llama-cpp-python 0.3.36 that runs a graph); `llm`."""
    ctx: Any = llm._ctx  # type: ignore[attr-defined]
    decode = ctx.decode
    ctx.decode = lambda batch: run(decode, batch)
    return llm
