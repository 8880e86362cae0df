"""Value grammars accept the canonical text of every valid value and reject invalid ones.

Checked with llguidance on the real SmolLM2 tokenizer: a text is accepted when all its
tokens are allowed and the matcher is accepting after them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from toolweave.errors import ConstraintError
from toolweave.formats import from_literal, get_format, to_literal
from toolweave.grammar.call import call_grammar, value_grammar
from toolweave.grammar.lexemes import NUMBER_FRACTION_DIGITS, Flavor
from toolweave.grammar.value import ValueGrammar, compile_value
from toolweave.models import default_model_path
from toolweave.native.constraints import Vocabulary, vocabulary_for
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolCall, ToolSpec, load_tools_file

TOOLS_FILE = Path(__file__).resolve().parents[2] / "examples" / "tools" / "assistant_tools.json"

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Checker:
    """Runs texts through grammars with the real tokenizer."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.vocab: Vocabulary = vocabulary_for(engine)

    def accepts(self, grammar: str, text: str) -> bool:
        matcher = self.vocab.matcher(grammar)
        tokens = self.engine.tokenize(text, parse_special=False)
        assert self.engine.detokenize(tokens) == text, f"the tokenizer cannot write {text!r}"
        if matcher.accepts_prefix(tokens) < len(tokens):
            return False
        matcher.consume_many(tokens)
        return matcher.accepting


@pytest.fixture(scope="module")
def checker() -> Iterator[Checker]:
    with Engine(default_model_path(), n_ctx=512, n_seq_max=1) as engine:
        yield Checker(engine)


def grammar_of(schema: Any, flavor: Flavor = "json") -> str:
    root, rules = compile_value(schema, flavor=flavor)
    return "\n".join([f"start: {root}", *rules]) + "\n"


def text_of(value: Any, flavor: Flavor) -> str:
    """The canonical text: compact JSON, or compact containers of `to_literal` scalars."""
    if flavor == "json":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, dict):
        return (
            "{" + ",".join(f"{to_literal(k)}:{text_of(v, flavor)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(text_of(v, flavor) for v in value) + "]"
    return to_literal(value)


# -- schemas and their values ----------------------------------------------------------------

# Characters that need escapes or several bytes, mixed into otherwise random text. SmolLM2
# has no tokens for the UTF-8 lead bytes of planes 4-11 (all unassigned), so none of those.
_TRICKY = st.sampled_from(
    list('"\\/\n\r\t\b\f\x00\x04\x1f\x7f\x85\u00a0\u2028é中😀\U000e0001\U0010fffd<|im_end|>')
)
_CHARS = st.one_of(st.characters(codec="utf-8", max_codepoint=0x3FFFF), _TRICKY)
_KEYS = st.text(st.one_of(st.sampled_from("abcxyz_"), _TRICKY), min_size=1, max_size=6)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**15), 10**15),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(_CHARS, max_size=8),
)


def any_values(depth: int) -> st.SearchStrategy[Any]:
    """JSON values with arrays and objects nested at most `depth` deep."""
    if depth == 0:
        return _SCALARS
    inner = any_values(depth - 1)
    return st.one_of(
        _SCALARS,
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(_CHARS, max_size=4), inner, max_size=3),
    )


def values(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under a schema of the subset the tests generate (and tool files use)."""
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([values(branch) for branch in schema["anyOf"]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([values({**schema, "type": k}) for k in kind])
    low = schema.get("minimum")
    if kind == "string":
        high = min(schema.get("maxLength", 24), 24)
        return st.text(_CHARS, min_size=schema.get("minLength", 0), max_size=high)
    if kind == "integer":
        bound = 10**18 - 1
        return st.integers(-bound if low is None else low, schema.get("maximum", bound))
    if kind == "number":
        floats = st.floats(min_value=low, allow_nan=False, allow_infinity=False)
        ints = st.integers(-(10**16) + 1 if low is None else low, 10**16 - 1)
        return st.one_of(floats, ints).filter(lambda x: low is None or math.copysign(1, x) > 0)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        low_items = schema.get("minItems", 0)
        high_items = max(min(schema.get("maxItems", 4), 4), low_items)
        return st.lists(values(schema.get("items", {})), min_size=low_items, max_size=high_items)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        drawn = st.fixed_dictionaries(
            {k: values(v) for k, v in props.items() if k in required},
            optional={k: values(v) for k, v in props.items() if k not in required},
        )
        return drawn.map(lambda d: {k: d[k] for k in props if k in d})
    return any_values(3)


_LEAF_SCHEMAS = st.one_of(
    st.builds(
        lambda low, high: {"type": "string", "minLength": low, **high},
        st.integers(0, 3),
        st.one_of(st.just({}), st.integers(3, 12).map(lambda n: {"maxLength": n})),
    ),
    st.sampled_from(
        [
            {"type": "integer"},
            {"type": "integer", "minimum": 0},
            {"type": "integer", "minimum": 1},
            {"type": "number"},
            {"type": "number", "minimum": 0},
            {"type": "boolean"},
            {"type": "null"},
            {"type": ["string", "null"]},
            {},
        ]
    ),
    st.lists(_SCALARS, min_size=1, max_size=4, unique_by=lambda v: json.dumps(v)).map(
        lambda items: {"enum": items}
    ),
    _SCALARS.map(lambda v: {"const": v}),
)


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    arrays = st.builds(
        lambda items, low, high: {"type": "array", "items": items, "minItems": low, **high},
        children,
        st.integers(0, 2),
        st.one_of(st.just({}), st.integers(2, 4).map(lambda n: {"maxItems": n})),
    )
    objects = st.dictionaries(_KEYS, children, min_size=1, max_size=4).flatmap(
        lambda props: st.sets(st.sampled_from(sorted(props))).map(
            lambda req: {"type": "object", "properties": props, "required": sorted(req)}
        )
    )
    unions = st.lists(children, min_size=2, max_size=3).map(lambda bs: {"anyOf": bs})
    return st.one_of(arrays, objects, unions)


SCHEMAS = st.recursive(_LEAF_SCHEMAS, _extend, max_leaves=8)


# -- properties --------------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), schema=SCHEMAS)
def test_valid_json_values_are_accepted(checker: Checker, data: st.DataObject, schema: Any) -> None:
    value = data.draw(values(schema))
    assert checker.accepts(grammar_of(schema), text_of(value, "json"))


@SETTINGS
@given(data=st.data(), schema=SCHEMAS)
def test_valid_python_values_are_accepted(
    checker: Checker, data: st.DataObject, schema: Any
) -> None:
    value = data.draw(values(schema))
    text = text_of(value, "python")
    assert from_literal(text) == value
    assert checker.accepts(grammar_of(schema, "python"), text)


@SETTINGS
@given(data=st.data(), schema=SCHEMAS, flavor=st.sampled_from(["json", "python"]))
def test_invalid_values_are_rejected(
    checker: Checker, data: st.DataObject, schema: Any, flavor: Flavor
) -> None:
    value = data.draw(values(schema))
    mutations = [any_values(2)]
    if isinstance(value, dict):
        mutations.append(st.just({**value, "zz_extra": 1}))
        required = [k for k in schema.get("required", []) if k in value]
        if required:
            dropped = st.sampled_from(required)
            mutations.append(dropped.map(lambda k: {x: y for x, y in value.items() if x != k}))
    wrong = data.draw(st.one_of(mutations))
    if Draft202012Validator(schema).is_valid(wrong):
        event("mutation still valid")
        return
    assert not checker.accepts(grammar_of(schema, flavor), text_of(wrong, flavor))


def test_every_assistant_tool_call_is_accepted(checker: Checker) -> None:
    tools = load_tools_file(TOOLS_FILE)
    fmt = get_format("hermes")
    grammar = call_grammar(fmt, tools)

    @SETTINGS
    @given(data=st.data(), spec=st.sampled_from(tools))
    def check(data: st.DataObject, spec: ToolSpec) -> None:
        args = data.draw(values(spec.parameters))
        text = fmt.serialize_call(ToolCall(spec.name, spec.canonical_arguments(args)))
        assert checker.accepts(grammar, text)

    check()
    # Optional arguments out of canonical order are not a call of this grammar.
    args = '{"unit":"celsius","location":"Bern"}'
    swapped = f'<tool_call>{{"name":"get_current_weather","arguments":{args}}}</tool_call>'
    assert not checker.accepts(grammar, swapped)


# -- numbers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "text", "ok"),
    [
        ({"type": "number"}, "1.5" + "0" * (NUMBER_FRACTION_DIGITS - 1), True),
        ({"type": "number"}, "1.5" + "0" * NUMBER_FRACTION_DIGITS, False),
        ({"type": "number"}, "9" * 16, True),
        ({"type": "number"}, "9" * 17, False),
        ({"type": "number"}, "1e308", True),
        ({"type": "number"}, "1e1000", False),
        ({"type": "number"}, "-0.25", True),
        ({"type": "number", "minimum": 0}, "-0.25", False),
        ({"type": "number"}, "01", False),
        ({"type": "integer"}, "9" * 18, True),
        ({"type": "integer"}, "9" * 19, False),
        ({"type": "integer"}, "1.5", False),
        ({"type": "integer", "minimum": 1}, "0", False),
        ({"type": "integer", "exclusiveMinimum": 0}, "-3", False),
    ],
)
def test_number_lexemes_are_bounded(checker: Checker, schema: Any, text: str, ok: bool) -> None:
    assert checker.accepts(grammar_of(schema), text) is ok


def test_number_cannot_run_on(checker: Checker) -> None:
    matcher = checker.vocab.matcher(grammar_of({"type": "number"}))
    text = "1.5" + "0" * (NUMBER_FRACTION_DIGITS - 1)
    matcher.consume_many(checker.engine.tokenize(text, parse_special=False))
    assert matcher.accepting
    assert matcher.accepts_prefix(checker.engine.tokenize("0", parse_special=False)) == 0


# -- strings, objects and the rest -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ('"caf\\u00e9 \\/ \\n\\t\\"\\\\"', True),
        ('"tab\there"', False),
        ('"bad \\x41"', False),
        ('"' + "a" * 200 + '"', True),
        ('"' + "a" * 201 + '"', False),
    ],
)
def test_json_strings(checker: Checker, text: str, ok: bool) -> None:
    assert checker.accepts(grammar_of({"type": "string"}), text) is ok


def test_python_strings_take_python_escapes(checker: Checker) -> None:
    grammar = grammar_of({"type": "string"}, "python")
    assert checker.accepts(grammar, to_literal("a\x00\x7f\u00a0\n'\"é"))
    assert checker.accepts(grammar, '"\\x41\\U0001F600"')
    assert not checker.accepts(grammar, "'single'")


def test_keys_keep_schema_order_and_no_extras(checker: Checker) -> None:
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in "abcd"},
        "required": ["c"],
    }
    grammar = grammar_of(schema)
    for text in ('{"c":1}', '{"a":1,"c":2}', '{"b":1,"c":2,"d":3}', '{"a":1,"b":2,"c":3,"d":4}'):
        assert checker.accepts(grammar, text), text
    for text in ("{}", '{"c":1,"a":2}', '{"a":1}', '{"c":1,"e":2}', '{"c":1,"c":1}'):
        assert not checker.accepts(grammar, text), text


def test_optional_keys_stay_linear(checker: Checker) -> None:
    schema = {"type": "object", "properties": {f"k{i}": {"type": "boolean"} for i in range(60)}}
    _, rules = compile_value(schema)
    assert len(rules) < 3 * 60 + 5
    assert checker.accepts(grammar_of(schema), '{"k7":true,"k59":false}')
    assert checker.accepts(grammar_of(schema), "{}")


def test_any_value_is_depth_bounded(checker: Checker) -> None:
    grammar = grammar_of({})
    assert checker.accepts(grammar, '[[{"a":[1]}]]') is False
    assert checker.accepts(grammar, '[[["x",null,true]]]')
    assert checker.accepts(grammar, '{"a":{"b":[1.5]}}')


def test_refs_resolve_locally_even_recursively(checker: Checker) -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    }
    grammar = grammar_of(schema)
    assert checker.accepts(grammar, '{"kids":[{},{"kids":[{}]}]}')
    assert not checker.accepts(grammar, '{"kids":[1]}')


def test_unsupported_keywords_fall_back_to_json_or_fail_in_python(checker: Checker) -> None:
    schema = {"type": "string", "pattern": "^[A-Z]{3}$"}
    assert checker.accepts(grammar_of(schema), '"EUR"')
    assert not checker.accepts(grammar_of(schema), '"euro"')
    with pytest.raises(ConstraintError, match="pattern"):
        compile_value(schema, flavor="python")
    assert checker.accepts(grammar_of({"type": "string", "format": "date"}), '"2025-03-14"')
    assert checker.accepts(grammar_of({"type": "string", "format": "date"}, "python"), '"today"')


def test_two_values_share_one_grammar(checker: Checker) -> None:
    a_root, a_rules = compile_value({"type": "array", "items": {"type": "string"}}, rule_prefix="a")
    b_root, b_rules = compile_value(
        {"type": "array", "items": {"type": "integer"}}, rule_prefix="b"
    )
    grammar = "\n".join([f'start: {a_root} " " {b_root}', *a_rules, *b_rules]) + "\n"
    assert checker.accepts(grammar, '["x"] [1,2]')
    assert not checker.accepts(grammar, '[1] ["x"]')


def test_value_grammar_with_suffix(checker: Checker) -> None:
    tools = {spec.name: spec for spec in load_tools_file(TOOLS_FILE)}
    grammar = value_grammar(tools["search_flights"], "passengers", suffix=',"cabin_class":')
    assert checker.accepts(grammar, '{"adults":2,"children":0},"cabin_class":')
    assert not checker.accepts(grammar, '{"children":1},"cabin_class":')
    python = value_grammar(tools["send_email"], "to", suffix=", ", flavor="python")
    assert checker.accepts(python, '["ann@example.com","bo@example.com"], ')


def test_separators_are_configurable(checker: Checker) -> None:
    spaced = ValueGrammar(item_separator=", ", key_separator=": ")
    root, rules = spaced.compile_value(
        {"type": "object", "properties": {"a": {"type": "array"}}}, flavor="python"
    )
    grammar = "\n".join([f"start: {root}", *rules]) + "\n"
    assert checker.accepts(grammar, to_literal({"a": [1, "x", None]}))
