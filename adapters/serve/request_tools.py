"""The tool fields of a chat-completions request: ``tools``, ``tool_choice`` and
``response_format``.

Each tool definition (and a ``json_schema`` response format) is checked by building a
`ToolSpec` from it; definitions already checked are remembered, since agents send the same
tools with every request. An invalid one is refused with a 400 `ApiError` naming the field.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolweave.adapters.serve.api_error import ApiError
from toolweave.errors import ToolSpecError
from toolweave.toolspec import ToolSpec

if TYPE_CHECKING:
    from toolweave.adapters.serve.protocol import Limits

__all__ = ["parse_response_format", "parse_tool_choice", "parse_tools"]


def parse_tools(value: Any, limits: Limits) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ApiError("'tools' must be a list", param="tools")
    if len(value) > limits.max_tools:
        raise ApiError(
            f"{len(value)} tools is more than this server's limit of {limits.max_tools}",
            param="tools",
        )
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, tool in enumerate(value):
        param = f"tools[{i}]"
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            raise ApiError("each tool must be {'type': 'function', 'function': {...}}", param=param)
        fn = tool.get("function")
        if not isinstance(fn, Mapping):
            raise ApiError("a tool's 'function' must be an object", param=f"{param}.function")
        name = _checked_tool_name(fn, param)
        if name in seen:
            raise ApiError(f"two tools are named {name!r}", param=param)
        seen.add(name)
        out.append({"type": "function", "function": dict(fn)})
    return out


#: Tool definitions already checked (agents send the same tools with every request, and
#: checking a schema costs milliseconds): canonical JSON -> tool name, most recent last.
_CHECKED: OrderedDict[str, str] = OrderedDict()
_CHECKED_KEPT = 512
_CHECKED_LOCK = threading.Lock()


def _checked_tool_name(fn: Mapping[str, Any], param: str, what: str = "tool") -> str:
    """The name of a valid tool definition (a 400 `ApiError` for an invalid one)."""
    try:
        key = json.dumps(fn, sort_keys=True)
    except (TypeError, ValueError):
        raise ApiError("a tool definition must be plain JSON", param=param) from None
    with _CHECKED_LOCK:
        name = _CHECKED.get(key)
        if name is not None:
            _CHECKED.move_to_end(key)
            return name
    try:
        name = ToolSpec.from_dict(fn).name
    except ToolSpecError as exc:
        raise ApiError(f"invalid {what}: {exc}", param=param) from None
    with _CHECKED_LOCK:
        _CHECKED[key] = name
        while len(_CHECKED) > _CHECKED_KEPT:
            _CHECKED.popitem(last=False)
    return name


def parse_tool_choice(value: Any, names: Sequence[str]) -> Any:
    if value is None:
        return None
    if value in ("auto", "none", "required"):
        if value == "required" and not names:
            raise ApiError("tool_choice 'required' needs 'tools'", param="tool_choice")
        return value
    if isinstance(value, Mapping) and value.get("type") == "function":
        fn = value.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ApiError("a named tool_choice needs function.name", param="tool_choice")
        if name not in names:
            raise ApiError(
                f"tool_choice names {name!r}, which is not in 'tools'", param="tool_choice"
            )
        return {"type": "function", "function": {"name": name}}
    raise ApiError(
        "tool_choice must be 'auto', 'none', 'required' or "
        "{'type': 'function', 'function': {'name': ...}}",
        param="tool_choice",
    )


def parse_response_format(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, Mapping) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        inner = value.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, Mapping) else None
        if not isinstance(schema, Mapping):
            raise ApiError(
                "response_format json_schema needs json_schema.schema, an object",
                param="response_format",
            )
        output = {"name": "output", "parameters": schema}
        _checked_tool_name(output, "response_format", "response schema")
        return {"type": "json_schema", "json_schema": {"schema": dict(schema)}}
    raise ApiError(
        "response_format type must be 'text', 'json_object' or 'json_schema'",
        param="response_format",
    )
