"""The `constrained`, `jump` and `grammar` baselines on the real SmolLM2 model."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolweave.errors import ContextFullError, ModeError, ToolSpecError
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolSpec, load_tools_file

TRAVEL_TOOLS = Path(__file__).resolve().parents[2] / "examples" / "tools" / "travel_tools.json"


def _query_for(tool: ToolSpec, queries: list[dict[str, str]]) -> str:
    for q in queries:
        if q["tool"] == tool.name:
            return q["query"]
    return f"Please use {tool.name}."


def _features(tool: ToolSpec) -> set[str]:
    """The JSON types and keywords of `tool`'s arguments, "optional" if it has optional
    ones, "none" if it takes none."""
    seen: set[str] = set()

    def walk(schema: object) -> None:
        if isinstance(schema, dict):
            if "enum" in schema:
                seen.add("enum")
            t = schema.get("type")
            if isinstance(t, str):
                seen.add(t)
            for v in schema.values():
                walk(v)
        elif isinstance(schema, list):
            for v in schema:
                walk(v)

    for key in tool.argument_order:
        walk(tool.property_schema(key))
    if tool.optional:
        seen.add("optional")
    if not tool.argument_order:
        seen.add("none")
    return seen


def _covering(tools: tuple[ToolSpec, ...]) -> list[ToolSpec]:
    """Few tools that together have every feature of `tools`, plus one with required
    arguments only: each next the one that adds most features not yet covered."""
    left = {t.name: _features(t) for t in tools}
    chosen: list[ToolSpec] = []
    covered: set[str] = set()
    while True:
        best = max(tools, key=lambda t: len(left[t.name] - covered))
        if not left[best.name] - covered:
            break
        chosen.append(best)
        covered |= left[best.name]
    required_only = next(t for t in tools if t.argument_order and not t.optional)
    return [*chosen, required_only]


def test_assistant_tools_cover_every_type(assistant_tools: tuple[ToolSpec, ...]) -> None:
    assert len(assistant_tools) >= 20
    seen = set().union(*(_features(t) for t in assistant_tools))
    assert {"string", "number", "integer", "boolean", "array", "object", "enum"} <= seen
    assert {"none", "optional"} <= seen
    assert sum(1 for t in assistant_tools if t.optional) >= 10
    assert set().union(*(_features(t) for t in _covering(assistant_tools))) == seen


@pytest.mark.slow
def test_constrained_each_kind_of_tool_alone_validates(
    engine: Engine, assistant_tools: tuple[ToolSpec, ...], tool_queries: list[dict[str, str]]
) -> None:
    # Tools that between them have every argument type, enums, objects, arrays, optional
    # arguments and none (the choice among all 24 is tested below).
    for tool in _covering(assistant_tools):
        caller = ToolCaller(engine, [tool], max_tokens=320)
        result = caller.call(_query_for(tool, tool_queries), "constrained")
        assert result.finish_reason == "stop", (tool.name, result.text)
        assert not result.invalid, (tool.name, result.invalid)
        assert [c.name for c in result.calls] == [tool.name]
        tool.validate_call(result.calls[0].arguments)
        stats = result.stats
        assert stats.decoded_tokens == stats.output_tokens == len(result.tokens)
        assert stats.decode_passes == stats.decoded_tokens - 1
        assert stats.time_to_tool_ms is not None and stats.time_to_tool_ms <= stats.total_ms


def test_constrained_chooses_among_all_tools_and_validates(
    engine: Engine, tool_queries: list[dict[str, str]]
) -> None:
    # The README's six travel tools: a prompt of ~950 tokens (the 24 assistant tools take
    # ~3,250, about 16 s of prefill here, and the grammar would be the same kind).
    tools = load_tools_file(TRAVEL_TOOLS)
    caller = ToolCaller(engine, tools, max_tokens=320)
    names = {t.name for t in tools}
    for tool in ("get_current_weather", "convert_units"):  # each call bound to all six
        q = next(q for q in tool_queries if q["tool"] == tool)
        result = caller.call(q["query"], "constrained")
        if result.finish_reason == "length":
            continue  # a 135M model may loop inside a long string; truncation is reported
        assert not result.invalid, (q, result.text, result.invalid)
        assert len(result.calls) == 1 and result.calls[0].name in names


def test_jump_prefills_forced_tokens(
    engine: Engine, assistant_tools: tuple[ToolSpec, ...], tool_queries: list[dict[str, str]]
) -> None:
    tool = assistant_tools[0]
    caller = ToolCaller(engine, [tool], max_tokens=320)
    query = _query_for(tool, tool_queries)
    serial = caller.call(query, "constrained")
    jumped = caller.call(query, "jump")
    assert not jumped.invalid and jumped.calls
    assert jumped.stats.decoded_tokens < serial.stats.decoded_tokens
    assert jumped.stats.decode_passes < serial.stats.decode_passes
    # One tool: the whole call opening and name are forced.
    assert jumped.text.startswith(f'<tool_call>{{"name":"{tool.name}","arguments":{{')


def test_grammar_baseline_same_result_type(
    engine: Engine, assistant_tools: tuple[ToolSpec, ...], tool_queries: list[dict[str, str]]
) -> None:
    tool = assistant_tools[0]
    caller = ToolCaller(engine, [tool], max_tokens=320)
    result = caller.call(_query_for(tool, tool_queries), "grammar")
    assert result.mode == "grammar"
    assert not result.invalid and [c.name for c in result.calls] == [tool.name]
    assert result.stats.decoded_tokens > 0


def test_bad_requests_raise_clear_errors(
    engine: Engine, assistant_tools: tuple[ToolSpec, ...]
) -> None:
    caller = ToolCaller(engine, assistant_tools[:2])
    with pytest.raises(ModeError, match="unknown mode"):
        caller.call("hi", "warp")
    with pytest.raises(ContextFullError):
        caller.call("word " * 9000, "constrained")
    with pytest.raises(ToolSpecError):
        ToolCaller(engine, [])
    with pytest.raises(ToolSpecError):
        ToolCaller(engine, [assistant_tools[0], assistant_tools[0]])
