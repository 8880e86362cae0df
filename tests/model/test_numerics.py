"""The logit bound verified drafts decide by: measured on the real engine (zero on the
exact engine, above zero on the default one, whose serial steps run on every core) and
kept on disk."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolweave.models import default_model_path
from toolweave.native import numerics
from toolweave.native.constraints import top_with_gap
from toolweave.native.engine import Engine
from toolweave.native.numerics import LogitBound, engine_bound, engine_cache_key, measure_bound
from toolweave.native.threads import default_threads, physical_cores

CORES = len(os.sched_getaffinity(0))
multi_core = pytest.mark.skipif(CORES < 2, reason="needs 2+ cores to run steps on several")


@pytest.fixture(scope="module")
def free_engine() -> Iterator[Engine]:
    """The default engine, serial steps on every core: batched rows differ from them here."""
    with Engine(default_model_path(), n_ctx=8192, n_seq_max=16) as eng:
        yield eng


def _bound(max_delta: float) -> LogitBound:
    return LogitBound(max_delta, 1.5, (300,), (4,), 2, 2, 1.0)


def test_decides_only_past_twice_the_bound() -> None:
    b = _bound(0.5)
    assert b.bound == pytest.approx(0.75)
    assert b.decides(1.51) and not b.decides(1.5) and not b.decides(0.2)
    exact = _bound(0.0)
    assert exact.decides(0.0)  # argmax breaks an exact tie the same way on both paths


def test_top_with_gap() -> None:
    import numpy as np

    best, gap = top_with_gap(np.array([0.5, 3.0, 2.5, -1.0], dtype=np.float32))
    assert (best, gap) == (1, pytest.approx(0.5))
    assert top_with_gap(np.array([1.0, -np.inf], dtype=np.float32)) == (0, float("inf"))


def test_default_threads_are_the_physical_cores(tmp_path: Path) -> None:
    for cpu, core in ((0, 0), (1, 0), (2, 1), (3, 1)):  # two cores with two threads each
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")
    assert physical_cores({0, 1, 2, 3}, sysfs=tmp_path) == 2
    assert physical_cores({0, 1}, sysfs=tmp_path) == 1
    assert physical_cores({7}, sysfs=tmp_path) == 1  # unreadable topology: the CPU count
    assert 1 <= default_threads() <= CORES


@multi_core
def test_the_default_engine_runs_serial_steps_on_every_core(free_engine: Engine) -> None:
    assert free_engine.n_threads == free_engine.n_threads_batch == default_threads() > 1
    assert not free_engine.batch_invariant and free_engine.flash_attn is False


def test_the_exact_engine_is_bit_exact_on_smollm2() -> None:
    with Engine(default_model_path(), n_ctx=2048, n_seq_max=2, batch_invariant=True) as eng:
        assert eng.batch_invariant and eng.n_threads == 1
        assert measure_bound(eng, 1).max_delta == 0.0


@pytest.mark.slow
@multi_core
def test_the_bound_is_measured_kept_and_rebuilt_when_corrupt(
    free_engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bound = measure_bound(free_engine, 15, contexts=(300,), pass_sizes=(2, 4))
    assert bound.max_delta > 0  # several threads: batched rows differ from serial steps
    assert free_engine.seq_len(15) == 0
    fresh = Engine(default_model_path(), n_ctx=2048, n_seq_max=2)
    with fresh:
        # A corrupt file is not trusted: the bound is measured again and the file rewritten
        # (one measurement, about 5 s here; then read back without measuring).
        stored = tmp_path / f"{engine_cache_key(fresh)}.json"
        stored.write_text("{not json")
        with caplog.at_level("WARNING"):
            first = engine_bound(fresh, cache_dir=tmp_path)
        assert "measuring the bound again" in caplog.text
        assert first.max_delta > 0 and fresh.seq_len(1) == 0
        assert json.loads(stored.read_text())["max_delta"] == first.max_delta
        numerics._ENGINE_BOUNDS.pop(fresh)
        assert engine_bound(fresh, cache_dir=tmp_path) == first  # read back, not measured
