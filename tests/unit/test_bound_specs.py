"""The specs of bound tools: built once per distinct tool list, and still checked."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolweave.adapters.langchain.request_plan import bound_specs, plan_request
from toolweave.errors import ToolSpecError


def _tool(name: str, description: str, **props: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props},
        },
    }


READ = _tool("get_weather", "Get the current weather in a city.", city={"type": "string"})
WRITE = _tool("delete_note", "Delete a note by its id.", id={"type": "string"})


def test_the_same_tools_give_the_same_specs_without_rebuilding() -> None:
    specs = bound_specs([READ, WRITE])
    assert [(s.name, s.read_only) for s in specs] == [("get_weather", True), ("delete_note", False)]
    # An equal list (another object, as an agent binds on every call) hits the record.
    assert bound_specs(copy.deepcopy([READ, WRITE])) is specs
    assert plan_request([READ, WRITE], "required", None).specs is specs


def test_what_the_record_is_keyed_by() -> None:
    """The whole list decides (read-only leads are read across it) and so does every
    word: a changed description, order or annotation is built again."""
    base = bound_specs([READ, WRITE])
    assert [s.name for s in bound_specs([WRITE, READ])] == ["delete_note", "get_weather"]
    changed = copy.deepcopy(READ)
    changed["function"]["description"] = "Set the current weather in a city."
    assert bound_specs([changed, WRITE])[0].read_only is False
    hinted = copy.deepcopy(WRITE)
    hinted["function"]["annotations"] = {"destructiveHint": True}
    assert bound_specs([READ, hinted]) is not base


def test_a_bad_tool_fails_on_every_request() -> None:
    bad = _tool("bad", "A tool.", q={"type": 3})
    for _ in range(2):
        with pytest.raises(ToolSpecError, match="not a valid JSON Schema"):
            bound_specs([READ, bad])


def test_tools_that_are_not_plain_json_are_built_every_time() -> None:
    odd = _tool("odd", "Get a thing.", q={"type": "number", "maximum": float("nan")})
    first, second = bound_specs([odd]), bound_specs([odd])
    assert first is not second and first[0].name == second[0].name == "odd"
