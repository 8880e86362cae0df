"""LLMCompiler plan format: round trips, streaming, references, malformed plans."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolweave.plan.arbiter import read_arbiter
from toolweave.plan.arguments import resolve_arguments
from toolweave.plan.format import (
    Plan,
    PlanError,
    PlanTask,
    TaskRef,
    format_call,
    format_plan,
    format_task,
)
from toolweave.plan.parse import PlanStreamParser, parse_plan
from toolweave.toolspec import ToolSpec


def _spec(name: str, properties: dict[str, Any], required: list[str]) -> ToolSpec:
    return ToolSpec.from_dict(
        {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": properties, "required": required},
        }
    )


SPECS = (
    _spec("search", {"query": {"type": "string"}, "limit": {"type": "integer"}}, ["query"]),
    _spec("add", {"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"]),
    _spec(
        "send_message",
        {
            "to": {"type": "string"},
            "body": {"type": "string"},
            "urgent": {"type": "boolean"},
        },
        ["to", "body"],
    ),
    _spec("now", {}, []),
    _spec(
        "tag",
        {"items": {"type": "array", "items": {"type": "string"}}, "meta": {"type": "object"}},
        ["items"],
    ),
    _spec(
        "set_unit",
        {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        ["unit"],
    ),
)
TOOLS = {spec.name: spec for spec in SPECS}

# ----------------------------------------------------------------- random valid plans

# No "$": plain text must never read as a reference; references are inserted on purpose.
plain_text = st.text(st.characters(codec="utf-8", exclude_characters="$"), max_size=8)
thought_line = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=12
).map(str.strip)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | plain_text
)

Draw = Callable[[st.SearchStrategy[Any]], Any]


def _string(draw: Draw, earlier: list[int]) -> tuple[str, set[int]]:
    if not earlier or draw(st.booleans()):
        return draw(plain_text), set()
    target = draw(st.sampled_from(earlier))
    # "${N}" anywhere, or "$N" followed by a space so no digit can extend the number.
    ref = draw(st.sampled_from([f"${{{target}}}", f"${target} "]))
    return draw(plain_text) + ref + draw(plain_text), {target}


def _value(draw: Draw, schema: dict[str, Any], earlier: list[int]) -> tuple[Any, set[int]]:
    if earlier and draw(st.integers(0, 3)) == 0:
        target = draw(st.sampled_from(earlier))
        return TaskRef(target), {target}
    kind = schema.get("type")
    if kind == "string":
        if "enum" in schema:
            return draw(st.sampled_from(schema["enum"])), set()
        return _string(draw, earlier)
    if kind == "integer":
        return draw(st.integers()), set()
    if kind == "number":
        return draw(st.integers() | st.floats(allow_nan=False, allow_infinity=False)), set()
    if kind == "boolean":
        return draw(st.booleans()), set()
    if kind == "array":
        pairs = [_value(draw, schema["items"], earlier) for _ in range(draw(st.integers(0, 3)))]
        return [v for v, _ in pairs], set().union(*(refs for _, refs in pairs))
    return draw(st.dictionaries(plain_text, scalars, max_size=3)), set()


@st.composite
def plans(draw: Draw) -> Plan:
    tasks: list[PlanTask] = []
    index = 0
    for _ in range(draw(st.integers(0, 5))):
        index += draw(st.integers(1, 3))  # numbers may skip, they only have to increase
        earlier = [task.index for task in tasks]
        spec = draw(st.sampled_from(SPECS))
        names = spec.required + tuple(n for n in spec.optional if draw(st.booleans()))
        arguments: dict[str, Any] = {}
        dependencies: set[int] = set()
        for name in names:
            arguments[name], refs = _value(draw, dict(spec.property_schema(name)), earlier)
            dependencies |= refs
        lines = draw(st.none() | st.lists(thought_line, min_size=1, max_size=2))
        tasks.append(
            PlanTask(
                index=index,
                tool=spec.name,
                arguments=arguments,
                dependencies=tuple(sorted(dependencies)),
                thought=None if lines is None else "\n".join(lines),
            )
        )
    thoughts = tuple(draw(st.lists(thought_line, max_size=2)))
    return Plan(tuple(tasks), thoughts, joined=True)


@given(plans())
@settings(max_examples=300, deadline=None)
def test_format_parse_round_trip(plan: Plan) -> None:
    assert parse_plan(format_plan(plan), TOOLS) == plan


@given(plans(), st.data())
@settings(max_examples=200, deadline=None)
def test_streaming_emits_each_task_in_the_chunk_ending_its_line(
    plan: Plan, data: st.DataObject
) -> None:
    text = format_plan(plan)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]

    # Where each task line ends: the offset of its newline.
    newline_at: list[int] = []
    offset, pending = 0, list(plan.tasks)
    for line in text.split("\n"):
        if pending and line == format_task(pending[0]):
            newline_at.append(offset + len(line))
            pending.pop(0)
        offset += len(line) + 1
    assert not pending

    parser = PlanStreamParser(TOOLS)
    emitted: list[tuple[PlanTask, int]] = []
    for number, chunk in enumerate(chunks):
        emitted.extend((task, number) for task in parser.feed(chunk))
    assert parser.close() == plan
    assert [task for task, _ in emitted] == list(plan.tasks)
    for (_, chunk_number), position in zip(emitted, newline_at, strict=True):
        assert bounds[chunk_number] <= position < bounds[chunk_number + 1]


# ----------------------------------------------------------------- reading plans


def test_full_example_with_positional_arguments_thoughts_and_end_marker() -> None:
    text = (
        "Thought: search first\n"
        '1. search("weather Paris", 3)\r\n'
        "\n"
        '2. send_message(to="ana", body=$1, urgent=true)\n'
        "Thought: all done\n"
        "3. join()<END_OF_PLAN>\n"
    )
    plan = parse_plan(text, TOOLS)
    assert plan.tasks == (
        PlanTask(1, "search", {"query": "weather Paris", "limit": 3}, (), "search first"),
        PlanTask(2, "send_message", {"to": "ana", "body": TaskRef(1), "urgent": True}, (1,)),
    )
    assert plan.thoughts == ("all done",)
    assert plan.joined


def test_references_inside_strings_lists_and_dicts() -> None:
    text = (
        "1. now()\n"
        '2. search(query="after $1 and ${1}, not $3 or $300")\n'
        '3. tag(items=[$1, "x $2"], meta={"source": $2})\n'
        "4. join()"
    )
    second, third = parse_plan(text, TOOLS).tasks[1:]
    # "$3" in task 2 and "$300" are not earlier tasks: they stay text, as in LLMCompiler.
    assert second.dependencies == (1,)
    assert third.arguments == {"items": [TaskRef(1), "x $2"], "meta": {"source": TaskRef(2)}}
    assert third.dependencies == (1, 2)


def test_references_are_left_out_of_schema_checks_but_required_still_counts() -> None:
    plan = parse_plan('1. now()\n2. add(a=$1, b=2)\n3. set_unit(unit="${1}")\n4. join()', TOOLS)
    assert plan.tasks[1].arguments == {"a": TaskRef(1), "b": 2}
    with pytest.raises(PlanError, match="'b' is a required property"):
        parse_plan("1. now()\n2. add(a=$1)\n3. join()", TOOLS)
    with pytest.raises(PlanError, match="is not one of"):
        parse_plan('1. set_unit(unit="kelvin")\n2. join()', TOOLS)


def test_resolve_arguments_substitutes_values_and_texts() -> None:
    task = PlanTask(
        3,
        "tag",
        {"items": [TaskRef(1), "from $2 and ${1} at $9"], "meta": {"n": TaskRef(2)}},
        (1, 2),
    )
    values = {1: {"id": 7}, 2: 5}
    texts = {1: '{"id": 7}', 2: "5"}
    assert resolve_arguments(task, values, texts) == {
        "items": [{"id": 7}, 'from 5 and {"id": 7} at $9'],
        "meta": {"n": 5},
    }


def test_format_call_writes_references_and_literals() -> None:
    arguments = {"items": [TaskRef(1), 'a"b'], "meta": {"k": None}}
    assert format_call("tag", arguments) == 'tag(items=[$1, "a\\"b"], meta={"k": None})'


def test_streaming_parser_reports_join_and_defers_errors_after_good_lines() -> None:
    parser = PlanStreamParser(TOOLS)
    assert parser.feed('1. search(query="a")') == []  # no newline yet
    tasks = parser.feed("\n2. now()\n3. nope()\n4. join()\n")
    assert [task.index for task in tasks] == [1, 2]  # the good lines still come out
    with pytest.raises(PlanError, match="line 3"):
        parser.feed("")
    with pytest.raises(PlanError, match="line 3"):
        parser.close()

    parser = PlanStreamParser(TOOLS)
    parser.feed("1. now()\n2. join()")
    assert not parser.joined  # the join line has not ended yet
    plan = parser.close()
    assert parser.joined and parser.plan == plan and len(plan.tasks) == 1


@pytest.mark.anyio
async def test_iter_tasks_yields_while_the_text_streams() -> None:
    async def deltas() -> AsyncIterator[str]:
        for piece in ['1. search(query="a")\n2. no', "w()\n", "3. join()"]:
            yield piece
            await anyio.sleep(0)

    parser = PlanStreamParser(TOOLS)
    seen = [task.index async for task in parser.iter_tasks(deltas())]
    assert seen == [1, 2]
    assert parser.plan is not None and parser.plan.joined


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ----------------------------------------------------------------- malformed plans

MALFORMED = [
    # (plan, line reported, words the message must contain)
    ('1. fetch(url="x")\n2. join()', 1, "unknown tool 'fetch'; use one of: add, now"),
    ('1. add(a="one", b=2)\n2. join()', 1, "invalid arguments for add at arguments.a"),
    ("1. search()\n2. join()", 1, "'query' is a required property"),
    ('1. search(q="x")\n2. join()', 1, "search has no argument 'q'"),
    ("1. now(1)\n2. join()", 1, "takes at most 0 positional"),
    ('1. search("a", query="b")\n2. join()', 1, "'query' is given twice"),
    ("1. search(query=x)\n2. join()", 1, "not a literal value"),
    ('1. search(query="x"\n2. join()', 1, "not a valid call"),
    ('1. search(query="x") now()\n2. join()', 1, "not a valid call"),
    ('1. search(query="x") + 1\n2. join()', 1, "nothing after its closing parenthesis"),
    ("1. search\n2. join()", 1, "expected 'tool_name(arg=value, ...)'"),
    ('search(query="x")\n1. join()', 1, "expected a numbered task"),
    ("1. now()\n2. add(a=$3, b=1)\n3. now()\n4. join()", 2, "$3 is the result of a later task"),
    ("1. add(a=$1, b=1)\n2. join()", 1, "uses its own result $1"),
    ("2. now()\n3. add(a=$1, b=1)\n4. join()", 2, "refers to task 1, which does not exist"),
    ('1. now()\n2. search(query="${5}")\n3. join()', 2, "$5 is the result of a later task"),
    # A cycle always contains a reference to a later task.
    ("1. add(a=$2, b=1)\n2. add(a=$1, b=1)\n3. join()", 1, "later task"),
    ("1. now()\n1. now()\n2. join()", 2, "task number 1 is used twice"),
    ("1. now()\n3. now()\n2. now()\n4. join()", 3, "numbers must increase"),
    ("0. now()\n1. join()", 1, "task numbers start at 1"),
    ("1. now()\n1. join()", 2, "used twice"),
    (
        "1. now()\n2. now()",
        3,
        "the plan ends without join(); after the last task write '3. join()'",
    ),
    ("", 1, "ends without join()"),
    ("1. now()\n2. join()\n3. now()", 3, "text after join()"),
    ("1. now()\n2. join()\nThought: oops", 3, "text after join()"),
    ("1. now()\n2. join(1)", 2, "join takes no arguments"),
]


@pytest.mark.parametrize(("text", "line", "words"), MALFORMED)
def test_malformed_plan_raises_plan_error_naming_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse_plan(text, TOOLS)
    error = caught.value
    assert error.line == line
    assert str(error).startswith(f"plan line {line}")
    assert words in str(error)


@pytest.mark.parametrize(("text", "line", "words"), MALFORMED)
def test_malformed_plan_streamed_char_by_char_fails_the_same_way(
    text: str, line: int, words: str
) -> None:
    parser = PlanStreamParser(TOOLS)
    with pytest.raises(PlanError) as caught:
        for char in text:
            parser.feed(char)
        parser.close()
    assert caught.value.line == line and words in str(caught.value)


def test_error_message_tells_the_model_how_to_call_the_tool() -> None:
    with pytest.raises(PlanError) as caught:
        parse_plan("1. search(limit=2)\n2. join()", TOOLS)
    message = str(caught.value)
    assert "1. search(limit=2)" in message
    assert "the arguments of search are: query (string, required), limit (integer, optional)" in (
        message
    )


# -- the Arbiter's reply ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "action", "answer", "truncated"),
    [
        ("Thought: done.\nAction: Finish(It is 6 (cold).)", "finish", "It is 6 (cold).", False),
        ("Thought: a tool failed.\nAction: Replan", "replan", "", False),
        # cut by the token budget inside the answer: a finish, marked as cut
        ("Thought: done.\nAction: Finish(The note is saved", "finish", "The note is saved", True),
        # cut before the answer or before the action: neither, never a replan
        ("Thought: done.\nAction: Finish(", "unreadable", "", False),
        ("Thought: done.\nAction: Rep", "unreadable", "", False),
        ("Thought: the results answer the request", "unreadable", "", False),
        ("", "unreadable", "", False),
        ("Sure! The weather is fine.", "unreadable", "", False),
    ],
)  # fmt: skip
def test_arbiter_reply_is_read_and_a_cut_reply_never_counts_as_replan(
    text: str, action: str, answer: str, truncated: bool
) -> None:
    verdict = read_arbiter(text)
    assert (verdict.action, verdict.answer, verdict.truncated) == (action, answer, truncated)
    assert verdict.finish == (action == "finish") and verdict.replan == (action == "replan")
    if action == "unreadable":
        assert verdict.problem.startswith("the Arbiter's reply")
    else:
        assert verdict.problem == ""
    if text.startswith("Thought: done."):
        assert verdict.thought == "done."
