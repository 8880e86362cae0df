"""OpenAI chat-completions requests in: validation into a `ChatRequest`.

`parse_chat_request` checks a decoded JSON body against what the server supports and
turns it into LangChain messages plus the options `ChatToolweave` reads. Anything it
cannot honour is refused with an `ApiError` (OpenAI's error shape, status 400) naming
the parameter, never silently ignored; parameters that cannot change the answer
(``user``, ``metadata``, ...) are accepted. ``temperature``, ``top_p``, ``seed`` and the
``top_k`` extension are passed through (temperature 0 or absent: greedy decoding;
docs/sampling.md).

This module holds the request types and the top-level and scalar checks; the tool fields
are checked in `request_tools`, the messages in `request_messages`, and `ApiError` lives
in `api_error`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from toolweave.adapters.serve.api_error import ApiError, json_kind
from toolweave.adapters.serve.request_messages import parse_messages
from toolweave.adapters.serve.request_tools import (
    parse_response_format,
    parse_tool_choice,
    parse_tools,
)
from toolweave.sampling import Sampling

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
        raise ApiError(f"the request body must be a JSON object, got {json_kind(data)}")
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
    tools = parse_tools(data.get("tools"), limits)
    names = [t["function"]["name"] for t in tools]
    options: dict[str, Any] = _sampling(data)
    if tools:
        options["tools"] = tools
    choice = parse_tool_choice(data.get("tool_choice"), names)
    if choice is not None:
        options["tool_choice"] = choice
    parallel = data.get("parallel_tool_calls")
    if parallel is not None:
        if not isinstance(parallel, bool):
            raise ApiError("'parallel_tool_calls' must be a boolean", param="parallel_tool_calls")
        options["parallel_tool_calls"] = parallel
    response_format = parse_response_format(data.get("response_format"))
    if response_format is not None:
        # With tools too (as in OpenAI's API): a call is a call; an answer in text is
        # the JSON under the schema (tool_choice "none": always the JSON).
        options["response_format"] = response_format
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ApiError("'stream' must be a boolean", param="stream")
    return ChatRequest(
        model=model,
        messages=parse_messages(data.get("messages"), limits),
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
