"""`toolweave serve` on the real embedded model over loopback HTTP: the official `openai`
client, LangChain's `ChatOpenAI` in an agent, concurrent clients, cancellation and
OpenAI-shaped errors."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from toolweave.adapters.serve.app import ServeConfig, create_app
from toolweave.adapters.serve.backend import Backend
from toolweave.adapters.serve.background import ServerThread
from toolweave.adapters.serve.protocol import Limits
from toolweave.native.states.store import StateStore

KEY = "test-key"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city."}},
            "required": ["city"],
        },
    },
}
EMAIL = {
    "type": "function",
    "function": {
        "name": "send_email",
        "description": "Send an email to a recipient.",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
            "required": ["to", "subject"],
        },
    },
}
CITIES = ["Paris", "Berlin", "Tokyo", "Madrid", "Rome", "Oslo", "Lima", "Cairo"]


@pytest.fixture(scope="module")
def backend() -> Iterator[Backend]:
    store = StateStore()
    b = Backend(n_ctx=2048, max_tokens=48, mode="jump", auto_calls="user_turn", state_store=store)
    b.load()
    yield b
    store.close()


@pytest.fixture(scope="module")
def server(backend: Backend) -> Iterator[ServerThread]:
    config = ServeConfig(api_key=KEY, limits=Limits(max_body_bytes=64 << 10, max_tokens=1024))
    with ServerThread(create_app(backend, config)) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=server.base_url, max_retries=0, timeout=120)


def ask(city: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"What is the weather in {city} today?"}]


def test_models_lists_the_served_model(client: openai.OpenAI, backend: Backend) -> None:
    assert [m.id for m in client.models.list().data] == [backend.model_id]


def test_named_tool_call_streamed_equals_the_whole_response(
    client: openai.OpenAI, backend: Backend
) -> None:
    kwargs: dict[str, Any] = {
        "model": backend.model_id,
        "messages": ask("Paris"),
        "tools": [EMAIL, WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    whole = client.chat.completions.create(**kwargs)
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather"]  # type: ignore[union-attr]
    args = json.loads(calls[0].function.arguments)  # type: ignore[union-attr]
    assert args == {"city": "Paris"}
    assert whole.usage is not None and whole.usage.prompt_tokens > 50
    assert whole.usage.completion_tokens > 0

    chunks = list(
        client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    parts = [tc for d in deltas for tc in d.tool_calls or []]
    assert parts[0].id and parts[0].function and parts[0].function.name == "get_weather"
    arg_parts = [p.function.arguments for p in parts if p.function and p.function.arguments]
    assert len(arg_parts) >= 2  # the arguments arrive as deltas, not at the end
    assert "".join(arg_parts) == calls[0].function.arguments  # type: ignore[union-attr]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    usage = chunks[-1].usage
    assert usage is not None and usage.prompt_tokens == whole.usage.prompt_tokens
    # The same prompt again: its whole prefix comes from the previous request.
    details = usage.prompt_tokens_details
    assert details is not None and (details.cached_tokens or 0) >= usage.prompt_tokens - 1


def test_tool_result_round_trip_reuses_the_first_turn(
    client: openai.OpenAI, backend: Backend
) -> None:
    messages: list[dict[str, Any]] = ask("Oslo")
    first = client.chat.completions.create(
        model=backend.model_id, messages=messages, tools=[WEATHER]
    )
    call = (first.choices[0].message.tool_calls or [])[0]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "3 degrees celsius, snowing"},
    ]
    second = client.chat.completions.create(
        model=backend.model_id, messages=messages, tools=[WEATHER], max_tokens=24
    )
    assert second.usage is not None and first.usage is not None
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + 10
    details = second.usage.prompt_tokens_details
    assert details is not None and (details.cached_tokens or 0) >= first.usage.prompt_tokens - 8
    # After a tool result the model decides; repeating the answered call becomes text.
    message = second.choices[0].message
    assert message.content or message.tool_calls
    if message.tool_calls:
        assert message.tool_calls[0].function.arguments != call.function.arguments  # type: ignore[union-attr]


def test_text_answer_stops_before_the_stop_string_stream_and_not(
    client: openai.OpenAI, backend: Backend
) -> None:
    kwargs: dict[str, Any] = {
        "model": backend.model_id,
        "messages": [{"role": "user", "content": "Count from one to ten in words."}],
        "max_tokens": 40,
    }
    free = client.chat.completions.create(**kwargs).choices[0].message.content or ""
    words = free.replace(",", " ").split()
    assert len(words) > 3
    stop = words[2]
    cut = client.chat.completions.create(**kwargs, stop=[stop])
    text = cut.choices[0].message.content or ""
    assert cut.choices[0].finish_reason == "stop" and stop not in text
    assert free.startswith(text)
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(**kwargs, stop=[stop], stream=True)
        if c.choices
    )
    assert streamed == text


def test_json_schema_response_format(client: openai.OpenAI, backend: Backend) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    }
    out = client.chat.completions.create(
        model=backend.model_id,
        messages=[{"role": "user", "content": "Plan a 3-day trip to Rome as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "trip", "schema": schema}},
        max_tokens=40,
    )
    value = json.loads(out.choices[0].message.content or "")
    assert set(value) == {"city", "days"} and isinstance(value["days"], int)


def test_response_format_with_tools(client: openai.OpenAI, backend: Backend) -> None:
    """Tools and a response format together, as OpenAI's API takes them: a required call
    is a call; with ``tool_choice="none"`` the answer is the JSON under the schema."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    fmt: Any = {"type": "json_schema", "json_schema": {"name": "place", "schema": schema}}
    common: dict[str, Any] = {
        "model": backend.model_id,
        "messages": ask("Paris"),
        "tools": [WEATHER, EMAIL],
        "response_format": fmt,
        "max_tokens": 40,
    }
    called = client.chat.completions.create(**common, tool_choice="required")
    calls = called.choices[0].message.tool_calls
    assert calls and calls[0].function.name in ("get_weather", "send_email")  # type: ignore[union-attr]
    answered = client.chat.completions.create(**common, tool_choice="none")
    message = answered.choices[0].message
    assert not message.tool_calls
    assert set(json.loads(message.content or "")) == {"city"}


def test_eight_concurrent_clients_get_their_serial_answers(
    client: openai.OpenAI, backend: Backend
) -> None:
    def one(city: str, stream: bool) -> tuple[str, str]:
        kwargs: dict[str, Any] = {
            "model": backend.model_id,
            "messages": ask(city),
            "tools": [WEATHER, EMAIL],
            "tool_choice": "required",
        }
        if not stream:
            fn = client.chat.completions.create(**kwargs).choices[0].message.tool_calls[0].function  # type: ignore[index]
            return fn.name, fn.arguments  # type: ignore[union-attr]
        name, args = "", ""
        for c in client.chat.completions.create(**kwargs, stream=True):
            for tc in (c.choices[0].delta.tool_calls or []) if c.choices else []:
                name += (tc.function.name or "") if tc.function else ""
                args += (tc.function.arguments or "") if tc.function else ""
        return name, args

    serial = [one(city, False) for city in CITIES]
    assert all(name == "get_weather" for name, _ in serial)
    assert [json.loads(a)["city"].lower() for _, a in serial] == [c.lower() for c in CITIES]
    with ThreadPoolExecutor(len(CITIES)) as pool:
        futures = [pool.submit(one, city, i % 2 == 1) for i, city in enumerate(CITIES)]
        concurrent = [f.result(timeout=300) for f in futures]
    assert concurrent == serial


def test_agent_on_chat_openai_calls_the_tool_and_answers(
    server: ServerThread, backend: Backend
) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    seen: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        seen.append(city)
        return f"12 degrees, cloudy, in {city}"

    model = ChatOpenAI(
        model=backend.model_id, base_url=server.base_url, api_key=KEY, max_retries=0, timeout=120
    )
    agent = create_agent(model, [get_weather])
    out = agent.invoke({"messages": [HumanMessage("What's the weather in Zurich right now?")]})
    messages = out["messages"]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [c["name"] for c in calls] == ["get_weather"] and seen == [calls[0]["args"]["city"]]
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == [calls[0]["id"]]
    assert isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls


def test_sampling_parameters_give_a_valid_call_and_the_same_seed_the_same_one(
    client: openai.OpenAI, backend: Backend
) -> None:
    kwargs: dict[str, Any] = {
        "model": backend.model_id,
        "messages": ask("Lima"),
        "tools": [WEATHER],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "temperature": 0.9,
        "top_p": 0.95,
        "seed": 11,
        "extra_body": {"top_k": 20},
    }
    answers = []
    for _ in range(2):
        choice = client.chat.completions.create(**kwargs).choices[0]
        calls = choice.message.tool_calls or []
        assert [c.function.name for c in calls] == ["get_weather"]  # type: ignore[union-attr]
        args = json.loads(calls[0].function.arguments)  # type: ignore[union-attr]
        assert isinstance(args["city"], str)
        answers.append(args)
    assert answers[0] == answers[1]


def test_client_disconnect_stops_decoding(
    server: ServerThread, backend: Backend, client: openai.OpenAI
) -> None:
    engine = backend.chat(None).engine
    messages = [{"role": "user", "content": "Count from 1 to 1000, separated by commas."}]
    # Left alone, this answer runs to its token limit...
    control = client.chat.completions.create(
        model=backend.model_id,
        messages=messages,  # type: ignore[arg-type]
        max_tokens=120,
    )
    assert control.choices[0].finish_reason == "length"
    # ...but a client that leaves after the first chunk stops it within a few passes.
    body = {"model": backend.model_id, "messages": messages, "max_tokens": 1000, "stream": True}
    headers = {"Authorization": f"Bearer {KEY}"}
    before = engine.counters.forward_passes
    with (
        httpx.Client(timeout=60) as http,
        http.stream("POST", f"{server.base_url}/chat/completions", json=body, headers=headers) as r,
    ):
        assert r.status_code == 200
        next(r.iter_lines())  # the first chunk: decoding has started
    deadline = time.monotonic() + 10
    while engine.lock.locked():  # freed once the decoder stopped
        assert time.monotonic() < deadline, "decoding went on after the client left"
        time.sleep(0.02)
    stopped = engine.counters.forward_passes
    time.sleep(0.3)
    assert engine.counters.forward_passes == stopped
    assert stopped - before < 120


def _post(
    server: ServerThread, content: bytes | dict[str, Any], key: str | None = KEY
) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = content if isinstance(content, bytes) else json.dumps(content).encode()
    return httpx.post(
        f"{server.base_url}/chat/completions", content=data, headers=headers, timeout=60
    )


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    error: dict[str, Any] = body["error"]
    return error


def test_errors_have_openai_shape(server: ServerThread, backend: Backend) -> None:
    good = {"model": backend.model_id, "messages": ask("Rome")}
    assert _error(_post(server, b'{"model": "x", "messages": ['), 400)["code"] == "invalid_json"
    assert _error(_post(server, {**good, "model": "gpt-4o"}), 404)["code"] == "model_not_found"
    err = _error(_post(server, {**good, "temperature": -0.7}), 400)
    assert err["param"] == "temperature" and ">= 0" in err["message"]
    assert (
        _error(_post(server, {**good, "tool_choice": "sometimes"}), 400)["param"] == "tool_choice"
    )
    bad_role = {**good, "messages": [{"role": "robot", "content": "hi"}]}
    assert _error(_post(server, bad_role), 400)["param"] == "messages[0].role"
    assert _error(_post(server, {**good, "frobnicate": 1}), 400)["param"] == "frobnicate"
    huge = {**good, "messages": [{"role": "user", "content": "x" * (80 << 10)}]}
    assert _error(_post(server, huge), 413)["code"] == "request_too_large"
    assert _error(_post(server, good, key="wrong"), 401)["code"] == "invalid_api_key"
    assert _error(_post(server, good, key=None), 401)["code"] == "missing_api_key"
    lost = httpx.get(f"{server.base_url}/nothing", timeout=10)
    assert _error(lost, 404)["type"] == "not_found_error"
    # The openai client reads the same shape.
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="wrong", base_url=server.base_url, max_retries=0).models.list()


def test_a_full_queue_answers_429(backend: Backend) -> None:
    config = ServeConfig(max_waiting=0)
    with ServerThread(create_app(backend, config)) as alone:
        body = {
            "model": backend.model_id,
            "messages": [{"role": "user", "content": "Write a long story about a lighthouse."}],
            # About 8 s of decoding here; leaving the stream cancels it.
            "max_tokens": 1024,
            "stream": True,
        }
        with (
            httpx.Client(timeout=60) as http,
            http.stream("POST", f"{alone.base_url}/chat/completions", json=body) as busy,
        ):
            assert busy.status_code == 200
            # Keep the iterator: a dropped one closes the stream when it is collected,
            # the server then frees the engine, and the refusal below became a race.
            lines = busy.iter_lines()
            next(lines)  # decoding has started and holds the engine
            refused = http.post(
                f"{alone.base_url}/chat/completions", json={**body, "stream": False}
            )
            err = _error(refused, 429)
            assert err["code"] == "queue_full" and refused.headers["retry-after"]
    # Leaving the stream cancelled it: the engine is free again.
    engine = backend.chat(None).engine
    deadline = time.monotonic() + 10
    while engine.lock.locked():
        assert time.monotonic() < deadline, "decoding went on after the client left"
        time.sleep(0.02)


def test_the_command_serves_with_the_key_from_the_environment() -> None:
    import os
    import signal
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "TOOLWEAVE_API_KEY": "from-env"}
    args = ["--port", str(port), "--n-ctx", "512", "--mode", "jump", "--no-prompt-cache"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolweave.adapters.serve", *args],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        listed = httpx.get(f"{base}/models", headers={"Authorization": "Bearer from-env"})
        assert listed.status_code == 200 and listed.json()["data"][0]["object"] == "model"
        assert httpx.get(f"{base}/models").status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    assert "serving" in (proc.stderr.read() if proc.stderr else "")
