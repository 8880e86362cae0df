"""What one chat request decodes: tool calls, text, or JSON under a schema or grammar.

LangChain hands a request its bound tools, ``tool_choice`` and ``response_format``;
`plan_request` turns them into a `RequestPlan`. The helpers here also read LangChain's
tool-choice and response-format shapes and the tool calls already made in a history.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from toolweave.adapters.langchain.tools import annotations_from_langchain
from toolweave.errors import ToolSpecError
from toolweave.memo import BoundedMemo
from toolweave.readonly import with_read_only
from toolweave.results import CallResult
from toolweave.toolspec import ToolSpec

__all__ = [
    "RequestPlan",
    "calls_since_user",
    "openai_tool",
    "plan_request",
    "repeats",
    "tool_choice_name",
]

PlanKind = Literal["call", "text", "json", "auto", "grammar"]


@dataclass(frozen=True)
class RequestPlan:
    """What one request decodes: `call` (one of `specs`), `auto` (the model may call;
    if it answers instead, the answer is JSON under `schema` when one is set, as when an
    agent asks for tools and a structured response together), `text`, `json` (under
    `schema`) or `grammar` (text under ``extra["grammar"]``).

    A `text` or `json` plan with `specs` comes from ``tool_choice="none"`` with tools
    bound: the answer may not call, but the tools stay in the prompt (as in OpenAI's
    API), so the prompt is the one a call would have seen."""

    kind: PlanKind
    specs: tuple[ToolSpec, ...] = ()
    schema: Mapping[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def plan_request(
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: Any,
    response_format: Mapping[str, Any] | None,
    grammar: str | None = None,
) -> RequestPlan:
    """The plan of a request with these bound tools (OpenAI format) and options."""
    if grammar is not None:
        return RequestPlan("grammar", extra={"grammar": grammar})
    schema = response_schema(response_format) if response_format is not None else None
    specs = bound_specs(tools or ())
    if not specs or tool_choice == "none":
        kind: PlanKind = "text" if schema is None else "json"
        return RequestPlan(kind, specs, schema=schema)
    wanted = tool_choice_name(tool_choice)
    if wanted is not None:
        return RequestPlan("call", tuple(s for s in specs if s.name == wanted))
    if tool_choice in ("any", "required"):
        return RequestPlan("call", specs)
    return RequestPlan("auto", specs, schema=schema)


# The specs of recently bound tool lists, by their JSON text: an agent binds the same
# tools on every model call, and parsing and classifying them is pure. Bounded.
_specs: BoundedMemo[tuple[ToolSpec, ...]] = BoundedMemo(64)


def bound_specs(tools: Sequence[Mapping[str, Any]]) -> tuple[ToolSpec, ...]:
    """The specs of bound tools (OpenAI format), read-only decided (annotations, then
    name and description: read-only tools get provisional calls). Raises
    `ToolSpecError` for a bad tool, on every request that binds it."""
    try:
        key: str | None = json.dumps(list(tools), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # not plain JSON: build them every time
        key = None
    hit = _specs.get(key) if key is not None else None
    if hit is not None:
        return hit
    specs = tuple(with_read_only([ToolSpec.from_dict(t) for t in tools]))
    if key is not None:
        _specs.put(key, specs)
    return specs


def tool_choice_name(choice: Any) -> str | None:
    """The tool a ``tool_choice`` names, if it names one."""
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else choice.get("name")
        return str(name) if name else None
    if isinstance(choice, str) and choice not in ("auto", "none", "any", "required"):
        return choice
    return None


def response_schema(response_format: Mapping[str, Any]) -> Mapping[str, Any]:
    """The JSON schema of an OpenAI-style ``response_format`` (or a bare schema)."""
    kind = response_format.get("type")
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        inner = response_format.get("json_schema", {})
        schema = inner.get("schema", inner) if isinstance(inner, Mapping) else None
        if not isinstance(schema, Mapping):
            raise ToolSpecError("response_format", "json_schema needs a 'schema' object")
        return schema
    return response_format


def openai_tool(tool: Mapping[str, Any] | type | Callable[..., Any] | BaseTool) -> dict[str, Any]:
    """OpenAI tool format, keeping a LangChain tool's read-only hints as annotations."""
    formatted = convert_to_openai_tool(tool)
    if isinstance(tool, BaseTool):
        hints = annotations_from_langchain(tool)
        if hints:
            formatted["function"]["annotations"] = hints
    return formatted


def calls_since_user(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """The (name, arguments) of every tool call made since the last user message."""
    out: list[tuple[str, str]] = []
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            break
        if isinstance(m, AIMessage):
            out.extend((c["name"], json.dumps(c["args"], sort_keys=True)) for c in m.tool_calls)
    return out


def repeats(result: CallResult, earlier: Sequence[tuple[str, str]]) -> bool:
    """Whether `result` calls a tool with arguments already in `earlier`."""
    seen = set(earlier)
    return any(
        (c.name, json.dumps(dict(c.arguments), sort_keys=True)) in seen for c in result.calls
    )
