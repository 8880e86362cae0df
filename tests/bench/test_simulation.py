"""The memory-bound simulation (`toolweave.adapters.bench.simulation`) on a small variant.

The 1B build is not run here: a 2-layer, 256-wide random-weight qwen2 model (about 37 MB,
built once per cache in a few seconds) checks the builder and the report; the cost model
is checked on hand-made tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolweave.adapters.bench.gguf_meta import read_gguf_metadata
from toolweave.adapters.bench.simulation import (
    CallTrace,
    bench_simulation,
    build_sim_model,
    predict_ms,
    trace_call,
)
from toolweave.adapters.bench.zoo import ZooUnavailable
from toolweave.native.calibration import CostTable
from toolweave.native.decode.values import parallel_pays
from toolweave.native.engine import Engine

LAYERS, WIDTH = 2, 256


@pytest.fixture(scope="module")
def small_model() -> Path:
    pytest.importorskip("gguf", reason="the simulation model needs the gguf package")
    try:
        return build_sim_model(LAYERS, WIDTH)
    except ZooUnavailable as exc:
        pytest.skip(f"the llama-cpp-python sdist is unavailable: {exc}")


@pytest.mark.slow
def test_the_builder_writes_a_qwen2_gguf_once(small_model: Path) -> None:
    meta = {e.name: e.value for e in read_gguf_metadata(small_model)}
    assert meta["general.architecture"] == "qwen2"
    assert meta["qwen2.block_count"] == LAYERS and meta["qwen2.embedding_length"] == WIDTH
    assert meta["tokenizer.ggml.pre"] == "qwen2" and len(meta["tokenizer.ggml.tokens"]) == 151936
    said: list[str] = []
    assert build_sim_model(LAYERS, WIDTH, progress=said.append) == small_model
    assert said == []  # found in the cache: nothing built, nothing said
    with Engine(small_model, n_ctx=256, n_seq_max=2) as engine:
        assert engine.tokenize("Hello world") == [9707, 1879]  # Qwen2's ids
        assert "<tool_call>" in (engine.chat_template or "")


def test_the_trace_finds_required_values_by_token() -> None:
    pieces = [
        b'{"name":',
        b' "f",',
        b' "arguments": {',
        b'"a":',
        b' "x',
        b'y"',
        b', "b":',
        b" 12",
        b"}}",
    ]
    chosen = [False, True, False, False, True, True, False, True, False]
    trace = trace_call(pieces, chosen, [("f", ["a", "b"])])
    assert trace.regions == ((3, 8, (2, 1)),)
    assert trace.chosen == tuple(chosen)


def _table(step: float, k_cost: float) -> CostTable:
    """A pass of k tokens (or k sequences) costs `step * (1 + k_cost * (k - 1))`."""
    ks = {k: step * (1 + k_cost * (k - 1)) for k in range(1, 17)}
    return CostTable(
        model="hand-made", n_threads=1, context_tokens=256, serial_step_ms=step,
        sequences_ms=ks, verify_all_ms=ks, verify_last_ms=ks, prefill_ms_per_token=k_cost * step,
        state_tokens=64, state_bytes=1, state_get_ms=1, state_set_ms=1, state_save_ms=1,
        state_load_ms=1, repeats=1, quick=False,
    )  # fmt: skip


def _three_values() -> CallTrace:
    # 4 forced head tokens, a chosen name token, then three values of 4 chosen tokens each
    # behind forced keys, and a forced close.
    chosen = [False] * 4 + [True] + ([False] + [True] * 4) * 3 + [False]
    return CallTrace(tuple(chosen), ((5, 20, (4, 4, 4)),))


def test_flat_passes_predict_fast_faster_than_jump() -> None:
    flat = _table(10.0, 0.0)  # a k-token pass costs one step: memory bound
    assert parallel_pays(flat, 3, 4.0)
    jump = predict_ms(_three_values(), flat, False)
    fast = predict_ms(_three_values(), flat, True)
    assert jump == pytest.approx(13 * 10.0)  # one pass per chosen token
    # The name's pass, a flush, the skeleton, 4 batched value steps and the write-back.
    assert fast == pytest.approx(8 * 10.0)


def test_passes_costing_k_steps_predict_no_gain() -> None:
    linear = _table(10.0, 1.0)  # a k-token pass costs k steps: compute bound
    assert not parallel_pays(linear, 3, 4.0)
    jump = predict_ms(_three_values(), linear, False)
    assert predict_ms(_three_values(), linear, lambda n: parallel_pays(linear, n, 4.0)) == jump
    assert predict_ms(_three_values(), linear, True) >= jump


def test_the_report_is_labelled_and_predicted_from_its_tables(
    small_model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sim.json"
    bench_simulation(out, calls=2, layers=LAYERS, width=WIDTH, measure=1, max_tokens=32, repeats=1)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["simulation"] is True and "SIMULATION" in report["caveat"]
    assert set(report["tables"]) == {"sim", "smollm2"} and len(report["calls"]) == 2
    sim = report["tables"]["sim"]
    assert set(sim["verify_all_ms"]) == {str(k) for k in range(1, 17)}
    assert set(sim["sequences_ms"]) == {str(k) for k in range(1, 17)}
    assert set(report["decisions"]["sim"]) == {
        "parallel_values",
        "batch_pays",
        "forecast_draft_length",
    }
    assert set(report["calls"][0]["measured"]) == {"jump", "fast"}
    tables = {name: CostTable.from_dict(t) for name, t in report["tables"].items()}
    for row in report["calls"]:
        t = row["trace"]
        trace = CallTrace(
            tuple(c == "c" for c in t["chosen"]),
            tuple((a, b, tuple(n)) for a, b, n in t["regions"]),
        )
        assert sum(trace.chosen) == row["chosen_tokens"] > 0
        for name, table in tables.items():
            assert row["predicted"][name]["jump_ms"] == pytest.approx(
                predict_ms(trace, table, False)
            )
            assert row["predicted"][name]["fast_parallel_ms"] == pytest.approx(
                predict_ms(trace, table, True)
            )
