"""What the tool prompt lists of a tool: no runtime hints, no titles that repeat names."""

from __future__ import annotations

import json

from toolweave.formats import get_format
from toolweave.prompting.chat_template import openai_tools, tools_system_prompt
from toolweave.prompting.tool_listing import listed_parameters, listed_tool
from toolweave.toolspec import ToolSpec

# The shape FastMCP (pydantic) gives a Python function `create_note(title, body, tags=None)`.
NOTE = {
    "name": "create_note",
    "description": "Create a new note.",
    "parameters": {
        "type": "object",
        "title": "create_noteArguments",
        "properties": {
            "title": {"title": "Title", "type": "string", "description": "Short title."},
            "body": {"title": "Body", "type": "string"},
            "due_date": {"title": "Due Date", "type": "string"},
            "tags": {
                "title": "Labels shown in the sidebar",
                "type": "array",
                "items": {"title": "Tag", "type": "string"},
                "default": None,
            },
            "owner": {"$ref": "#/$defs/Person", "title": "Owner"},
        },
        "required": ["title", "body"],
        "$defs": {
            "Person": {
                "title": "Person",
                "type": "object",
                "properties": {"full_name": {"title": "FullName", "type": "string"}},
            }
        },
    },
    "annotations": {"readOnlyHint": False, "destructiveHint": False},
}


def test_the_listing_drops_hints_and_titles_that_repeat_names() -> None:
    spec = ToolSpec.from_dict(NOTE)
    listed = listed_tool(spec)
    assert set(listed) == {"name", "description", "parameters"}  # no annotations
    params = listed["parameters"]
    assert "title" not in params  # "create_noteArguments": the tool is named already
    props = params["properties"]
    # A property named "title" is a property, not a keyword: it stays, its title goes.
    assert props["title"] == {"type": "string", "description": "Short title."}
    assert props["body"] == {"type": "string"}
    assert props["due_date"] == {"type": "string"}
    assert props["owner"] == {"$ref": "#/$defs/Person"}
    # A title that says more than the name stays; so does an item's (it names no property).
    assert props["tags"]["title"] == "Labels shown in the sidebar"
    assert props["tags"]["items"] == {"title": "Tag", "type": "string"}
    assert props["tags"]["default"] is None
    person = params["$defs"]["Person"]
    assert person["title"] == "Person"  # the type's name, not a property's
    assert person["properties"]["full_name"] == {"type": "string"}
    assert params["required"] == ["title", "body"]
    # The spec keeps what the runtime reads.
    assert spec.annotations == NOTE["annotations"]
    assert spec.parameters["properties"]["body"]["title"] == "Body"


def test_the_tool_prompt_and_the_template_tools_use_the_listing() -> None:
    spec = ToolSpec.from_dict(NOTE)
    prompt = tools_system_prompt([spec], get_format("json"))
    assert json.dumps(listed_tool(spec), ensure_ascii=False, separators=(",", ":")) in prompt
    assert "readOnlyHint" not in prompt and "create_noteArguments" not in prompt
    (tool,) = openai_tools([spec])
    assert tool["function"]["parameters"] == listed_parameters(spec.parameters)


def test_a_schema_without_titles_is_listed_as_it_is() -> None:
    params = {
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
        "required": ["city"],
        "additionalProperties": False,
    }
    listed = listed_parameters(params)
    assert listed == params
    listed["required"].append("country")  # a copy: the schema it came from is unchanged
    assert params["required"] == ["city"]
