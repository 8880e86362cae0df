"""LangChain tools in and out: schemas, runs, errors, read-only hints, a real agent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import (
    BaseTool,
    InjectedToolArg,
    InjectedToolCallId,
    StructuredTool,
    ToolException,
    tool,
)
from langgraph.prebuilt import InjectedState
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from toolweave.adapters.langchain.tools import (
    annotations_from_langchain,
    from_langchain,
    to_langchain,
)
from toolweave.errors import ToolSpecError
from toolweave.readonly import DECIDED_KEY
from toolweave.tools import Tool, ToolResult
from toolweave.toolspec import ToolSpec


def run(t: Tool, arguments: Mapping[str, Any]) -> ToolResult:
    return asyncio.run(t.run(arguments))


# --- tools in ---------------------------------------------------------------------------


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


def test_tool_decorated_function() -> None:
    t = from_langchain(add)
    assert (t.name, t.spec.description, t.source, t.origin) == (
        "add",
        "Add two integers.",
        "langchain",
        add,
    )
    assert t.spec.required == ("a",)
    assert t.spec.optional == ("b",)
    assert t.spec.parameters["properties"]["b"] == {"type": "integer", "default": 2}
    assert t.spec.read_only is None
    assert t.spec.annotations == {}
    assert run(t, {"a": 3}) == ToolResult(text="5")


def test_plain_functions_sync_and_async() -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    async def echo(text: str) -> dict[str, str]:
        """Echo the text back."""
        await asyncio.sleep(0)
        return {"echo": text}

    assert run(from_langchain(shout), {"text": "hi"}) == ToolResult(text="HI")
    result = run(from_langchain(echo), {"text": "hi"})
    assert result == ToolResult(text='{"echo": "hi"}', structured={"echo": "hi"})


def test_unknown_tool_types_are_rejected() -> None:
    with pytest.raises(ToolSpecError, match="unknown tool type int"):
        from_langchain(42)

    def undocumented(x: int) -> int:
        return x

    with pytest.raises(ToolSpecError, match="undocumented"):
        from_langchain(undocumented)


class Unit(StrEnum):
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class Place(BaseModel):
    city: str
    country: str | None = None


class ForecastArgs(BaseModel):
    place: Place = Field(description="where")
    days: int = Field(3, description="how many days")
    unit: Unit = Unit.celsius
    note: str | None = None


def test_structured_tool_with_pydantic_schema() -> None:
    def forecast(
        place: Place, days: int = 3, unit: Unit = Unit.celsius, note: str | None = None
    ) -> Place:
        return Place(city=place.city.upper(), country=unit.value)

    lc = StructuredTool.from_function(
        forecast, name="forecast", description="Weather forecast.", args_schema=ForecastArgs
    )
    t = from_langchain(lc)
    props = t.spec.parameters["properties"]
    assert t.spec.required == ("place",)
    assert t.spec.optional == ("days", "unit", "note")
    assert props["place"]["type"] == "object"  # nested model inlined, no $ref
    assert props["place"]["properties"]["city"] == {"type": "string"}
    assert props["place"]["required"] == ["city"]
    assert props["unit"] == {
        "type": "string",
        "enum": ["celsius", "fahrenheit"],
        "default": "celsius",
    }
    assert props["days"]["default"] == 3
    assert "$defs" not in t.spec.parameters
    result = run(t, {"place": {"city": "Oslo"}, "unit": "fahrenheit"})
    # a pydantic return value becomes JSON text plus structured content
    assert result.structured == {"city": "OSLO", "country": "fahrenheit"}
    assert not result.is_error


class SearchArgs(BaseModel):
    query: str


class Search(BaseTool):
    name: str = "search"
    description: str = "Search the notes."
    args_schema: type[BaseModel] = SearchArgs

    def _run(self, query: str) -> list[str]:
        return [f"note about {query}"]


def test_base_tool_subclass() -> None:
    t = from_langchain(Search())
    assert t.spec.required == ("query",)
    result = run(t, {"query": "tea"})
    assert result == ToolResult(text='["note about tea"]', structured=["note about tea"])


@tool
def personal(
    query: str,
    user: Annotated[str, InjectedToolArg],
    call_id: Annotated[str, InjectedToolCallId],
    state: Annotated[dict, InjectedState],
) -> str:
    """Search the user's own notes."""
    return f"{user}:{query}:{call_id.startswith('toolweave-')}:{sorted(state)}"


def test_injected_arguments_stay_out_of_the_schema() -> None:
    t = from_langchain(personal)
    assert list(t.spec.parameters["properties"]) == ["query"]
    assert t.spec.required == ("query",)
    # The executor may pass injected values itself; the call id is made up per call.
    result = run(t, {"query": "tea", "user": "ann", "state": {"k": 1}})
    assert result == ToolResult(text="ann:tea:True:['k']")
    missing = run(t, {"query": "tea"})
    assert missing.is_error and missing.text.startswith("Error:")


def test_tool_exception_and_value_error_become_error_results() -> None:
    @tool
    def refuse(x: int) -> str:
        """Refuses."""
        raise ToolException(f"no access to {x}")

    @tool
    def crash(x: int) -> str:
        """Crashes."""
        raise ValueError("bad value")

    assert run(from_langchain(refuse), {"x": 1}) == ToolResult.error("Error: no access to 1")
    assert run(from_langchain(crash), {"x": 1}) == ToolResult.error("Error: ValueError: bad value")
    invalid = run(from_langchain(add), {"a": "three"})
    assert invalid.is_error
    assert invalid.text.startswith("Error: invalid arguments: a: ")


def test_handled_tool_error_is_still_an_error() -> None:
    def refuse(x: int) -> str:
        """Refuses."""
        raise ToolException("denied")

    lc = StructuredTool.from_function(refuse, handle_tool_error=True)
    assert run(from_langchain(lc), {"x": 1}) == ToolResult.error("denied")


def test_content_and_artifact() -> None:
    @tool(response_format="content_and_artifact")
    def rows(n: int) -> tuple[str, list[int]]:
        """First n squares."""
        return f"{n} rows", [i * i for i in range(n)]

    assert run(from_langchain(rows), {"n": 3}) == ToolResult(text="3 rows", structured=[0, 1, 4])


# --- read-only hints --------------------------------------------------------------------


def _hinted(metadata: dict[str, Any] | None = None, tags: list[str] | None = None) -> BaseTool:
    def look(x: int) -> int:
        """Look."""
        return x

    return StructuredTool.from_function(look, metadata=metadata, tags=tags)


@pytest.mark.parametrize(
    ("metadata", "tags", "expected"),
    [
        # langchain.mcp: metadata["mcp"]["tool"]["annotations"], snake_case
        (
            {"mcp": {"tool": {"annotations": {"read_only_hint": True, "title": "Look"}}}},
            None,
            {"readOnlyHint": True, "title": "Look"},
        ),
        # langchain-mcp-adapters with mcp 1.x: annotations.model_dump() at the top level
        (
            {"title": None, "readOnlyHint": False, "destructiveHint": True, "openWorldHint": None},
            None,
            {"readOnlyHint": False, "destructiveHint": True},
        ),
        # ... and with mcp 2.x, whose model_dump() is snake_case
        (
            {"read_only_hint": True, "idempotent_hint": True},
            None,
            {
                "readOnlyHint": True,
                "idempotentHint": True,
            },
        ),
        ({"toolweave": {"read_only": True}}, None, {DECIDED_KEY: True}),
        (None, ["read-only"], {DECIDED_KEY: True}),
        (None, ["toolweave:read-only"], {DECIDED_KEY: True}),
        # ours is the decision, kept beside the hints of every other shape
        (
            {"readOnlyHint": True, "toolweave": {"read_only": False}},
            ["read-only"],
            {"readOnlyHint": True, DECIDED_KEY: False},
        ),
        ({"readOnlyHint": False}, ["read-only"], {"readOnlyHint": False, DECIDED_KEY: True}),
        ({"unrelated": 1, "toolweave": {"read_only": None}}, ["other"], {}),
    ],
)
def test_metadata_shapes(
    metadata: dict[str, Any] | None, tags: list[str] | None, expected: dict[str, Any]
) -> None:
    lc = _hinted(metadata, tags)
    assert annotations_from_langchain(lc) == expected
    spec = from_langchain(lc).spec
    assert spec.annotations == expected
    assert spec.read_only is None


def test_metadata_as_the_mcp_sdk_dumps_it() -> None:
    """The dicts the two MCP adapters build, made by the installed MCP SDK itself."""
    hints = ToolAnnotations(title="Look", read_only_hint=True, open_world_hint=False)
    expected = {"title": "Look", "readOnlyHint": True, "openWorldHint": False}
    # langchain.mcp (langchain/mcp/tools.py, _tool_metadata)
    nested = {"mcp": {"tool": {"annotations": hints.model_dump(exclude_none=True)}}}
    # langchain-mcp-adapters (langchain_mcp_adapters/tools.py): plain model_dump() on top
    for metadata in (nested, hints.model_dump(), hints.model_dump(by_alias=True)):
        assert annotations_from_langchain(_hinted(metadata)) == expected


# --- tools out and back -----------------------------------------------------------------


def _weather_tool() -> Tool:
    spec = ToolSpec.from_dict(
        {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "city name"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                },
                "required": ["city"],
            },
            "annotations": {"readOnlyHint": True, "title": "Weather"},
        }
    ).with_read_only(True)
    calls: list[dict[str, Any]] = []

    async def weather(arguments: Mapping[str, Any]) -> ToolResult:
        calls.append(dict(arguments))
        if arguments["city"] == "Atlantis":
            return ToolResult.error("unknown city Atlantis")
        return ToolResult(text=f"sunny in {arguments['city']}", structured={"temp": 21})

    return Tool(spec=spec, run=weather, source="mcp:weather", origin=calls)


def test_to_langchain_shape() -> None:
    t = _weather_tool()
    lc = to_langchain(t)
    assert isinstance(lc, StructuredTool)
    assert (lc.name, lc.description) == ("get_weather", "Current weather in a city.")
    assert lc.args_schema == dict(t.spec.parameters)
    assert lc.metadata == {
        "readOnlyHint": True,
        "title": "Weather",
        "toolweave": {"read_only": True, "source": "mcp:weather"},
    }
    assert lc.response_format == "content_and_artifact"
    assert lc.handle_tool_error is True


def test_to_langchain_invoke_and_ainvoke() -> None:
    lc = to_langchain(_weather_tool())
    assert lc.invoke({"city": "Oslo"}) == "sunny in Oslo"
    assert asyncio.run(lc.ainvoke({"city": "Rome"})) == "sunny in Rome"
    message = lc.invoke(
        {"name": "get_weather", "args": {"city": "Oslo"}, "id": "1", "type": "tool_call"}
    )
    assert isinstance(message, ToolMessage)
    assert (message.content, message.artifact, message.status) == (
        "sunny in Oslo",
        {"structured_content": {"temp": 21}},
        "success",
    )
    error = lc.invoke(
        {"name": "get_weather", "args": {"city": "Atlantis"}, "id": "2", "type": "tool_call"}
    )
    assert (error.content, error.status) == ("unknown city Atlantis", "error")


def test_sync_invoke_inside_a_running_loop() -> None:
    lc = to_langchain(_weather_tool())

    async def inside() -> Any:
        return lc.invoke({"city": "Oslo"})

    assert asyncio.run(inside()) == "sunny in Oslo"


def test_arguments_named_like_langchain_keywords_reach_the_tool() -> None:
    spec = ToolSpec.from_dict(
        {
            "name": "configure",
            "description": "Set a config value.",
            "parameters": {
                "type": "object",
                "properties": {"config": {"type": "string"}, "callbacks": {"type": "integer"}},
                "required": ["config"],
            },
        }
    )

    async def echo(arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(text=repr(dict(arguments)))

    lc = to_langchain(Tool(spec=spec, run=echo))
    expected = "{'config': 'dark', 'callbacks': 2}"
    assert lc.invoke({"config": "dark", "callbacks": 2}) == expected
    assert asyncio.run(lc.ainvoke({"config": "dark", "callbacks": 2})) == expected


def test_round_trip_tool_langchain_tool() -> None:
    original = _weather_tool()
    back = from_langchain(to_langchain(original))
    assert back.spec.name == original.spec.name
    assert back.spec.description == original.spec.description
    assert back.spec.parameters == original.spec.parameters
    # The classifier's answer travels with the tool, as the decided annotation.
    assert back.spec.annotations == {**original.spec.annotations, DECIDED_KEY: True}
    assert run(back, {"city": "Oslo"}) == ToolResult(text="sunny in Oslo", structured={"temp": 21})
    assert run(back, {"city": "Atlantis"}) == ToolResult.error("unknown city Atlantis")
    assert original.origin == [{"city": "Oslo"}, {"city": "Atlantis"}]


def test_langchain_tool_converts_back_to_itself() -> None:
    assert to_langchain(from_langchain(add)) is add


# --- a real LangChain agent, fake at the LLM boundary -----------------------------------


class ToolCallingFake(GenericFakeChatModel):
    """Replays scripted messages; accepts tools the way a tool-calling model does."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self


def test_converted_tool_runs_inside_create_agent() -> None:
    model = ToolCallingFake(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {"name": "get_weather", "args": {"city": "Oslo"}, "id": "c1"},
                        {"name": "get_weather", "args": {"city": "Atlantis"}, "id": "c2"},
                    ],
                ),
                AIMessage(content="It is sunny in Oslo."),
            ]
        )
    )
    agent = create_agent(model, tools=[to_langchain(_weather_tool())])
    state = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "Oslo?"}]}))
    observations = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content, m.artifact, m.status) for m in observations] == [
        ("c1", "sunny in Oslo", {"structured_content": {"temp": 21}}, "success"),
        ("c2", "unknown city Atlantis", None, "error"),
    ]
    assert state["messages"][-1].content == "It is sunny in Oslo."
