"""ToolSpec loading, normalisation and validation."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from toolweave.errors import ToolSpecError
from toolweave.memo import BoundedMemo
from toolweave.toolspec import ToolCall, ToolSpec, load_tools, load_tools_file

ROOT = Path(__file__).resolve().parents[2]
ASSISTANT_TOOLS = ROOT / "examples" / "tools" / "assistant_tools.json"
TOOL_QUERIES = ROOT / "adapters" / "bench" / "data" / "tool_queries.json"

WEATHER: dict[str, Any] = {
    "name": "get_weather",
    "description": "Get the weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1},
            "country": {"type": "string"},
        },
        "required": ["country", "city"],
    },
}


def test_plain_dict() -> None:
    spec = ToolSpec.from_dict(WEATHER)
    assert spec.name == "get_weather"
    assert spec.description == "Get the weather for a city."
    assert spec.required == ("city", "country")  # schema order, not the order of "required"
    assert spec.optional == ("unit", "days")
    assert spec.argument_order == ("city", "country", "unit", "days")
    assert spec.parameters["required"] == ["city", "country"]
    assert spec.annotations == {}
    assert spec.read_only is None


def test_openai_wrapper_equals_plain() -> None:
    wrapped = {"type": "function", "function": copy.deepcopy(WEATHER)}
    assert ToolSpec.from_dict(wrapped) == ToolSpec.from_dict(WEATHER)


def test_mcp_input_schema_and_annotations() -> None:
    spec = ToolSpec.from_dict(
        {
            "name": "read_file",
            "description": "Read a file.",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "annotations": {"readOnlyHint": True},
        }
    )
    assert spec.optional == ("path",)
    assert spec.annotations == {"readOnlyHint": True}
    assert spec.to_dict()["annotations"] == {"readOnlyHint": True}


def test_missing_parameters_and_description() -> None:
    spec = ToolSpec.from_dict({"name": "now"})
    assert spec.parameters == {"type": "object", "properties": {}, "required": []}
    assert spec.description == ""
    assert spec.argument_order == ()


def test_bfcl_types_converted_recursively() -> None:
    bfcl = {
        "name": "math.factorial",
        "description": "Compute a factorial.",
        "parameters": {
            "type": "dict",
            "properties": {
                "n": {"type": "integer"},
                "scale": {"type": "float"},
                "point": {"type": "tuple", "items": {"type": "float"}},
                "options": {
                    "type": "dict",
                    "properties": {"inner": {"type": "dict", "properties": {}}},
                },
                "anything": {"type": "any", "description": "Any value."},
                "nullable": {"type": ["float", "null"]},
                "choice": {"type": "string", "enum": ["dict", "float"], "default": "dict"},
            },
            "required": ["n"],
        },
    }
    original = copy.deepcopy(bfcl)
    spec = ToolSpec.from_dict(bfcl)
    assert bfcl == original  # input untouched
    props = spec.parameters["properties"]
    assert spec.parameters["type"] == "object"
    assert props["scale"] == {"type": "number"}
    assert props["point"] == {"type": "array", "items": {"type": "number"}}
    assert props["options"]["type"] == "object"
    assert props["options"]["properties"]["inner"]["type"] == "object"
    assert props["anything"] == {"description": "Any value."}
    assert props["nullable"] == {"type": ["number", "null"]}
    assert props["choice"]["enum"] == ["dict", "float"]  # data, not a type
    assert props["choice"]["default"] == "dict"
    spec.validate_call({"n": 5, "anything": [1, "x"], "point": [1.5, 2]})


def test_from_dict_does_not_share_state_with_input() -> None:
    data = copy.deepcopy(WEATHER)
    data["annotations"] = {"readOnlyHint": True}
    spec = ToolSpec.from_dict(data)
    data["parameters"]["properties"]["city"]["type"] = "integer"
    data["annotations"]["readOnlyHint"] = False
    assert spec.parameters["properties"]["city"]["type"] == "string"
    assert spec.annotations == {"readOnlyHint": True}


@pytest.mark.parametrize(
    ("data", "tool", "message"),
    [
        ([1, 2], None, "expected a JSON object, got list"),
        ({"type": "function", "function": "x"}, None, "'function' must be an object"),
        ({"description": "no name"}, None, "name must be a non-empty string"),
        ({"name": ""}, None, "name must be a non-empty string"),
        ({"name": 3}, None, "got 3"),
        ({"name": "has space"}, "has space", "letters, digits, '_', '.' or '-'"),
        ({"name": "f", "description": 5}, "f", "description must be a string, got int"),
        ({"name": "f", "annotations": []}, "f", "annotations must be an object, got list"),
        ({"name": "f", "parameters": []}, "f", "parameters must be an object, got list"),
        (
            {"name": "f", "parameters": {"type": "array"}},
            "f",
            "must have type 'object', got 'array'",
        ),
        (
            {"name": "f", "parameters": {"properties": []}},
            "f",
            "parameters.properties must be an object",
        ),
        (
            {"name": "f", "parameters": {"properties": {"a": True}}},
            "f",
            "schema of argument 'a' must be an object, got boolean",
        ),
        (
            {"name": "f", "parameters": {"properties": {}, "required": "a"}},
            "f",
            "parameters.required must be a list of strings",
        ),
        (
            {"name": "f", "parameters": {"properties": {"a": {}}, "required": ["a", "b"]}},
            "f",
            "required arguments ['b'] are not in parameters.properties",
        ),
        (
            {"name": "f", "parameters": {"properties": {"a": {"type": "strin"}}}},
            "f",
            "not a valid JSON Schema at properties/a/type",
        ),
        (
            {"name": "f", "parameters": {"properties": {"a": {"minimum": "3"}}}},
            "f",
            "not a valid JSON Schema at properties/a/minimum",
        ),
    ],
)
def test_invalid_specs(data: Any, tool: str | None, message: str) -> None:
    with pytest.raises(ToolSpecError) as info:
        ToolSpec.from_dict(data)
    assert info.value.tool == tool
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_error_message_names_the_tool() -> None:
    with pytest.raises(ToolSpecError, match=r"^tool 'f': parameters must be an object"):
        ToolSpec.from_dict({"name": "f", "parameters": 1})


def test_canonical_arguments() -> None:
    spec = ToolSpec.from_dict(WEATHER)
    args = {"extra": 1, "days": 3, "country": "CH", "unit": "celsius", "city": "Zürich"}
    canonical = spec.canonical_arguments(args)
    assert list(canonical) == ["city", "country", "unit", "days", "extra"]
    assert canonical == args
    assert list(spec.canonical_arguments({"country": "JP", "city": "東京"})) == ["city", "country"]


def test_property_schema() -> None:
    spec = ToolSpec.from_dict(WEATHER)
    assert spec.property_schema("days") == {"type": "integer", "minimum": 1}
    with pytest.raises(ToolSpecError, match=r"no argument 'nope' \(arguments: unit, city"):
        spec.property_schema("nope")


def test_validate_call() -> None:
    spec = ToolSpec.from_dict(WEATHER)
    spec.validate_call({"city": "Zürich", "country": "CH", "days": 2})
    with pytest.raises(ToolSpecError, match=r"'get_weather'.*arguments: 'country' is a required"):
        spec.validate_call({"city": "Zürich"})
    with pytest.raises(ToolSpecError, match=r"at arguments\.days: 0 is less than the minimum"):
        spec.validate_call({"city": "Zürich", "country": "CH", "days": 0})
    with pytest.raises(ToolSpecError, match=r"at arguments\.unit: 'kelvin' is not one of"):
        spec.validate_call({"city": "Zürich", "country": "CH", "unit": "kelvin"})


def test_validate_call_nested_path() -> None:
    spec = ToolSpec.from_dict(
        {
            "name": "f",
            "parameters": {
                "properties": {"points": {"type": "array", "items": {"type": "number"}}},
            },
        }
    )
    with pytest.raises(ToolSpecError, match=r"at arguments\.points\[1\]: 'x' is not of type"):
        spec.validate_call({"points": [1, "x"]})


def test_to_dict_round_trip_and_with_read_only() -> None:
    spec = ToolSpec.from_dict(WEATHER)
    out = spec.to_dict()
    assert set(out) == {"name", "description", "parameters"}
    assert ToolSpec.from_dict(out) == spec
    marked = spec.with_read_only(True)
    assert marked.read_only is True and spec.read_only is None
    assert marked.parameters == spec.parameters
    assert hash(marked) == hash(spec)


def test_tool_call_to_dict() -> None:
    call = ToolCall("f", {"a": [1, {"b": 2}]})
    out = call.to_dict()
    assert out == {"name": "f", "arguments": {"a": [1, {"b": 2}]}}
    out["arguments"]["a"].append(3)
    assert call.arguments == {"a": [1, {"b": 2}]}
    assert ToolCall("g").arguments == {}
    assert {call} == {ToolCall("f", {"a": [1, {"b": 2}]})}


def test_load_tools_rejects_duplicates_and_bad_input() -> None:
    with pytest.raises(ToolSpecError, match=r"^tool 'get_weather': duplicate tool name \(tools\[1"):
        load_tools([WEATHER, WEATHER])
    with pytest.raises(ToolSpecError, match=r"name must be .* \(tools\[1\]\)"):
        load_tools([WEATHER, {"description": "unnamed"}])
    with pytest.raises(ToolSpecError, match="expected a list of tools, got object"):
        not_a_list: Any = WEATHER
        load_tools(not_a_list)


def test_load_tools_file_accepts_list_and_tools_key(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([WEATHER]), encoding="utf-8")
    keyed = tmp_path / "keyed.json"
    keyed.write_text(json.dumps({"tools": [WEATHER]}), encoding="utf-8")
    assert load_tools_file(listed) == load_tools_file(str(keyed)) == (ToolSpec.from_dict(WEATHER),)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("[{", "is not valid JSON: Expecting property name enclosed in double quotes at line 1"),
        ('{"name": "f"}', "must hold a JSON list of tools (or an object with a 'tools' list)"),
        ('{"name": "f"}', "got object"),
        ('{"tools": 3}', "got int"),
    ],
)
def test_load_tools_file_errors(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "tools.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ToolSpecError) as info:
        load_tools_file(path)
    assert info.value.tool is None
    assert message in str(info.value)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_assistant_tools_load() -> None:
    specs = load_tools_file(ASSISTANT_TOOLS)
    assert len(specs) == 24
    by_name = {spec.name: spec for spec in specs}
    types = {
        schema.get("type") for spec in specs for schema in spec.parameters["properties"].values()
    }
    assert {"string", "number", "integer", "boolean", "array", "object"} <= types
    assert sum(1 for spec in specs if spec.optional) >= 10
    assert sum(1 for spec in specs if not spec.argument_order) >= 2
    assert by_name["search_flights"].property_schema("passengers")["required"] == ["adults"]
    assert by_name["get_current_weather"].annotations == {"readOnlyHint": True}
    assert by_name["delete_note"].annotations["destructiveHint"] is True


def test_tool_queries_name_known_tools() -> None:
    names = {spec.name for spec in load_tools_file(ASSISTANT_TOOLS)}
    queries = json.loads(TOOL_QUERIES.read_text(encoding="utf-8"))
    assert len(queries) >= 30
    assert {q["tool"] for q in queries} == names
    assert all(isinstance(q["query"], str) and q["query"] for q in queries)


def test_schema_checks_are_kept_per_content_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid schema is checked against its meta-schema once (the same content in another
    key order too); an invalid one fails on every build; the record stays bounded."""
    import toolweave.toolspec as ts

    checks: list[str] = []
    real = ts.validator_for

    def counting(schema: Any, *args: Any, **kwargs: Any) -> Any:
        checks.append(json.dumps(schema, sort_keys=True))
        return real(schema, *args, **kwargs)

    monkeypatch.setattr(ts, "validator_for", counting)
    monkeypatch.setattr(ts, "_checked", BoundedMemo(3))
    params = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}}
    first = ToolSpec.from_dict({"name": "find", "parameters": params})
    swapped = {"properties": {"n": {"type": "integer"}, "q": {"type": "string"}}, "type": "object"}
    again = ToolSpec.from_dict({"name": "find", "parameters": swapped})
    assert len(checks) == 1 and first.required == again.required == ()
    bad = {"name": "bad", "parameters": {"type": "object", "properties": {"q": {"type": 3}}}}
    for _ in range(2):
        with pytest.raises(ToolSpecError, match="not a valid JSON Schema"):
            ToolSpec.from_dict(bad)
    assert len(checks) == 3  # checked both times, never recorded
    for i in range(5):
        ToolSpec.from_dict({"name": f"t{i}", "parameters": {"type": "object", "minProperties": i}})
    assert len(ts._checked) == 3
    ToolSpec.from_dict({"name": "find", "parameters": params})  # evicted: checked again
    assert len(checks) == 9


def test_bounded_memo_keeps_the_most_recently_used() -> None:
    memo: BoundedMemo[int] = BoundedMemo(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # now the most recent: "b" goes first
    memo.put("c", 3)
    assert (memo.get("a"), memo.get("b"), memo.get("c"), len(memo)) == (1, None, 3, 2)
    with pytest.raises(ValueError, match="at least 1"):
        BoundedMemo(0)
