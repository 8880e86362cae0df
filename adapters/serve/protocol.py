"""OpenAI chat-completions requests in: validation into a `ChatRequest`.

`parse_chat_request` checks a decoded JSON body against what the server supports and
turns it into LangChain messages plus the options `ChatToolweave` reads. Anything it
cannot honour is refused with an `ApiError` (OpenAI's error shape, status 400) naming
the parameter, never silently ignored; parameters that cannot change the answer
(``user``, ``metadata``, ...) are accepted. ``temperature``, ``top_p``, ``seed`` and the
``top_k`` extension are passed through (temperature 0 or absent: greedy decoding;
docs/sampling.md).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from toolweave.errors import ToolSpecError
from toolweave.sampling import Sampling
from toolweave.toolspec import ToolSpec

__all__ = [
    "ApiError",
    "ChatRequest",
    "Limits",
    "parse_chat_request",
    "parse_json_body",
]

#: Parameters OpenAI defines that cannot change a single-choice answer.
_IGNORED = frozenset(
    {
        "user",
        "metadata",
        "store",
        "service_tier",
        "prompt_cache_key",
        "safety_identifier",
    }
)
#: Other OpenAI parameters: accepted when null (not set), refused otherwise.
_UNSET_ONLY = frozenset(
    {
        "audio",
        "functions",
        "function_call",
        "modalities",
        "moderation",
        "prediction",
        "prompt_cache_options",
        "prompt_cache_retention",
        "reasoning_effort",
        "verbosity",
        "web_search_options",
    }
)
#: Parameters accepted only at their neutral value (name -> that value).
_NEUTRAL: Mapping[str, Any] = {
    "n": 1,
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "logprobs": False,
    "top_logprobs": 0,
    "logit_bias": {},
}
_SUPPORTED = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "response_format",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "top_k",
        "seed",
    }
)
#: The sampling parameters, passed through to the chat model.
_SAMPLING = ("temperature", "top_p", "top_k", "seed")
_ROLES = ("system", "developer", "user", "assistant", "tool")


class ApiError(Exception):
    """An error the server answers with, in OpenAI's shape."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}``."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass(frozen=True)
class Limits:
    """Bounds on one request (every one is checked before decoding starts)."""

    max_body_bytes: int = 4 << 20
    max_messages: int = 512
    max_tools: int = 128
    max_tokens: int = 4096
    max_stop: int = 4
    max_stop_chars: int = 64


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat-completions request.

    `options` are the keyword arguments `ChatToolweave` decodes with (``tools``,
    ``tool_choice``, ``parallel_tool_calls``, ``response_format`` and the sampling
    settings ``temperature``, ``top_p``, ``top_k``, ``seed``)."""

    model: str
    messages: tuple[BaseMessage, ...]
    max_tokens: int | None
    stream: bool = False
    include_usage: bool = False
    stop: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


def parse_json_body(body: bytes) -> Any:
    """The JSON value of a request body, or a 400 `ApiError` saying why not."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(f"the request body is not valid JSON: {exc}", code="invalid_json") from None
    except RecursionError:
        raise ApiError("the request body is nested too deeply", code="invalid_json") from None


def parse_chat_request(data: Any, limits: Limits = Limits()) -> ChatRequest:
    """Validate a decoded chat-completions body (see the module doc)."""
    if not isinstance(data, Mapping):
        raise ApiError(f"the request body must be a JSON object, got {_kind(data)}")
    for key, value in data.items():
        if key in _SUPPORTED or key in _IGNORED:
            continue
        if key in _UNSET_ONLY and value is None:
            continue
        if key in _UNSET_ONLY:
            raise ApiError(f"'{key}' is not supported by this server", param=key)
        if key in _NEUTRAL:
            if value is not None and value != _NEUTRAL[key]:
                raise ApiError(f"{key}={value!r} is not supported by this server", param=key)
            continue
        raise ApiError(f"Unrecognized request argument supplied: {key}", param=key)
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError("'model' must be a non-empty string", param="model")
    tools = _tools(data.get("tools"), limits)
    names = [t["function"]["name"] for t in tools]
    options: dict[str, Any] = _sampling(data)
    if tools:
        options["tools"] = tools
    choice = _tool_choice(data.get("tool_choice"), names)
    if choice is not None:
        options["tool_choice"] = choice
    parallel = data.get("parallel_tool_calls")
    if parallel is not None:
        if not isinstance(parallel, bool):
            raise ApiError("'parallel_tool_calls' must be a boolean", param="parallel_tool_calls")
        options["parallel_tool_calls"] = parallel
    response_format = _response_format(data.get("response_format"))
    if response_format is not None:
        # With tools too (as in OpenAI's API): a call is a call; an answer in text is
        # the JSON under the schema (tool_choice "none": always the JSON).
        options["response_format"] = response_format
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ApiError("'stream' must be a boolean", param="stream")
    return ChatRequest(
        model=model,
        messages=_messages(data.get("messages"), limits),
        max_tokens=_max_tokens(data, limits),
        stream=bool(stream),
        include_usage=_include_usage(data.get("stream_options"), bool(stream)),
        stop=_stop(data.get("stop"), limits),
        options=options,
    )


# ---------------------------------------------------------------------- scalars
def _sampling(data: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling parameters set in `data` (None: unset), each checked alone so the
    error names it."""
    found: dict[str, Any] = {}
    for key in _SAMPLING:
        value = data.get(key)
        if value is None:
            continue
        number = int | float if key in ("temperature", "top_p") else int
        if isinstance(value, bool) or not isinstance(value, number):
            kind = "a number" if number is not int else "an integer"
            raise ApiError(f"'{key}' must be {kind}", param=key)
        try:
            Sampling.of({key: value})
        except ValueError as exc:
            raise ApiError(str(exc), param=key, code="invalid_value") from None
        found[key] = value
    return found


def _max_tokens(data: Mapping[str, Any], limits: Limits) -> int | None:
    found = None
    for key in ("max_completion_tokens", "max_tokens"):
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ApiError(f"'{key}' must be a positive integer, got {value!r}", param=key)
        if value > limits.max_tokens:
            raise ApiError(
                f"'{key}' is {value}, more than this server's limit of {limits.max_tokens}",
                param=key,
            )
        found = value if found is None else found
    return found


def _include_usage(options: Any, stream: bool) -> bool:
    if options is None:
        return False
    if not isinstance(options, Mapping):
        raise ApiError("'stream_options' must be an object", param="stream_options")
    if not stream:
        raise ApiError(
            "'stream_options' is only allowed when 'stream' is true", param="stream_options"
        )
    usage = options.get("include_usage", False)
    if not isinstance(usage, bool):
        raise ApiError("'stream_options.include_usage' must be a boolean", param="stream_options")
    return usage


def _stop(value: Any, limits: Limits) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise ApiError("'stop' must be a string or a list of non-empty strings", param="stop")
    if len(stops) > limits.max_stop:
        raise ApiError(f"'stop' takes at most {limits.max_stop} strings", param="stop")
    if any(len(s) > limits.max_stop_chars for s in stops):
        raise ApiError(
            f"each 'stop' string is at most {limits.max_stop_chars} characters", param="stop"
        )
    return tuple(stops)


# ---------------------------------------------------------------------- tools
def _tools(value: Any, limits: Limits) -> list[dict[str, Any]]:
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


def _tool_choice(value: Any, names: Sequence[str]) -> Any:
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


def _response_format(value: Any) -> dict[str, Any] | None:
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


# ---------------------------------------------------------------------- messages
def _messages(value: Any, limits: Limits) -> tuple[BaseMessage, ...]:
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
                kind = part.get("type") if isinstance(part, Mapping) else _kind(part)
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


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
