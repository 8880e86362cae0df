"""Tool-call formats: exact round trips (property tests), malformed text, format choice."""

from __future__ import annotations

import keyword
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolweave.errors import CallFormatError
from toolweave.formats import (
    FORMATS,
    CallFormat,
    format_for_chat_template,
    from_literal,
    get_format,
    to_literal,
)
from toolweave.toolspec import ToolCall

# Fragments that break naive parsers: quotes, escapes, control chars, tags, separators.
TRICKY = [
    '"',
    "'",
    "\\",
    "\n",
    "\r",
    "\t",
    "\x00",
    "\x1f",
    "\x7f",
    "\u2028",
    "\\n",
    "\\u00e9",
    "</tool_call>",
    "<tool_call>",
    "};",
    ")",
    "=",
    "Zürich",
    "東京",
    "🙂",
    '"}}',
]

text = st.lists(st.characters(codec="utf-8") | st.sampled_from(TRICKY), max_size=8).map("".join)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
tool_names = st.from_regex(
    r"[A-Za-z_][A-Za-z0-9_]{0,20}(\.[A-Za-z_][A-Za-z0-9_]{0,10})?", fullmatch=True
)
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)


def calls_with(keys: st.SearchStrategy[str], names: st.SearchStrategy[str]) -> Any:
    call = st.builds(ToolCall, names, st.dictionaries(keys, json_values, max_size=5))
    return st.lists(call, min_size=1, max_size=3)


json_calls = calls_with(text, tool_names)
python_calls = calls_with(
    identifiers,
    tool_names.filter(lambda name: not any(keyword.iskeyword(p) for p in name.split("."))),
)


def tagged(value: Any) -> Any:
    """A form where equal means identical: types, key order and the sign of zero count."""
    if isinstance(value, dict):
        return ("dict", [(key, tagged(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [tagged(item) for item in value])
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)


def assert_same_calls(parsed: list[ToolCall], expected: list[ToolCall]) -> None:
    assert [(c.name, tagged(dict(c.arguments))) for c in parsed] == [
        (c.name, tagged(dict(c.arguments))) for c in expected
    ]


@pytest.mark.parametrize("name", ["hermes", "json", "llama3"])
@given(calls=json_calls)
def test_json_formats_round_trip(name: str, calls: list[ToolCall]) -> None:
    fmt = get_format(name)
    text_out = fmt.serialize(calls)
    assert_same_calls(fmt.parse(text_out), calls)
    assert_same_calls(fmt.parse(f"  {fmt.serialize_call(calls[0])}\n"), calls[:1])


@given(calls=python_calls)
def test_pycall_round_trip(calls: list[ToolCall]) -> None:
    fmt = get_format("pycall")
    text_out = fmt.serialize(calls)
    assert_same_calls(fmt.parse(text_out), calls)


@given(value=json_values)
def test_literal_round_trip(value: Any) -> None:
    assert tagged(from_literal(to_literal(value))) == tagged(value)


def test_serialized_text_is_compact_and_ordered() -> None:
    call = ToolCall("get_weather", {"unit": "celsius", "city": "Zürich"})
    assert get_format("hermes").serialize([call, call]) == (
        '<tool_call>{"name":"get_weather","arguments":{"unit":"celsius","city":"Zürich"}}'
        "</tool_call>\n"
        '<tool_call>{"name":"get_weather","arguments":{"unit":"celsius","city":"Zürich"}}'
        "</tool_call>"
    )
    assert get_format("llama3").serialize([call, ToolCall("now")]) == (
        '{"name":"get_weather","parameters":{"unit":"celsius","city":"Zürich"}};'
        '{"name":"now","parameters":{}}'
    )
    assert get_format("json").body(call) == get_format("hermes").body(call)
    assert get_format("pycall").serialize([call, ToolCall("math.factorial", {"n": -5})]) == (
        'get_weather(unit="celsius", city="Zürich")\nmath.factorial(n=-5)'
    )


def test_literals() -> None:
    assert to_literal({"a": [True, None, -0.0, 1e16, 'q"\\\n']}) == (
        '{"a": [True, None, -0.0, 1e+16, "q\\"\\\\\\n"]}'
    )
    assert to_literal((1, 2)) == "[1, 2]"
    assert from_literal(to_literal(math.inf)) == math.inf
    assert from_literal(to_literal(-math.inf)) == -math.inf
    assert from_literal("('a', -2.5)") == ["a", -2.5]
    with pytest.raises(CallFormatError, match="NaN"):
        to_literal(math.nan)
    with pytest.raises(CallFormatError, match="cannot write a set"):
        to_literal({1, 2})


def test_hermes_tolerates_text_and_missing_final_close() -> None:
    fmt = get_format("hermes")
    text_in = (
        'Sure!\n<tool_call>\n{"name": "a", "arguments": {"x": "</tool_call>"}}\n</tool_call>\n'
        'and <tool_call>{"name":"b","arguments":{}}  '
    )
    assert fmt.parse(text_in) == [ToolCall("a", {"x": "</tool_call>"}), ToolCall("b", {})]
    assert fmt.parse("no calls here") == []


def test_json_accepts_lists_and_llama3_its_variants() -> None:
    assert get_format("json").parse('[{"name":"a","arguments":{"x":1}}, {"name":"b"}]') == [
        ToolCall("a", {"x": 1}),
        ToolCall("b", {}),
    ]
    llama = get_format("llama3")
    text_in = (
        '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; '
        '{"name": "b", "arguments": {"y": 2}}\n{"name": "c", "parameters": {}};'
    )
    assert llama.parse(text_in) == [
        ToolCall("a", {"x": 1}),
        ToolCall("b", {"y": 2}),
        ToolCall("c", {}),
    ]


def test_pycall_accepts_lists_and_semicolons() -> None:
    fmt = get_format("pycall")
    expected = [ToolCall("a", {"x": 1}), ToolCall("m.b", {"y": ["z"]})]
    assert fmt.parse("[a(x=1), m.b(y=('z',))]") == expected
    assert fmt.parse("a(x=1); m.b(y=['z'])") == expected
    assert fmt.parse("  \n") == []


@pytest.mark.parametrize(
    ("name", "text_in", "message"),
    [
        ("hermes", "<tool_call>{not json}</tool_call>", "invalid JSON"),
        (
            "hermes",
            '<tool_call>{"name":"f","arguments":{}} junk</tool_call>',
            "expected '</tool_call>'",
        ),
        ("hermes", '<tool_call>{"name":"f","argu', "invalid JSON"),
        ("hermes", "<tool_call>[1]</tool_call>", "must be a JSON object, got list"),
        ("hermes", '<tool_call>{"arguments":{}}</tool_call>', "non-empty string 'name'"),
        ("hermes", '<tool_call>{"name":"f","arguments":[1]}</tool_call>', "must be a JSON object"),
        ("json", "hello", "expected a JSON tool call at position 0"),
        ("json", '{"name": 1, "arguments": {}}', "non-empty string 'name'"),
        ("json", "42", "expected a JSON tool call"),
        ("json", '[{"name":"f"}, 3]', "must be a JSON object, got int"),
        ("json", '{"name":"f"} trailing', "expected a JSON tool call at position 13"),
        ("llama3", '{"name":"f","parameters":{}};;{"name":"g"}', "expected a JSON tool call"),
        ("llama3", '{"name":"f","parameters":"x"}', "must be a JSON object, got str"),
        ("pycall", "f(1)", "positional argument in call to f"),
        ("pycall", "f(**kw)", "'**' argument in call to f"),
        ("pycall", "x = f(a=1)", "expected a call"),
        ("pycall", "hello", "expected a call, got 'hello'"),
        ("pycall", "f(a=g(b=1))", "not a literal value: 'g(b=1)'"),
        ("pycall", "f(a=b)", "not a literal value: 'b'"),
        ("pycall", "f(a={1, 2})", "not a literal value"),
        ("pycall", "f(a=b'x')", "not a literal value"),
        ("pycall", "f(a=1j)", "not a literal value"),
        ("pycall", "f(a={1: 2})", "dict keys must be strings"),
        ("pycall", "f(a=1", "not valid Python call syntax"),
        ("pycall", "f(a=1, a=2)", "argument 'a' repeated in call to f"),
        ("pycall", "f()(a=1)", "a tool name must be a dotted name"),
    ],
)
def test_malformed_text(name: str, text_in: str, message: str) -> None:
    with pytest.raises(CallFormatError) as info:
        get_format(name).parse(text_in)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "call",
    [
        ToolCall("bad-name", {}),
        ToolCall("f", {"class": 1}),
        ToolCall("f", {"a b": 1}),
        ToolCall("f", {"ﬁ": 1}),
        ToolCall("if.x", {}),
    ],
)
def test_pycall_rejects_unwritable_names(call: ToolCall) -> None:
    with pytest.raises(CallFormatError, match="cannot be written as a Python call"):
        get_format("pycall").serialize_call(call)


def test_registry() -> None:
    assert FORMATS == ("hermes", "json", "llama3", "pycall")
    for name in FORMATS:
        fmt = get_format(name)
        assert isinstance(fmt, CallFormat)
        assert fmt.name == name
    with pytest.raises(CallFormatError, match=r"unknown call format 'xml' \(known: hermes, json"):
        get_format("xml")


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (None, "json"),
        ("", "json"),
        ("{% for m in messages %}{{ m.content }}{% endfor %}", "json"),
        ("<|im_start|>system\n<tool_call>{...}</tool_call><|im_end|>", "hermes"),
        ("<|im_start|>{{ message.content }}<|im_end|>", "hermes"),
        ("<|start_header_id|>ipython<|end_header_id|>", "llama3"),
        ("{{ '<|python_tag|>' }}{{ '<|eom_id|>' }}", "llama3"),
        ("<|eom_id|>", "llama3"),
    ],
)
def test_format_for_chat_template(template: str | None, expected: str) -> None:
    assert format_for_chat_template(template).name == expected
