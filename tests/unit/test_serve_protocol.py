"""The server's pure parts: request validation, response chunks and completions, the
stop-string holdback and the fair engine queue (no model)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from toolweave.adapters.serve.protocol import ApiError, Limits, parse_chat_request, parse_json_body
from toolweave.adapters.serve.queue import EngineQueue, QueueFullError, QueueTimeoutError
from toolweave.adapters.serve.responses import (
    ArgsDelta,
    CallStart,
    Completion,
    Finish,
    ResponseIds,
    StopHoldback,
    TextDelta,
    chunk,
    usage_chunk,
)

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
BASE: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def refused(body: Any, limits: Limits | None = None) -> ApiError:
    with pytest.raises(ApiError) as info:
        parse_chat_request(body, limits or Limits())
    assert set(info.value.body()["error"]) == {"message", "type", "param", "code"}
    return info.value


def test_a_tool_round_trip_becomes_langchain_messages() -> None:
    req = parse_chat_request(
        {
            "model": "m",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Weather in "},
                        {"type": "text", "text": "Oslo?"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "3 C"},
            ],
            "tools": [TOOL],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": False,
            "max_completion_tokens": 20,
            "seed": 7,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "stop": "END",
        }
    )
    system, user, assistant, tool = req.messages
    assert isinstance(system, SystemMessage) and system.content == "Be brief."
    assert isinstance(user, HumanMessage) and user.content == "Weather in Oslo?"
    assert isinstance(assistant, AIMessage)
    assert assistant.tool_calls[0]["args"] == {"city": "Oslo"}
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "call_1"
    assert req.max_tokens == 20 and req.stream and req.include_usage and req.stop == ("END",)
    assert req.options["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert req.options["parallel_tool_calls"] is False and req.options["tools"][0] == TOOL


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"temperature": -0.5}, "temperature"),
        ({"temperature": "warm"}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"seed": "7"}, "seed"),
        ({"n": 2}, "n"),
        ({"frobnicate": True}, "frobnicate"),
        ({"reasoning_effort": "high"}, "reasoning_effort"),
        ({"model": ""}, "model"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages[0].content",
        ),
        (
            {"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]},
            "messages[0].tool_call_id",
        ),
        ({"tool_choice": "sometimes", "tools": [TOOL]}, "tool_choice"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "other"}}, "tools": [TOOL]},
            "tool_choice",
        ),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0]"),
        ({"tools": [TOOL, TOOL]}, "tools[1]"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 10**6}, "max_tokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
            "response_format",
        ),
    ],
)
def test_unsupported_or_invalid_values_are_refused_naming_the_parameter(
    change: dict[str, Any], param: str
) -> None:
    err = refused({**BASE, **change})
    assert err.status == 400 and err.param == param


def test_sampling_parameters_pass_through_and_neutral_values_pass() -> None:
    req = parse_chat_request(
        {**BASE, "temperature": 0.8, "top_p": 0.9, "top_k": 40, "seed": 7, "user": "u"}
    )
    assert req.options == {"temperature": 0.8, "top_p": 0.9, "top_k": 40, "seed": 7}
    assert "temperature must be" in refused({**BASE, "temperature": -1}).message
    req = parse_chat_request(
        {**BASE, "n": 1, "presence_penalty": 0, "user": "u", "audio": None, "seed": None}
    )
    assert req.max_tokens is None and not req.stream and req.options == {}


def test_limits_bound_messages_and_tools() -> None:
    limits = Limits(max_messages=2, max_tools=1)
    assert refused({**BASE, "messages": BASE["messages"] * 3}, limits).param == "messages"
    second = {"type": "function", "function": {**TOOL["function"], "name": "other"}}
    assert refused({**BASE, "tools": [TOOL, second]}, limits).param == "tools"


def test_bad_json_bodies() -> None:
    for body in (b"{", b"\xff\xfe", b"[" * 100_000):
        with pytest.raises(ApiError) as info:
            parse_chat_request(parse_json_body(body))
        assert info.value.status == 400
    assert refused([1, 2]).param is None


def test_response_formats() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    req = parse_chat_request(
        {
            **BASE,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": schema},
            },
        }
    )
    assert req.options["response_format"] == {
        "type": "json_schema",
        "json_schema": {"schema": schema},
    }
    assert parse_chat_request({**BASE, "response_format": {"type": "text"}}).options == {}
    both = {**BASE, "tools": [TOOL], "response_format": {"type": "json_object"}}
    options = parse_chat_request(both).options
    assert options["response_format"] == {"type": "json_object"} and options["tools"]


def test_chunks_add_up_to_the_completion() -> None:
    ids = ResponseIds("m", id="chatcmpl-1", created=5)
    deltas = [
        CallStart(0, "call_a", "get_weather"),
        ArgsDelta(0, '{"city":"'),
        ArgsDelta(0, 'Oslo"}'),
        Finish("tool_calls", prompt_tokens=10, completion_tokens=4, cached_tokens=8),
    ]
    whole = Completion()
    for d in deltas:
        whole.add(d)
    body = whole.body(ids)
    message = body["choices"][0]["message"]
    assert message["content"] is None and body["choices"][0]["finish_reason"] == "tool_calls"
    assert message["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
        }
    ]
    assert body["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": 4,
        "total_tokens": 14,
        "prompt_tokens_details": {"cached_tokens": 8},
    }
    chunks = [chunk(ids, d, first=i == 0) for i, d in enumerate(deltas)]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == "chatcmpl-1" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    streamed = "".join(
        tc["function"].get("arguments", "")
        for c in chunks
        for tc in c["choices"][0]["delta"].get("tool_calls", [])
    )
    assert json.loads(streamed) == {"city": "Oslo"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert usage_chunk(ids, deltas[-1])["choices"] == []  # type: ignore[arg-type]
    text = Completion()
    text.add(TextDelta("Hi"))
    text.add(Finish("stop", 1, 1, 0))
    assert text.body(ids)["choices"][0]["message"]["content"] == "Hi"


def test_holdback_never_streams_a_stop_string() -> None:
    hold = StopHoldback(("STOP",))
    sent = [hold.push(p) for p in ["one ", "two S", "T", "O", "x three ST"]]
    assert "".join(sent) == "one two STOx three "
    assert hold.end("one two STOx three ") == ""
    hold = StopHoldback(("END",))
    assert hold.push("abc EN") == "abc " and hold.push("D more") == ""
    assert hold.end("abc ") == ""
    free = StopHoldback(())
    assert free.push("a") == "a" and free.end("ab") == "b"


def test_queue_is_fifo_bounded_and_hands_over_cancelled_slots() -> None:
    async def scenario() -> list[str]:
        q = EngineQueue(max_waiting=2, wait_timeout_s=5)
        order: list[str] = []
        gate = asyncio.Event()

        async def job(name: str, hold: bool = False) -> None:
            async with q.slot():
                order.append(name)
                if hold:
                    await gate.wait()

        first = asyncio.create_task(job("a", hold=True))
        await asyncio.sleep(0)
        b = asyncio.create_task(job("b"))
        c = asyncio.create_task(job("c"))
        await asyncio.sleep(0)
        assert q.waiting == 2
        with pytest.raises(QueueFullError):
            await job("d")
        b.cancel()  # a waiter leaving frees its place
        for _ in range(5):
            await asyncio.sleep(0)
        assert q.waiting == 1
        gate.set()
        await asyncio.gather(first, c)
        assert not q.busy and q.waiting == 0
        return order

    assert asyncio.run(scenario()) == ["a", "c"]


def test_queue_wait_is_bounded() -> None:
    async def scenario() -> None:
        q = EngineQueue(max_waiting=1, wait_timeout_s=0.05)
        async with q.slot():
            with pytest.raises(QueueTimeoutError):
                async with q.slot():
                    pass
        async with q.slot():  # the slot came back
            assert q.busy

    asyncio.run(scenario())
