"""Every llama.cpp graph runs on one compute thread (`toolweave.native.compute`), so a
pass decoded from any thread of the process gets the engine's threads on every core."""

from __future__ import annotations

import os
import resource
import threading

import numpy as np
import pytest

from toolweave.native import compute
from toolweave.native.engine import BatchToken, Engine

TEXT = "Write a long story about a cat who sails around the world. " * 3


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _steps(engine: Engine, tokens: list[int], n: int) -> tuple[list[np.ndarray], float]:
    """`n` single-token passes after `tokens` in sequence 0: their logits, and the CPU
    cores they kept busy on average (process CPU time over wall time)."""
    import time

    engine.seq_remove(0)
    engine.prefill(0, tokens)
    rows = []
    wall, cpu = time.perf_counter(), _cpu_s()
    for i in range(n):
        rows.append(engine.forward([BatchToken(tokens[i], len(tokens) + i, (0,), True)])[0])
    cores = (_cpu_s() - cpu) / (time.perf_counter() - wall)
    engine.seq_remove(0)
    return rows, cores


def _on_new_thread(fn, *args):  # type: ignore[no-untyped-def]
    out: list = []
    worker = threading.Thread(target=lambda: out.append(fn(*args)))
    worker.start()
    worker.join()
    return out[0]


def test_jobs_from_any_thread_run_on_the_one_compute_thread() -> None:
    ran_on = compute.run(threading.current_thread)
    assert ran_on is compute.compute_thread() and ran_on is not threading.current_thread()
    assert _on_new_thread(compute.run, threading.current_thread) is ran_on
    # A job's exception is raised in its caller; the thread serves the next job.
    with pytest.raises(ZeroDivisionError):
        compute.run(lambda: 1 / 0)
    assert compute.run(sum, [1, 2, 3]) == 6


def test_a_pass_from_another_thread_equals_one_from_this_thread(engine: Engine) -> None:
    tokens = engine.tokenize(TEXT)
    here, _ = _steps(engine, tokens, 6)
    there, _ = _on_new_thread(_steps, engine, tokens, 6)
    assert all(np.array_equal(a, b) for a, b in zip(here, there, strict=True))


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores")
def test_a_worker_thread_decodes_on_every_core_after_this_thread_did(engine: Engine) -> None:
    # Without the compute thread, the OpenMP team of the thread that decoded first left
    # a later decoding thread about one core (1.0-1.5 cores busy here, against 1.9-2.0 on
    # the thread that decoded first; with the compute thread the two are within 7%).
    if engine.n_threads < 2:
        pytest.skip("the engine decodes on one thread")
    tokens = engine.tokenize(TEXT)
    _, here = _steps(engine, tokens, 40)  # this thread decodes first
    if here < 1.5:  # other processes hold the cores: no share to compare with
        pytest.skip(f"only {here:.2f} cores busy decoding on this thread: the machine is loaded")
    _, there = _on_new_thread(_steps, engine, tokens, 40)
    assert there > 0.9 * here, f"{there:.2f} cores busy on a worker thread, {here:.2f} here"
