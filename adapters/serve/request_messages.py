"""The ``messages`` of a chat-completions request, as LangChain messages.

Roles ``system``/``developer``, ``user``, ``assistant`` (with its ``tool_calls``) and
``tool`` (answering an earlier call by its id) are accepted; content is a string or a list
of text parts. Anything else is refused with a 400 `ApiError` naming the message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from toolweave.adapters.serve.api_error import ApiError, json_kind

if TYPE_CHECKING:
    from toolweave.adapters.serve.protocol import Limits

__all__ = ["parse_messages"]

_ROLES = ("system", "developer", "user", "assistant", "tool")


def parse_messages(value: Any, limits: Limits) -> tuple[BaseMessage, ...]:
    if not isinstance(value, list) or not value:
        raise ApiError("'messages' must be a non-empty list", param="messages")
    if len(value) > limits.max_messages:
        raise ApiError(
            f"{len(value)} messages is more than this server's limit of {limits.max_messages}",
            param="messages",
        )
    out: list[BaseMessage] = []
    call_ids: set[str] = set()
    for i, message in enumerate(value):
        param = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise ApiError("each message must be an object", param=param)
        role = message.get("role")
        if role not in _ROLES:
            raise ApiError(
                f"unknown role {role!r} (expected one of {', '.join(_ROLES)})",
                param=f"{param}.role",
            )
        content = _content(message.get("content"), f"{param}.content", role == "assistant")
        if role in ("system", "developer"):
            out.append(SystemMessage(content))
        elif role == "user":
            out.append(HumanMessage(content))
        elif role == "assistant":
            calls = _assistant_calls(message.get("tool_calls"), f"{param}.tool_calls")
            call_ids.update(c["id"] for c in calls)
            out.append(AIMessage(content=content, tool_calls=calls))
        else:
            cid = message.get("tool_call_id")
            if not isinstance(cid, str) or cid not in call_ids:
                raise ApiError(
                    "a tool message needs the tool_call_id of an earlier assistant tool call",
                    param=f"{param}.tool_call_id",
                )
            out.append(ToolMessage(content, tool_call_id=cid))
    return tuple(out)


def _content(value: Any, param: str, optional: bool) -> str:
    if value is None and optional:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[str] = []
        for part in value:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, Mapping) else json_kind(part)
                raise ApiError(f"content parts of type {kind!r} are not supported", param=param)
            text = part.get("text")
            if not isinstance(text, str):
                raise ApiError("a text content part needs a string 'text'", param=param)
            parts.append(text)
        return "".join(parts)
    raise ApiError("'content' must be a string or a list of text parts", param=param)


def _assistant_calls(value: Any, param: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ApiError("'tool_calls' must be a list", param=param)
    calls: list[dict[str, Any]] = []
    for j, call in enumerate(value):
        where = f"{param}[{j}]"
        fn = call.get("function") if isinstance(call, Mapping) else None
        cid = call.get("id") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(cid, str) or not cid:
            raise ApiError("a tool call needs an 'id' and a 'function'", param=where)
        name, arguments = fn.get("name"), fn.get("arguments")
        if not isinstance(name, str) or not name or not isinstance(arguments, str):
            raise ApiError("a tool call's function needs a name and arguments text", param=where)
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            raise ApiError("a tool call's arguments must be a JSON object", param=where)
        calls.append({"name": name, "args": args, "id": cid, "type": "tool_call"})
    return calls
