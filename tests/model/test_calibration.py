"""The engine cost table: quick measurement on the real SmolLM2, interpolation, modes."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from toolweave.errors import SequenceError
from toolweave.eval.modebench import ModeCost, compare_modes
from toolweave.models import default_model_path
from toolweave.native.calibration import CostTable, measure_costs, scratch_sequences
from toolweave.native.engine import Engine
from toolweave.results import CallResult, CallStats
from toolweave.toolspec import ToolCall


@pytest.fixture(scope="module")
def cal_engine() -> Iterator[Engine]:
    with Engine(default_model_path(), n_ctx=1024, n_seq_max=16) as eng:
        yield eng


@pytest.fixture(scope="module")
def quick_table(cal_engine: Engine) -> CostTable:
    return measure_costs(cal_engine, quick=True)


def table(**changes: Any) -> CostTable:
    """A hand-written table with SmolLM2-like numbers (docs/architecture.md)."""
    base = CostTable(
        model="test",
        n_threads=2,
        context_tokens=64,
        serial_step_ms=8.0,
        sequences_ms={1: 8.0, 2: 15.0, 4: 23.0, 8: 35.0},
        verify_all_ms={1: 8.0, 2: 15.0, 4: 22.0, 8: 34.0},
        verify_last_ms={1: 8.0, 2: 13.0, 4: 19.0, 8: 29.0},
        prefill_ms_per_token=2.5,
        state_tokens=64,
        state_bytes=1000,
        state_get_ms=1.0,
        state_set_ms=1.0,
        state_save_ms=2.0,
        state_load_ms=2.0,
        repeats=2,
        quick=True,
    )
    return replace(base, **changes)


# ---------------------------------------------------------------------- on the model
def test_quick_costs_are_positive(quick_table: CostTable) -> None:
    t = quick_table
    assert t.quick and t.repeats == 2 and t.context_tokens == 64
    assert t.serial_step_ms > 0 and t.prefill_ms_per_token > 0
    assert t.state_bytes > 0 and t.state_tokens == 64
    for ms in (t.state_get_ms, t.state_set_ms, t.state_save_ms, t.state_load_ms):
        assert ms > 0
    for points in (t.sequences_ms, t.verify_all_ms, t.verify_last_ms):
        assert set(points) == {1, 2, 4, 8}
        assert all(ms > 0 for ms in points.values())
    # No wall-clock bound: on an idle 2-core machine quick takes about 0.5 s, but these
    # tests share the CPU with other jobs. Its size is what keeps it quick (checked above).
    assert t.measure_ms > 0


def test_pass_cost_grows_with_k(quick_table: CostTable) -> None:
    # k=8 costs about 4x a serial step on this CPU: a margin no scheduling noise closes.
    t = quick_table
    for points in (t.sequences_ms, t.verify_all_ms, t.verify_last_ms):
        assert points[1] < points[8]
    assert t.pass_ms(8, 8) >= t.pass_ms(8, 1) > t.pass_ms(1, 1)
    assert t.sequences_ratio(1) == pytest.approx(1.0)


def test_measurement_leaves_engine_as_found(cal_engine: Engine) -> None:
    eng = cal_engine
    eng.seq_remove(0)
    eng.prefill(0, eng.tokenize("The user asks for the weather in Paris, in celsius."))
    length, state = eng.seq_len(0), eng.state_get(0)
    counters = eng.counters
    before = counters.snapshot()

    measure_costs(eng, quick=True)

    assert eng.seq_len(0) == length
    assert eng.state_get(0) == state
    assert eng.counters is counters and eng.counters == before
    assert all(eng.seq_len(s) == 0 for s in scratch_sequences(eng))


def test_busy_scratch_sequence_is_refused(cal_engine: Engine) -> None:
    top = scratch_sequences(cal_engine)[-1]
    cal_engine.prefill(top, cal_engine.tokenize("occupied"))
    try:
        with pytest.raises(SequenceError, match="scratch"):
            measure_costs(cal_engine, quick=True)
        assert cal_engine.seq_len(top) > 0  # refused before touching anything
    finally:
        cal_engine.seq_remove(top)


# ---------------------------------------------------------------------- pure logic
def test_pass_ms_hits_measured_points_and_interpolates() -> None:
    t = table()
    assert t.pass_ms(4, 4) == pytest.approx(22.0)
    assert t.pass_ms(4, 1) == pytest.approx(19.0)
    assert t.pass_ms(4, 4, sequences=True) == pytest.approx(23.0)
    assert 13.0 < t.pass_ms(3, 1) < 19.0
    assert t.pass_ms(16, 1) == pytest.approx(29.0 + 8 * 2.5)
    assert t.pass_ms(4, 0) < t.pass_ms(4, 1) < t.pass_ms(4, 2) < t.pass_ms(4, 4)
    assert t.verify_ratio(2) == pytest.approx(15.0 / 8.0)
    with pytest.raises(ValueError):
        t.pass_ms(2, 3)


def test_to_dict_round_trips() -> None:
    t = table()
    d = t.to_dict()
    assert d["ratios"]["verify_last"]["4"] == pytest.approx(19.0 / 8.0)
    assert CostTable.from_dict(d) == t


def result(mode: str, ms: float, tokens: int, name: str = "f") -> CallResult:
    stats = CallStats(forward_passes=tokens + 1, output_tokens=tokens, total_ms=ms)
    return CallResult(mode, (ToolCall(name, {}),), "", (), stats)


def test_compare_modes_interleaves_and_reduces() -> None:
    seen: list[tuple[int, str]] = []

    def run(request: int, mode: str) -> CallResult:
        ms = {"slow": 40.0, "quick": 10.0}[mode] * (request + 1)
        return result(mode, ms, 10, name="f" if request != 1 or mode == "slow" else "g")

    cmp = compare_modes(
        [0, 1, 2], ("slow", "quick"), run, on_result=lambda i, m, r: seen.append((i, m))
    )
    assert seen == [(0, "slow"), (0, "quick"), (1, "quick"), (1, "slow"), (2, "slow"), (2, "quick")]
    assert cmp.ratio("slow", "quick") == pytest.approx(4.0)
    assert cmp.agreement == pytest.approx(2 / 3)
    assert cmp.costs["quick"].ms_per_token == pytest.approx(math.cbrt(6.0))


def test_mode_cost_skips_empty_outputs_in_ms_per_token() -> None:
    cost = ModeCost.from_results("m", [result("m", 20.0, 10), result("m", 5.0, 0)])
    assert cost.ms_per_token == pytest.approx(2.0)
    assert cost.output_tokens == pytest.approx(5.0)


def test_pass_times_replace_the_table_where_measured() -> None:
    from toolweave.native.learning import PassTimes

    table = {1: 5.0, 2: 8.0, 3: 10.0}
    times = PassTimes(weight=0.5)
    assert times.ms(2, table) == 8.0  # nothing measured: the table
    times.observe(1, 10.0)  # plain steps take twice the table's
    assert times.ms(1, table) == 10.0
    assert times.ms(3, table) == 20.0  # unmeasured sizes scale with the plain step
    times.observe(3, 30.0)
    times.observe(3, 20.0)
    assert times.ms(3, table) == 25.0  # a running mean, weight 0.5
    with pytest.raises(ValueError):
        PassTimes(weight=0.0)
