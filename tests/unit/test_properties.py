"""Property tests (hypothesis) over the pure pipeline: tool schemas, plans, call texts.

Each property runs 2,000 examples and asserts that bad input gives one of the
documented errors (`ToolSpecError`, `ConstraintError`, `CallFormatError`, `PlanError`,
all `ToolweaveError`s) or a well-formed value, never another exception. No model here:
the DAG executor runs generated plans on real async Python tools.

Structured inputs (schemas, calls, plans, mutations) are built by plain `random.Random`
generators from a seed hypothesis draws: hypothesis's own recursive strategies cost
10-20 ms per example here, a seeded generator well under one. A failure prints the seed,
and ``generated(seed)`` rebuilds the input.
"""

from __future__ import annotations

import json
import math
import os
import random
import string
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from toolweave.errors import CallFormatError, ConstraintError, ToolSpecError, ToolweaveError
from toolweave.eval.scoring import ExpectedCall, match_calls
from toolweave.formats import FORMATS, from_literal, get_format, to_literal
from toolweave.grammar.call import arguments_schema, call_grammar, value_grammar, value_schema
from toolweave.grammar.value import compile_value
from toolweave.plan.executor import PlanRun, TaskEvent, execute_plan, execute_plan_text
from toolweave.plan.format import Plan, PlanError, PlanTask, TaskRef, format_plan
from toolweave.plan.parse import PlanStreamParser, parse_plan
from toolweave.tools import Tool, ToolResult
from toolweave.toolspec import ToolCall, ToolSpec, load_tools

#: Inputs per property: 500 by default; TOOLWEAVE_PROPERTY_EXAMPLES=5000 for a deeper search.
EXAMPLES = settings(
    max_examples=int(os.environ.get("TOOLWEAVE_PROPERTY_EXAMPLES", "500")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
SEEDS = st.integers(0, 2**32 - 1)

# -- random JSON values and schemas ------------------------------------------------------

_KEYS = ["a", "b", "city", "n", "x-y", "", "é", "$ref", "type", "1", "q"]
_TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]
_ODD_TYPES = ["dict", "float", "tuple", "any", "str", "", "Object"]
_REFS = ["#", "#/properties/a", "#/$defs/A", "#/definitions/B", "#/nowhere", "x.json#/y", "#/"]
_SCHEMA_KEYS = [
    "type", "type", "type", "properties", "required", "enum", "const", "anyOf", "oneOf",
    "allOf", "items", "additionalProperties", "minLength", "maxLength", "minItems", "maxItems",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "$ref",
    "$defs", "definitions", "pattern", "format", "not", "nullable", "description", "default",
    "prefixItems", "patternProperties", "uniqueItems", "contains", "if", "title", "x-extra",
]  # fmt: skip


def rand_json(rng: random.Random, depth: int = 2) -> Any:
    """A JSON-ish value, floats included (NaN and infinities too)."""
    kind = rng.randrange(9 if depth > 0 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, 7, 10**6, -(10**9), 2**63])
    if kind == 3:
        return rng.choice([0.5, -2.25, 1e300, math.inf, -math.inf, math.nan, 3.0])
    if kind in (4, 5, 6):
        return "".join(rng.choice('ab é"\\\n$1{}') for _ in range(rng.randrange(6)))
    if kind == 7:
        return [rand_json(rng, depth - 1) for _ in range(rng.randrange(3))]
    return {rng.choice(_KEYS): rand_json(rng, depth - 1) for _ in range(rng.randrange(3))}


def _keyword_value(rng: random.Random, key: str, depth: int) -> Any:
    """A plausible value per keyword, with wrong-typed ones mixed in (1 in 40)."""
    if rng.random() < 0.025:
        return rand_json(rng)
    if key == "type":
        pool = _TYPES * 6 + _ODD_TYPES
        if rng.random() < 0.3:
            return [rng.choice(pool) for _ in range(rng.randrange(4))]
        return rng.choice(pool)
    if key in ("properties", "$defs", "definitions", "patternProperties"):
        return {rng.choice(_KEYS): rand_schema(rng, depth) for _ in range(rng.randrange(4))}
    if key == "required":
        return [rng.choice(_KEYS) for _ in range(rng.randrange(3))]
    if key == "enum":
        return [rand_json(rng, 1) for _ in range(rng.randrange(4))]
    if key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        return [rand_schema(rng, depth) for _ in range(rng.randrange(4))]
    if key in ("items", "additionalProperties", "not", "contains", "if"):
        return rng.choice([True, False, rand_schema(rng, depth), rand_schema(rng, depth)])
    if key in ("minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum"):
        return rng.choice([0, 1, 2, 5, 300, 10**30, 2.0, 0, 1, 3, -1, 0.5])
    if key in ("exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        return rng.choice([0, 1, -3, 0.5, True, False])
    if key == "$ref":
        return rng.choice(_REFS)
    if key in ("pattern", "format"):
        return rng.choice(["^[a-z]+$", "date", "email", "(", "uuid", "date-time"])
    if key in ("nullable", "uniqueItems"):
        return rng.random() < 0.5
    return rand_json(rng, 1)


def rand_schema(rng: random.Random, depth: int = 3) -> Any:
    """A JSON-Schema-like value: mostly dicts of schema keywords, nested a few levels."""
    roll = rng.random()
    if depth <= 0 or roll < 0.15:
        return rng.choice([{}, True, False, {"type": rng.choice(_TYPES)}, {"type": "string"}])
    keys = rng.sample(_SCHEMA_KEYS, rng.randrange(1, 5))
    return {key: _keyword_value(rng, key, depth - 1) for key in keys}


def rand_parameters(rng: random.Random) -> Any:
    """A tool's parameters: usually an object schema with properties, sometimes junk."""
    if rng.random() < 0.1:
        return rng.choice([rand_json(rng), rand_schema(rng)])
    properties = {rng.choice(_KEYS): rand_schema(rng) for _ in range(rng.randrange(5))}
    names = sorted(properties) + (["a"] if rng.random() < 0.05 else [])
    extra = rand_schema(rng, 2)
    params: dict[str, Any] = extra if rng.random() < 0.3 and isinstance(extra, dict) else {}
    params["type"] = rng.choice(["object"] * 18 + ["dict", "string"])
    params["properties"] = properties
    params["required"] = rng.sample(names, rng.randrange(len(names) + 1))
    return params


# -- tool schemas ------------------------------------------------------------------------


def _compile_everything(spec: ToolSpec) -> None:
    """Every grammar builder the decoders use, for one spec."""
    for name in ("hermes", "json", "llama3"):
        assert call_grammar(get_format(name), [spec], max_calls=None).startswith("start: ")
    assert call_grammar(get_format("hermes"), [spec, spec.with_read_only(True)], max_calls=3)
    arguments_schema(spec)
    for key in spec.argument_order:
        value_schema(spec, key)
        for flavor in ("json", "python"):
            try:
                grammar = value_grammar(spec, key, suffix=[",", "}"], flavor=flavor)
            except ConstraintError:
                continue
            assert grammar.startswith("start: ")


@EXAMPLES
@given(SEEDS)
def test_tool_schemas_load_and_compile_or_raise_documented_errors(seed: int) -> None:
    rng = random.Random(seed)
    tool: dict[str, Any] = {"name": rng.choice([*"abcdefghijk", "t.x-1", "bad name"])}
    shape = rng.choice(["plain", "openai", "mcp"])
    tool["inputSchema" if shape == "mcp" else "parameters"] = rand_parameters(rng)
    data: Any = {"type": "function", "function": tool} if shape == "openai" else tool
    try:
        spec = ToolSpec.from_dict(data)
    except ToolSpecError as exc:
        assert exc.problem and str(exc).startswith("tool ")
        return
    assert spec.parameters["type"] == "object"
    assert set(spec.argument_order) == set(spec.parameters["properties"])
    try:
        _compile_everything(spec)
    except (ConstraintError, ToolSpecError) as exc:
        assert isinstance(exc, ToolweaveError) and str(exc)
    # The spec's dict form loads back to the same spec.
    assert ToolSpec.from_dict(spec.to_dict()) == spec


@EXAMPLES
@given(SEEDS)
def test_value_compiler_on_valid_json_schemas(seed: int) -> None:
    # Its contract: rules or ConstraintError for any valid JSON Schema, whatever the root
    # (ToolSpec validates every schema it accepts, so invalid ones never get here).
    rng = random.Random(seed)
    schema = rand_schema(rng)
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError:
        return
    for flavor in ("json", "python"):
        try:
            root, rules = compile_value(schema, flavor=flavor, rule_prefix="v")
        except ConstraintError as exc:
            assert str(exc)
            continue
        assert root == "v" and rules[0].startswith("v: ")


@EXAMPLES
@given(SEEDS)
def test_tool_lists_load_or_raise_tool_spec_error(seed: int) -> None:
    rng = random.Random(seed)
    items = [
        rng.choice(
            [
                rand_json(rng, 1),
                {"name": rng.choice(["a", "a", "b", "b c"]), "parameters": rand_parameters(rng)},
            ]
        )
        for _ in range(rng.randrange(4))
    ]
    try:
        specs = load_tools(items)
    except ToolSpecError:
        return
    assert len({spec.name for spec in specs}) == len(specs) == len(items)


# -- call texts --------------------------------------------------------------------------

CALL_SPECS = load_tools(
    [
        {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
        {
            "name": "add",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    ]
)
_CALL_BY_NAME = {spec.name: spec for spec in CALL_SPECS}
_NAMES = ["get_weather", "add", "f", "math.sqrt", "x_1", "city", "if", "é", "a b", "class"]
_CALL_PIECES = [
    "<tool_call>", "</tool_call>", "{", "}", "[", "]", '"name"', ":", ",", '"arguments"',
    '"parameters"', '"get_weather"', '"add"', '"city"', '"Paris"', "1e999", "-", "1", ";",
    "\n", " ", "(", ")", "=", "get_weather", "add", "city", "a", "**", "*", "$1", "'", '"',
    "\\", "NaN", "true", "null", "None", "<|python_tag|>", "9" * 30, "\x00", "😀",
]  # fmt: skip


def rand_calls(rng: random.Random) -> list[ToolCall]:
    calls = []
    for _ in range(rng.randrange(1, 4)):
        arguments = {rng.choice(_NAMES): rand_json(rng) for _ in range(rng.randrange(4))}
        calls.append(ToolCall(rng.choice(_NAMES), arguments))
    return calls


def mutate(rng: random.Random, text: str, pieces: list[str]) -> str:
    """Delete, insert, duplicate or deeply nest a slice of `text`, a few times."""
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + rng.randrange(9))
        action = rng.randrange(7)
        if action < 2:
            text = text[:i] + text[j:]
        elif action < 5:
            text = text[:i] + rng.choice(pieces) + text[i:]
        elif action == 5:
            text = text[:j] + text[i:j] + text[j:]
        else:  # parsers must not blow the stack on deep nesting
            depth = rng.choice([5, 300, 5000])
            text = text[:i] + rng.choice(["[", "(", "-", "{"]) * depth + text[i:]
    return text


def parse_and_validate(fmt_name: str, text: str) -> list[ToolCall]:
    """What a decoder does with model text: parse, validate each call, score the calls."""
    try:
        calls = get_format(fmt_name).parse(text)
    except CallFormatError as exc:
        assert str(exc)
        return []
    for call in calls:
        assert isinstance(call, ToolCall) and isinstance(call.name, str)
        assert isinstance(call.arguments, Mapping)
        spec = _CALL_BY_NAME.get(call.name)
        if spec is not None:
            try:
                spec.validate_call(call.arguments)
            except ToolSpecError as exc:
                assert exc.tool == call.name
    expected = [ExpectedCall("get_weather", {"city": ("Paris",), "unit": ("", "celsius")})]
    match_calls(calls, expected, specs=CALL_SPECS)
    return calls


@EXAMPLES
@given(SEEDS)
def test_serialized_calls_parse_back_equal(seed: int) -> None:
    rng = random.Random(seed)
    calls = rand_calls(rng)
    for fmt_name in FORMATS:
        fmt = get_format(fmt_name)
        try:
            text = fmt.serialize(calls)
        except CallFormatError:  # pycall only: a name or value with no Python spelling
            assert fmt_name == "pycall"
            continue
        parsed = fmt.parse(text)
        assert json.dumps([c.to_dict() for c in parsed], sort_keys=True) == json.dumps(
            [c.to_dict() for c in calls], sort_keys=True
        )


@EXAMPLES
@given(SEEDS)
def test_mutated_call_texts_parse_or_raise_call_format_error(seed: int) -> None:
    rng = random.Random(seed)
    calls = rand_calls(rng)
    for fmt_name in FORMATS:
        try:
            text = get_format(fmt_name).serialize(calls)
        except CallFormatError:
            text = get_format("json").serialize(calls)
        parse_and_validate(fmt_name, mutate(rng, text, _CALL_PIECES))


@EXAMPLES
@given(st.text(max_size=60), SEEDS)
def test_random_call_texts_parse_or_raise_call_format_error(text: str, seed: int) -> None:
    rng = random.Random(seed)
    pieces = "".join(rng.choice(_CALL_PIECES) for _ in range(rng.randrange(30)))
    for fmt_name in FORMATS:
        parse_and_validate(fmt_name, text)
        parse_and_validate(fmt_name, pieces)


@EXAMPLES
@given(SEEDS)
def test_literals_round_trip_or_raise_call_format_error(seed: int) -> None:
    value = rand_json(random.Random(seed), 3)
    try:
        text = to_literal(value)
    except CallFormatError:
        return  # NaN has no literal
    assert json.dumps(from_literal(text), sort_keys=True) == json.dumps(value, sort_keys=True)


# -- plans -------------------------------------------------------------------------------

PLAN_TOOLS = load_tools(
    [
        {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["query"],
            },
        },
        {
            "name": "add",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
        {
            "name": "send",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                "required": ["to"],
            },
        },
        {"name": "boom", "parameters": {"type": "object", "properties": {}}},
        {"name": "sleepy", "parameters": {"type": "object", "properties": {}}},
    ]
)
PLAN_SPECS = {spec.name: spec for spec in PLAN_TOOLS}
READ_ONLY = frozenset({"search", "add"})
_TEXT = string.ascii_letters + " _{}0123456789\"'\\\n"  # no "$": "$1" would be a reference
_PLAN_PIECES = [
    "1. ", "2. ", "3.", "0. ", "10. ", "join()", "<END_OF_PLAN>", "Thought: ", "\n", "\n",
    'search(query="x")', "search(", "query=", "$1", "${2}", "$9", '"', ")", "add(1, 2)",
    "add(a=$1, b=$2)", 'send(to="bob")', "boom()", "nope()", "**kw", "*a", "[", "]", "{",
    "}", ":", ",", "=", "\\", "'", "-" * 700, "9" * 20, "lambda: 0", "(" * 250, "$" + "1" * 5000,
]  # fmt: skip


def _dependencies(arguments: Mapping[str, Any]) -> tuple[int, ...]:
    return tuple(sorted({v.index for v in arguments.values() if isinstance(v, TaskRef)}))


def rand_plan(rng: random.Random) -> Plan:
    """A well-formed plan over PLAN_TOOLS whose arguments may use earlier results."""
    tasks: list[PlanTask] = []
    index = 0
    for _ in range(rng.randrange(7)):
        index += rng.choice([1, 1, 1, 2])
        earlier = [task.index for task in tasks]

        def value(make: Callable[[], Any], earlier: list[int] = earlier) -> Any:
            if earlier and rng.random() < 0.35:
                return TaskRef(rng.choice(earlier))
            return make()

        def text() -> str:
            return "".join(rng.choice(_TEXT) for _ in range(rng.randrange(10)))

        tool = rng.choice(sorted(PLAN_SPECS))
        arguments: dict[str, Any] = {}
        if tool == "search":
            arguments["query"] = value(text)
            if rng.random() < 0.5:
                arguments["limit"] = value(lambda: rng.randrange(4))
        elif tool == "add":
            arguments["a"] = value(lambda: rng.randrange(-9, 9))
            arguments["b"] = value(lambda: rng.choice([0.5, -1.25, 3.0, 1e-7]))
        elif tool == "send":
            arguments["to"] = text()
            if rng.random() < 0.7:
                arguments["body"] = value(text)
        thought = rng.choice([None, None, "check it", "then add\nand send"])
        tasks.append(PlanTask(index, tool, arguments, _dependencies(arguments), thought))
    return Plan(tuple(tasks))


def stream_outcome(chunks: list[str]) -> tuple[list[PlanTask], str | None]:
    """Tasks a PlanStreamParser emits for these chunks, and the error it ends with."""
    parser = PlanStreamParser(PLAN_SPECS)
    emitted: list[PlanTask] = []
    try:
        for chunk in chunks:
            emitted.extend(parser.feed(chunk))
        plan = parser.close()
    except PlanError as exc:
        assert exc.line >= 1 and exc.problem
        return emitted, str(exc)
    assert list(plan.tasks) == emitted
    return emitted, None


def splits(rng: random.Random, text: str) -> list[str]:
    cuts = sorted(rng.randrange(len(text) + 1) for _ in range(rng.randrange(10)))
    return [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def check_plan_text(rng: random.Random, text: str) -> None:
    """Whole text and any chunking agree; a parsed plan only refers to earlier tasks."""
    whole = stream_outcome([text])
    assert stream_outcome(splits(rng, text)) == whole
    try:
        plan = parse_plan(text, PLAN_SPECS)
    except PlanError as exc:
        assert whole[1] == str(exc)
        return
    assert whole == (list(plan.tasks), None)
    indices = [task.index for task in plan.tasks]
    assert indices == sorted(set(indices))
    assert all(d in indices and d < task.index for task in plan.tasks for d in task.dependencies)


@EXAMPLES
@given(SEEDS)
def test_formatted_plans_parse_back_equal_in_any_chunking(seed: int) -> None:
    rng = random.Random(seed)
    plan = rand_plan(rng)
    text = format_plan(plan)
    assert parse_plan(text, PLAN_SPECS) == plan
    assert stream_outcome(splits(rng, text + "\n")) == (list(plan.tasks), None)


@EXAMPLES
@given(st.text(max_size=80), SEEDS)
def test_random_plan_texts_give_a_plan_or_a_plan_error(text: str, seed: int) -> None:
    rng = random.Random(seed)
    check_plan_text(rng, text)
    check_plan_text(rng, "".join(rng.choice(_PLAN_PIECES) for _ in range(rng.randrange(25))))


@EXAMPLES
@given(SEEDS)
def test_mutated_plans_give_a_plan_or_a_plan_error(seed: int) -> None:
    rng = random.Random(seed)
    check_plan_text(rng, mutate(rng, format_plan(rand_plan(rng)), _PLAN_PIECES))


# -- the DAG executor on generated plans -------------------------------------------------


class Tools:
    """Real async tools: read-only lookups, one with side effects, a raiser, a sleeper;
    every call is counted."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def catalogue(self) -> dict[str, Tool]:
        return {
            spec.name: Tool(spec.with_read_only(spec.name in READ_ONLY), self._runner(spec.name))
            for spec in PLAN_TOOLS
        }

    def _runner(self, name: str) -> Any:
        async def run(arguments: Mapping[str, Any]) -> Any:
            self.calls[name] += 1
            await anyio.sleep(0)
            if name == "boom":
                raise RuntimeError("boom")
            if name == "sleepy":
                await anyio.sleep(3600)
            if name == "add":
                return ToolResult(str(arguments["a"] + arguments["b"]), arguments["a"])
            if name == "search" and arguments.get("limit") == 0:
                return "not a ToolResult"
            if name == "search" and str(arguments.get("query", "")).startswith("e"):
                return ToolResult.error("no results")
            return ToolResult(f"{name} ok")

        return run


@EXAMPLES
@given(SEEDS)
def test_executor_runs_generated_plans_to_records_without_raising(seed: int) -> None:
    plan = rand_plan(random.Random(seed))
    tools = Tools()

    async def main() -> PlanRun:
        return await execute_plan(plan, tools.catalogue(), timeout=0.001)

    run = anyio.run(main)
    assert run.error is None
    assert [record.task.index for record in run.records] == [task.index for task in plan.tasks]
    assert sum(tools.calls.values()) == sum(record.ran for record in run.records)
    failed: set[int] = set()
    for record in run.records:
        task = record.task
        if any(d in failed for d in task.dependencies):
            assert not record.ran and record.failed  # a failed dependency is an observation
        if task.tool in ("boom", "sleepy"):
            assert record.ran and record.failed  # raised / timed out: an observation
        if record.failed:
            failed.add(task.index)
            assert record.observation.text
    text = run.observations_text()
    assert all(f"{task.index}. " in text for task in plan.tasks)


def rand_stream(rng: random.Random, plan: Plan) -> list[PlanTask]:
    """The task versions a fast decoder emits for `plan`: provisional versions (some with
    fewer arguments) before each final one, and now and then a late, changed version."""
    stream: list[PlanTask] = []
    for task in plan.tasks:
        for _ in range(rng.randrange(3)):
            arguments = dict(task.arguments)
            if arguments and rng.random() < 0.5:
                del arguments[rng.choice(sorted(arguments))]
            stream.append(
                PlanTask(task.index, task.tool, arguments, _dependencies(arguments), None, True)
            )
        stream.append(task)
        if len(stream) > 1 and rng.random() < 0.2:
            old = rng.choice(stream[:-1])
            stream.append(PlanTask(old.index, old.tool, {}))
    return stream


@EXAMPLES
@given(SEEDS)
def test_tools_with_side_effects_run_at_most_once_per_task(seed: int) -> None:
    rng = random.Random(seed)
    plan = rand_plan(rng)
    stream = rand_stream(rng, plan)
    pauses = [rng.randrange(3) for _ in stream]
    tools = Tools()
    started: Counter[int] = Counter()

    async def tasks() -> AsyncIterator[PlanTask]:
        for task, pause in zip(stream, pauses, strict=True):
            for _ in range(pause):
                await anyio.sleep(0)
            yield task

    def on_event(event: TaskEvent) -> None:
        if event.kind == "started" and event.task.tool not in READ_ONLY:
            started[event.task.index] += 1

    async def main() -> PlanRun:
        return await execute_plan(tasks(), tools.catalogue(), timeout=0.001, on_event=on_event)

    run = anyio.run(main)
    assert run.error is None
    assert all(count == 1 for count in started.values()), started
    assert {record.task.index for record in run.records} == {task.index for task in plan.tasks}
    side_effects = sum(tools.calls[name] for name in ("send", "boom", "sleepy"))
    assert side_effects == sum(started.values())


@EXAMPLES
@given(SEEDS)
def test_executor_turns_malformed_plan_texts_into_observations(seed: int) -> None:
    rng = random.Random(seed)
    text = mutate(rng, format_plan(rand_plan(rng)), _PLAN_PIECES)
    tools = Tools()

    async def main() -> PlanRun:
        return await execute_plan_text(text, tools.catalogue(), timeout=0.001)

    run = anyio.run(main)
    if run.error is not None:
        assert run.records == () and "Plan error:" in run.observations_text()
        assert sum(tools.calls.values()) == 0
    else:
        assert sum(tools.calls.values()) == sum(record.ran for record in run.records)


# -- regressions the properties found ----------------------------------------------------

_DEEP_CALLS = {
    "deep-json": "[" * 100_000,
    "long-int": '{"name":"add","arguments":{"a":' + "1" * 5000 + "}}",
    "deep-hermes": "<tool_call>" + "[" * 100_000,
    "deep-signs": "add(a=" + "-" * 100_000 + "1)",
    "many-signs": "add(a=" + "-" * 700 + "1)",
}


@pytest.mark.parametrize("text", list(_DEEP_CALLS.values()), ids=list(_DEEP_CALLS))
@pytest.mark.parametrize("fmt_name", FORMATS)
def test_pathological_call_texts_raise_call_format_error(fmt_name: str, text: str) -> None:
    # These escaped as RecursionError, MemoryError or ValueError.
    try:
        calls = get_format(fmt_name).parse(text)
    except CallFormatError:
        return
    assert fmt_name == "hermes" and calls == []  # hermes ignores text outside its tags


_BAD_PLANS = {
    "long-number": "1" * 5000 + '. search(query="x")\n2. join()',
    "long-ref": '1. search(query="x")\n2. search(query=$' + "1" * 5000 + ")\n3. join()",
    "deep-signs": "1. add(a=" + "-" * 100_000 + "1, b=1)\n2. join()",
    "many-signs": "1. add(a=" + "-" * 700 + "1, b=1)\n2. join()",
}


@pytest.mark.parametrize("text", list(_BAD_PLANS.values()), ids=list(_BAD_PLANS))
def test_pathological_plans_raise_plan_error(text: str) -> None:
    with pytest.raises(PlanError):
        parse_plan(text, PLAN_SPECS)


def test_enum_without_a_python_literal_is_a_constraint_error() -> None:
    spec = ToolSpec.from_dict(
        {"name": "t", "parameters": {"properties": {"x": {"enum": [1, math.nan]}}}}
    )
    with pytest.raises(ConstraintError, match="no python literal"):
        value_grammar(spec, "x", flavor="python")
