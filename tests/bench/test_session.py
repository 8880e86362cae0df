"""`toolweave bench session` on a tiny session: two turns of a demo-server conversation on
SmolLM2, offered two tools: three ChatToolweave configurations (one starting read-only
tools early), the grammar baseline and ChatLlamaCpp."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolweave.adapters.bench.session import run_configs, summarize
from toolweave.adapters.bench.session_run import Conversation, conversations
from toolweave.adapters.bench.session_summary import by_source
from toolweave.models import resolve_model

FIELDS = {
    "turn_ms",
    "first_tool_ms",
    "prefilled_tokens",
    "decode_passes",
    "session_drafted",
    "session_accepted",
    "early_tool_starts",
    "model_calls",
    "calls",
    "answer",
    "error",
    "conversation",
    "source",
    "turn",
    "config",
    "phase",
    "settle_ms",
    "first_tool_prefill_ms",
    "first_tool_decode_ms",
    "first_tool_other_ms",
    "turn_prefill_ms",
    "turn_decode_ms",
    "turn_tools_ms",
    "turn_other_ms",
}


@pytest.mark.slow
def test_tiny_session(tmp_path: Path) -> None:
    # The first two turns of the first demo conversation, offered only the two weather tools
    # they need: every configuration prefills the tools' descriptions on each model call.
    (conv,) = conversations(bfcl=0, mcp=1, turns=2, max_tools=4)
    assert conv.expected == ("current_weather", "forecast")
    convs = [Conversation(conv.id, conv.source, conv.turns, conv.expected, conv.expected)]
    names = ["constrained", "toolweave", "grammar", "chat_llama_cpp", "early_tools"]
    records, startup_s = run_configs(
        names,
        convs,
        model_path=resolve_model(None),
        n_ctx=2048,
        max_tokens=32,
        llama_threads=2,
        state_dir=tmp_path,
        phase="warm",
        warm=False,
    )
    assert startup_s > 0
    assert len(records) == len(names) * 2
    for r in records:
        assert set(r) == FIELDS
        assert r["source"] == "mcp"
        assert r["error"] is None, r["error"]
        assert r["calls"], f"{r['config']} made no call on turn {r['turn']}"
        assert r["model_calls"] == 2  # the forced call, then the answer after the result
        assert r["first_tool_ms"] is not None and 0 < r["first_tool_ms"] < r["turn_ms"]
        assert r["prefilled_tokens"] > 0 and r["decode_passes"] > 0
        # The breakdown covers the time: prefill, decoding and the rest add up to the time
        # to the first tool (no tool has run yet), and with the tools to the turn.
        first = [r[f"first_tool_{p}_ms"] for p in ("prefill", "decode", "other")]
        assert min(first) >= 0 and sum(first) == pytest.approx(r["first_tool_ms"], abs=1.0)
        turn = [r[f"turn_{p}_ms"] for p in ("prefill", "decode", "tools", "other")]
        assert min(turn) >= 0 and sum(turn) == pytest.approx(r["turn_ms"], abs=1.0)
        if r["config"] == "early_tools":
            # The weather tools are read-only: each started on the decoder's call, inside
            # the model call, and the agent claimed that run instead of running it again.
            assert r["early_tool_starts"] == 1, r
            assert r["turn_tools_ms"] == 0  # the agent's tool node ran no tool itself
        else:
            assert r["early_tool_starts"] == 0
            assert r["turn_tools_ms"] > 0  # the weather server answered over stdio
        # Prefill is timed on every side: llama.cpp's own counters, toolweave's events.
        assert r["first_tool_prefill_ms"] > 0, r["config"]
        assert r["first_tool_decode_ms"] > 0, r["config"]
    by = {(r["config"], r["turn"]): r for r in records}
    for turn in (0, 1):
        assert by["toolweave", turn]["calls"] == by["constrained", turn]["calls"]
        assert by["early_tools", turn]["calls"] == by["toolweave", turn]["calls"]
    # The second turn's prompt extends the first's: the saved states cover most of it.
    assert by["toolweave", 1]["prefilled_tokens"] < by["constrained", 1]["prefilled_tokens"]
    summary = summarize(records)["warm"]
    assert summary["toolweave"]["same_calls_as_constrained"] == 2
    assert summary["constrained"]["turns_with_tool"] == 2
    assert summary["constrained"]["breakdown"]["first_tool_prefill_ms"] > 0


@pytest.mark.slow
def test_warm_up_measures_the_logit_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A warm process has paid the one-time measurement a ChatToolweave engine makes at its
    # first tool request: the warm-up measures it on the empty cache, and keeps it on disk.
    from toolweave.adapters.bench.session_models import make_config
    from toolweave.adapters.bench.session_run import warm_up
    from toolweave.native.numerics import engine_cache_key

    monkeypatch.setenv("TOOLWEAVE_CACHE_DIR", str(tmp_path / "cache"))
    cfg = make_config(
        "toolweave",
        resolve_model(None),
        n_ctx=1024,
        max_tokens=8,
        llama_threads=2,
        state_dir=tmp_path,
    )
    try:
        engine = cfg.chat.engine  # type: ignore[attr-defined]
        stored = tmp_path / "cache" / "numerics" / f"{engine_cache_key(engine)}.json"
        assert not stored.exists()
        warm_up([cfg])
        assert stored.is_file()
    finally:
        cfg.close()


def _record(source: str, config: str, turn: int, first_tool_ms: float) -> dict[str, object]:
    record: dict[str, object] = {field: 0.0 for field in FIELDS if field.endswith("_ms")}
    record.update(
        first_tool_ms=first_tool_ms, turn_ms=2 * first_tool_ms, prefilled_tokens=10,
        decode_passes=5, calls=[{"name": "t", "arguments": {}}], error=None,
        conversation=f"{source}_0", source=source, turn=turn, config=config, phase="warm",
    )  # fmt: skip
    return record


def test_ratios_per_source_come_from_that_sources_turns_only() -> None:
    times = {("bfcl", "chat_llama_cpp"): 300.0, ("bfcl", "toolweave"): 100.0}
    times |= {("mcp", "chat_llama_cpp"): 200.0, ("mcp", "toolweave"): 400.0}
    records = [
        _record(source, config, turn, ms)
        for (source, config), ms in times.items()
        for turn in (0, 1)
    ]
    parts = by_source(records)
    assert set(parts) == {"bfcl", "mcp"}
    assert parts["bfcl"]["ratios"]["warm"]["first_tool_vs_chat_llama_cpp"] == pytest.approx(3.0)
    assert parts["mcp"]["ratios"]["warm"]["first_tool_vs_chat_llama_cpp"] == pytest.approx(0.5)
    assert parts["mcp"]["summary"]["warm"]["toolweave"]["turns"] == 2
    # One source only: the run's own ratios are the source's.
    assert by_source([r for r in records if r["source"] == "mcp"]) == {}
