"""ChatToolweave on the embedded model: tool calls, streaming, async, structured output."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.messages import template_messages
from toolweave.errors import ToolSpecError, ToolweaveError
from toolweave.formats import get_format


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Get the current weather in a city."""
    return f"12 degrees {unit} in {city}"


@tool
def send_email(to: str, subject: str) -> str:
    """Send an email."""
    return "sent"


class Person(BaseModel):
    """A person mentioned in the text."""

    name: str = Field(description="first name")
    age: int


QUERIES = ["What's the weather in Zurich?", "Weather in Oslo, please.", "Is it cold in Rome?"]


def merge(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    return full


def test_calls_have_unique_ids_and_several_calls_fit_in_one_message() -> None:
    model = ChatToolweave(max_calls=3).bind_tools([get_weather], tool_choice="any")
    msg = model.invoke("What's the weather in Paris?")
    assert isinstance(msg, AIMessage) and msg.tool_calls
    assert all(c["name"] == "get_weather" for c in msg.tool_calls)
    ids = [c["id"] for c in msg.tool_calls]
    assert len(set(ids)) == len(ids) and all(ids)
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    assert msg.response_metadata["model_name"]
    usage = msg.usage_metadata
    assert usage is not None and usage["input_tokens"] > 0 and usage["output_tokens"] > 0


def test_truncated_call_is_an_invalid_tool_call() -> None:
    model = ChatToolweave(max_tokens=6).bind_tools([get_weather], tool_choice="any")
    msg = model.invoke("What's the weather in Paris?")
    assert msg.tool_calls == []
    assert msg.invalid_tool_calls and "truncated" in (msg.invalid_tool_calls[-1]["error"] or "")
    assert msg.response_metadata["finish_reason"] == "length"


def test_streamed_argument_deltas_rebuild_the_call() -> None:
    model = ChatToolweave().bind_tools([get_weather], tool_choice="get_weather")
    chunks = list(model.stream("What's the weather in Zurich?"))
    assert sum(1 for c in chunks if c.usage_metadata) == 1  # usage once per message
    deltas = [tc for c in chunks for tc in c.tool_call_chunks]
    assert deltas[0]["name"] == "get_weather" and deltas[0]["id"]
    assert len(deltas) > 2  # the name, then the arguments in pieces
    args_text = "".join(d["args"] or "" for d in deltas)
    full = merge(chunks)
    assert full.tool_calls[0]["args"] == json.loads(args_text)
    assert full.response_metadata["finish_reason"] == "tool_calls"
    plain = model.invoke("What's the weather in Zurich?")
    assert [c["args"] for c in plain.tool_calls] == [c["args"] for c in full.tool_calls]


@pytest.mark.parametrize("query", QUERIES)
def test_lossless_chat_model_equals_serial_greedy_decoding(query: str) -> None:
    lossless = ChatToolweave(mode="lossless").bind_tools([get_weather], tool_choice="any")
    serial = ChatToolweave(mode="jump").bind_tools([get_weather], tool_choice="any")
    a, b = lossless.invoke(query), serial.invoke(query)
    assert [(c["name"], c["args"]) for c in a.tool_calls] == [
        (c["name"], c["args"]) for c in b.tool_calls
    ]
    # Same tokens in and out; how many prompt tokens came from the cache may differ.
    usage_a, usage_b = a.usage_metadata, b.usage_metadata
    assert usage_a is not None and usage_b is not None
    keys = ("input_tokens", "output_tokens", "total_tokens")
    assert [usage_a[k] for k in keys] == [usage_b[k] for k in keys]  # type: ignore[literal-required]


def test_tool_choice_none_name_and_unknown() -> None:
    base = ChatToolweave(max_tokens=24)
    msg = base.bind_tools([get_weather, send_email], tool_choice="none").invoke("Weather in Bern?")
    assert msg.tool_calls == [] and isinstance(msg.content, str) and msg.content
    forced = ChatToolweave().bind_tools([get_weather, send_email], tool_choice="send_email")
    msg = forced.invoke("Weather in Bern?")
    assert [c["name"] for c in msg.tool_calls] == ["send_email"]
    with pytest.raises(ToolSpecError):
        base.bind_tools([get_weather], tool_choice="nope")


def test_bind_tools_accepts_functions_pydantic_models_and_json_schemas() -> None:
    def lookup_contact(name: str) -> str:
        """Find a contact by name."""
        return name

    schema = {
        "name": "get_time",
        "description": "Current time in a timezone.",
        "parameters": {
            "type": "object",
            "properties": {"tz": {"type": "string"}},
            "required": ["tz"],
        },
    }
    model = ChatToolweave().bind_tools([lookup_contact, Person, schema], tool_choice="Person")
    msg = model.invoke("Anna is 31 years old.")
    assert msg.tool_calls[0]["name"] == "Person"
    assert isinstance(msg.tool_calls[0]["args"]["age"], int)
    with pytest.raises(ToolSpecError):
        ChatToolweave().bind_tools([{"name": "bad name!", "parameters": {}}])


def test_conversation_with_tool_results_renders_calls_back() -> None:
    history = [
        HumanMessage("Weather in Bern?"),
        AIMessage(
            "",
            tool_calls=[{"name": "get_weather", "args": {"city": "Bern"}, "id": "c1"}],
        ),
        ToolMessage("12 degrees", tool_call_id="c1"),
    ]
    rendered = template_messages(history, get_format("hermes"))
    assert rendered[1] == {
        "role": "assistant",
        "content": '<tool_call>{"name":"get_weather","arguments":{"city":"Bern"}}</tool_call>',
    }
    assert rendered[2] == {"role": "tool", "content": "12 degrees"}
    answer = ChatToolweave(max_tokens=24).bind_tools([get_weather]).invoke(history)
    assert isinstance(answer, AIMessage)


def test_text_stop_sequence_and_per_call_model_rejected() -> None:
    model = ChatToolweave(max_tokens=40)
    full = model.invoke("Count from one to ten in words.")
    assert isinstance(full.content, str) and len(full.content) > 3
    word = full.content.split()[1] if len(full.content.split()) > 1 else full.content[:2]
    cut = model.invoke("Count from one to ten in words.", stop=[word])
    assert word not in cut.content and full.content.startswith(cut.content)
    with pytest.raises(ToolweaveError):
        model.invoke("hi", model="another.gguf")


@pytest.mark.parametrize("method", ["function_calling", "json_schema"])
def test_structured_output(method: str) -> None:
    model = ChatToolweave().with_structured_output(Person, method=method)  # type: ignore[arg-type]
    out = model.invoke("Anna is 31 years old. Extract the person.")
    assert isinstance(out, Person) and out.name


def test_structured_output_json_mode_and_include_raw() -> None:
    model = ChatToolweave(max_tokens=64).with_structured_output(
        method="json_mode", include_raw=True
    )
    out: Any = model.invoke("Return a JSON object describing a cat.")
    assert set(out) == {"raw", "parsed", "parsing_error"}
    assert isinstance(json.loads(out["raw"].content), dict)
    assert isinstance(out["parsed"], dict) and out["parsing_error"] is None


# Cold prompts: with prompt-cache reuse, logits depend slightly on which prompt ran
# before (prefill pass boundaries), so order-independent answers need a cold start.
def test_threads_share_one_engine_safely() -> None:
    model = ChatToolweave(reuse_prompt_cache=False).bind_tools([get_weather], tool_choice="any")
    serial = [model.invoke(q).tool_calls[0]["args"] for q in QUERIES]
    with ThreadPoolExecutor(3) as pool:
        parallel = [m.tool_calls[0]["args"] for m in pool.map(model.invoke, QUERIES)]
    assert parallel == serial


@pytest.mark.anyio
async def test_async_never_blocks_the_event_loop_and_concurrent_calls_are_exact() -> None:
    model = ChatToolweave(reuse_prompt_cache=False).bind_tools([get_weather], tool_choice="any")
    serial = [model.invoke(q).tool_calls[0]["args"] for q in QUERIES]
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    t0 = time.perf_counter()
    tick_task = asyncio.create_task(ticker())
    results = await asyncio.gather(*(model.ainvoke(q) for q in QUERIES))
    elapsed = time.perf_counter() - t0
    done.set()
    await tick_task
    assert [r.tool_calls[0]["args"] for r in results] == serial
    # A blocked loop would tick a handful of times; a free one about every 10 ms.
    assert ticks >= 0.3 * elapsed / 0.01


@pytest.mark.anyio
async def test_cancelled_stream_releases_the_engine() -> None:
    model = ChatToolweave(max_tokens=200)
    stream = model.astream("Write a long story about a cat.")
    got = 0
    async for _ in stream:
        got += 1
        if got == 3:
            break
    await stream.aclose()
    msg = await asyncio.wait_for(
        model.bind_tools([get_weather], tool_choice="any").ainvoke("Weather in Bern?"), 120
    )
    assert msg.tool_calls


def test_private_engine_keeps_its_own_kv_cache() -> None:
    """Models sharing the process's engine see each other's live prompt; one with
    ``private_engine=True`` has an engine of its own, freed by `close_engine`."""
    shared_a = ChatToolweave(n_ctx=1024, state_store=None)
    shared_b = ChatToolweave(n_ctx=1024, state_store=None)
    own = ChatToolweave(n_ctx=1024, state_store=None, private_engine=True, max_tokens=4)
    assert shared_a.engine is shared_b.engine
    assert own.engine is not shared_a.engine and own.engine is own.engine
    own.invoke([HumanMessage("Say hi.")])
    assert own.engine.seq_tokens.get(0)
    assert (
        not shared_a.engine.seq_tokens.get(0)
        or shared_a.engine.seq_tokens[0] != (own.engine.seq_tokens[0])
    )
    engine = own.engine
    own.close_engine()
    with pytest.raises(ToolweaveError):
        engine.forward([])
    assert own.engine is not engine  # a new one on next use
    own.close_engine()
