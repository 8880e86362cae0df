"""Fault injection: real MCP servers that crash, hang, write garbage or return errors,
and real model runs that never end, overflow the context, get invalid schemas or are
cancelled, and 8 callers at once.

Every case checks the documented error (or error observation) *and* that what was hit
is usable afterwards: the hub answers the next call, the engine holds no stray KV cells
nor a held lock, and a normal request gives the answer it gives on a fresh engine. A
tool that is not read-only logs each execution to a file: it never runs twice.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.provisional import ProvisionalToolMiddleware
from toolweave.adapters.langchain.tools import from_langchain, to_langchain
from toolweave.adapters.mcp.client import MCPHub, ServerConfig, open_connection
from toolweave.errors import ConstraintError, ContextFullError, ToolSpecError
from toolweave.native.caller import ToolCaller
from toolweave.native.decode.text import generate_text
from toolweave.native.engine import Engine
from toolweave.plan.executor import TaskEvent, execute_plan, execute_plan_text
from toolweave.plan.format import PlanTask
from toolweave.results import CallResult
from toolweave.toolspec import ToolSpec

FAULT_SERVER = Path(__file__).resolve().parents[1] / "data" / "fault_server.py"
WEATHER = ToolSpec.from_dict(
    {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    }
).with_read_only(True)
QUERY = "What's the weather in Zurich?"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- MCP servers -------------------------------------------------------------------------


class FaultHub:
    """A hub on the fault server, and the log its side-effect tools write."""

    def __init__(self, hub: MCPHub, log: Path) -> None:
        self.hub = hub
        self.log = log

    def executions(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []

    def usable(self) -> None:
        """The server answers (restarted if needed) and reports what the log holds."""
        result = self.hub.call("count", {})
        assert not result.is_error, result.text
        assert result.structured == {"lines": len(self.executions())}


@pytest.fixture
def faults(tmp_path: Path) -> Iterator[FaultHub]:
    log = tmp_path / "executions.log"
    config = ServerConfig(
        name="fault",
        command=[sys.executable, str(FAULT_SERVER)],
        env={"FAULT_LOG": str(log)},
        call_timeout=1.0,
    )
    with MCPHub([config]) as hub:
        yield FaultHub(hub, log)


def test_crash_after_a_side_effect_is_an_observation_and_never_retried(faults: FaultHub) -> None:
    result = faults.hub.call("crash_after", {"text": "one"})
    assert result.is_error
    assert "tool server 'fault': stopped while handling 'crash_after'" in result.text
    assert "the server process exited" in result.text and "restarted" in result.text
    assert faults.executions() == ["one"]  # ran once, not resent to the new process
    faults.usable()
    assert faults.executions() == ["one"]


def test_hang_after_a_side_effect_times_out_and_is_never_retried(faults: FaultHub) -> None:
    result = faults.hub.call("hang_after", {"text": "two"})
    assert result.is_error
    assert result.text == (
        "tool server 'fault': did not answer 'hang_after' within 1 s; "
        "it will be restarted on the next call"
    )
    assert faults.executions() == ["two"]
    faults.usable()
    assert faults.executions() == ["two"]


def test_garbage_on_stdout_malformed_output_error_results_and_raising_tools(
    faults: FaultHub,
) -> None:
    garbage = faults.hub.call("garbage", {})  # a non-JSON-RPC line before the answer
    assert not garbage.is_error and garbage.text == "garbage written"
    faults.usable()
    failed = faults.hub.call("fail", {})
    assert failed.is_error and failed.text == "the disk is full"
    raised = faults.hub.call("raise_error", {})
    assert raised.is_error and "rejected 'raise_error'" in raised.text
    unknown = faults.hub.call("no_such_tool", {})
    assert unknown.is_error and "unknown tool 'no_such_tool'" in unknown.text
    faults.usable()
    assert faults.executions() == []


def test_result_breaking_its_output_schema_ran_once_and_keeps_the_session(
    faults: FaultHub,
) -> None:
    pid = faults.hub.call("pid", {}).structured["pid"]
    bad = faults.hub.call("bad_output", {})  # ran (one log line), then broke its schema
    assert bad.is_error
    assert bad.text == (
        "tool server 'fault': 'bad_output' ran, but its result does not match the tool's "
        "output schema (at $.n: 'seven' is not of type 'integer'); it returned: n is a word"
    )
    assert faults.executions() == ["bad_output"]  # called once, never resent
    assert faults.hub.call("pid", {}).structured["pid"] == pid  # the same process
    faults.usable()
    assert faults.executions() == ["bad_output"]


@pytest.mark.anyio
async def test_output_schema_mismatch_does_not_restart_the_connection(tmp_path: Path) -> None:
    log = tmp_path / "executions.log"
    config = ServerConfig(
        name="fault",
        command=[sys.executable, str(FAULT_SERVER)],
        env={"FAULT_LOG": str(log)},
        call_timeout=5.0,
        max_output_chars=5,
    )
    async with open_connection(config) as connection:
        bad = await connection.call_tool("bad_output")
        assert bad.is_error and "'bad_output' ran, but" in bad.text
        shown = bad.text.partition("it returned: ")[2]  # the result text, capped
        assert shown.startswith("n is \n[output truncated: ") and len(shown) < 60
        count = await connection.call_tool("count")
        assert count.text.splitlines()[0] == "1"  # one line in the log: called once
        assert connection.starts == 1


def test_plan_executor_on_a_crashing_server_runs_each_side_effect_once(faults: FaultHub) -> None:
    tools = {t.name: t for t in faults.hub.tools}
    plan = '1. crash_after(text="a")\n2. append(text=$1)\n3. append(text="b")\n4. join()'
    run = anyio.run(lambda: execute_plan_text(plan, tools, timeout=5))
    assert run.error is None
    first, second, third = run.records
    assert first.failed and "the server process exited" in first.observation.text
    assert not second.ran and "task 1 (crash_after) failed" in second.observation.text
    # Task 3 ran alongside the crash: in flight on the dying process, it may or may not
    # have been executed, and it is reported as failed then, never resent.
    executions = faults.executions()
    assert executions in (["a"], ["a", "b"], ["b", "a"])
    if third.failed:
        assert "stopped while handling 'append'" in third.observation.text
    else:
        assert "b" in executions
    faults.usable()  # restarted for the next call


def test_provisional_versions_never_start_a_side_effect_tool_twice(faults: FaultHub) -> None:
    tools = {t.name: t for t in faults.hub.tools}
    started: list[int] = []
    versions = [
        PlanTask(1, "hang_after", {"text": "x"}, provisional=True),
        PlanTask(1, "hang_after", {"text": "x"}),
        PlanTask(1, "hang_after", {"text": "changed"}),  # held still: this version runs
        PlanTask(2, "count", {}, provisional=True),
        PlanTask(2, "count", {}),
    ]

    async def stream() -> Any:
        for task in versions:
            await anyio.sleep(0.05)
            yield task

    def on_event(event: TaskEvent) -> None:
        if event.kind == "started" and event.task.tool == "hang_after":
            started.append(event.task.index)

    run = anyio.run(lambda: execute_plan(stream(), tools, timeout=5, on_event=on_event))
    # A side effect waits for the whole plan, then starts once, with its last version,
    # and is not sent again when its server hangs.
    assert started == [1]
    assert faults.executions() == ["changed"]
    assert run.record(1).failed and "did not answer 'hang_after'" in run.record(1).observation.text
    faults.usable()
    assert faults.executions() == ["changed"]


def test_langchain_tool_that_raises_is_an_error_observation() -> None:
    @tool
    def explode(city: str) -> str:
        """Explode."""
        raise ValueError(f"no weather for {city}")

    converted = from_langchain(explode)
    result = anyio.run(lambda: converted.run({"city": "Bern"}))
    assert result.is_error and "no weather for Bern" in result.text


# -- the engine: health and reference answers --------------------------------------------


def assert_healthy(engine: Engine) -> None:
    """No lock held, no KV cells outside sequence 0, and sequence 0 holds exactly the
    tokens recorded for it (the prompt cache can be trusted)."""
    acquired: list[bool] = []

    def probe() -> None:
        ok = engine.lock.acquire(timeout=30)
        acquired.append(ok)
        if ok:
            engine.lock.release()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    assert acquired == [True], "the engine lock is still held"
    assert [s for s in range(1, engine.n_seq_max) if engine.seq_len(s)] == []
    assert engine.seq_len(0) == len(engine.seq_tokens.get(0, []))


def calls_of(result: CallResult) -> list[dict[str, Any]]:
    return [call.to_dict() for call in result.calls]


@pytest.fixture(scope="module")
def caller(engine: Engine) -> ToolCaller:
    return ToolCaller(engine, [WEATHER], max_tokens=48)


@pytest.fixture(scope="module")
def reference(engine: Engine, caller: ToolCaller) -> list[dict[str, Any]]:
    """The normal request's calls on a fresh engine."""
    engine.clear()
    calls = calls_of(caller.call(QUERY, "lossless"))
    assert calls and calls[0]["name"] == "get_weather"
    return calls


def assert_usable(engine: Engine, caller: ToolCaller, reference: list[dict[str, Any]]) -> None:
    assert_healthy(engine)
    assert calls_of(caller.call(QUERY, "lossless")) == reference
    assert_healthy(engine)


def test_output_that_never_ends_stops_at_max_tokens(
    engine: Engine, caller: ToolCaller, reference: list[dict[str, Any]]
) -> None:
    short = ToolCaller(engine, [WEATHER], max_tokens=5)
    for mode in ("constrained", "lossless"):
        result = short.call(QUERY, mode)
        assert result.finish_reason == "length" and result.calls == ()
        assert len(result.tokens) <= 5
        assert any("truncated at max_tokens" in bad.error for bad in result.invalid)
        assert_healthy(engine)
    prompt = caller.prompt_tokens(QUERY)
    done = list(generate_text(engine, prompt, max_tokens=3))[-1].result
    assert done is not None and done.finish_reason == "length" and len(done.tokens) == 3
    assert_usable(engine, caller, reference)


def test_prompt_longer_than_the_context_is_a_context_full_error(
    engine: Engine, caller: ToolCaller, reference: list[dict[str, Any]]
) -> None:
    with pytest.raises(ContextFullError, match="exceeds the context window of 8192"):
        caller.call("weather " * 9000, "lossless")
    assert_healthy(engine)
    # A prompt that fits, but not with room for max_tokens of output.
    room = ToolCaller(engine, [WEATHER], max_tokens=4000)
    with pytest.raises(ContextFullError, match="plus 4000 output tokens"):
        room.call("weather " * 4500, "constrained")
    with pytest.raises(ContextFullError):
        list(generate_text(engine, [engine.bos_token] * 8200, max_tokens=1))
    assert_usable(engine, caller, reference)


def test_invalid_tool_schemas_are_tool_spec_or_constraint_errors(
    engine: Engine, caller: ToolCaller, reference: list[dict[str, Any]]
) -> None:
    with pytest.raises(ToolSpecError, match="parameters must have type 'object'"):
        ToolSpec.from_dict({"name": "t", "parameters": {"type": "string"}})
    with pytest.raises(ToolSpecError, match="not a valid JSON Schema"):
        ToolSpec.from_dict({"name": "t", "parameters": {"properties": {"a": {"type": 5}}}})
    with pytest.raises(ToolSpecError, match="at least one tool"):
        ToolCaller(engine, [])
    with pytest.raises(ToolSpecError, match="duplicate"):
        ToolCaller(engine, [WEATHER, WEATHER])
    odd = ToolSpec.from_dict(
        {"name": "t", "parameters": {"properties": {"a": {"$ref": "#/nowhere"}}}}
    )
    with pytest.raises(ConstraintError, match="points nowhere"):
        ToolCaller(engine, [odd])
    with pytest.raises(ToolSpecError):
        ChatToolweave().bind_tools([{"name": "bad name", "parameters": {}}])
    assert_usable(engine, caller, reference)


def test_a_call_stopped_mid_decoding_releases_the_engine(
    engine: Engine, caller: ToolCaller, reference: list[dict[str, Any]]
) -> None:
    for mode in ("constrained", "fast", "lossless"):
        events = caller.events(QUERY, mode)
        kinds = []
        for event in events:
            kinds.append(event.kind)
            if event.kind == "name" or len(kinds) > 6:
                break
        events.close()  # the consumer gave up mid-call
        assert "done" not in kinds
        assert_healthy(engine)
    assert_usable(engine, caller, reference)


# -- the chat model: streams, cancellation, concurrency -----------------------------------

QUERIES = [
    "What's the weather in Zurich?",
    "Weather in Oslo, please.",
    "Is it cold in Rome?",
    "How warm is it in Lisbon today?",
    "Tell me the weather for Tokyo.",
    "Is it raining in Paris?",
    "Weather report for Berlin in fahrenheit.",
    "What is the temperature in Cairo?",
]


@pytest.fixture(scope="module")
def chat() -> ChatToolweave:
    return ChatToolweave(max_tokens=24, reuse_prompt_cache=False)


@pytest.fixture(scope="module")
def bound(chat: ChatToolweave) -> Any:
    return chat.bind_tools([WEATHER.to_dict()], tool_choice="any")


@pytest.fixture(scope="module")
def serial(bound: Any) -> list[Any]:
    """The calls of each query, one request at a time."""
    return [bound.invoke(query).tool_calls for query in QUERIES]


def same_calls(messages: list[AIMessage], expected: list[Any]) -> None:
    assert [[(c["name"], c["args"]) for c in m.tool_calls] for m in messages] == [
        [(c["name"], c["args"]) for c in calls] for calls in expected
    ]


def test_a_stream_closed_mid_call_leaves_the_chat_model_usable(
    chat: ChatToolweave, bound: Any, serial: list[Any]
) -> None:
    for model in (bound, chat.bind_tools([WEATHER.to_dict()], tool_choice="none")):
        stream = model.stream(QUERIES[0])
        next(stream)
        next(stream)
        stream.close()
        assert_healthy(chat.engine)
    same_calls([bound.invoke(QUERIES[0])], serial[:1])
    assert_healthy(chat.engine)


@pytest.mark.anyio
async def test_cancelled_async_requests_leave_the_chat_model_usable(
    chat: ChatToolweave, bound: Any, serial: list[Any]
) -> None:
    async def consume() -> None:
        async for _ in bound.astream(QUERIES[1]):
            await asyncio.sleep(0.01)

    streaming = asyncio.create_task(consume())
    await asyncio.sleep(0.3)
    streaming.cancel()
    with pytest.raises(asyncio.CancelledError):
        await streaming
    invoking = asyncio.create_task(bound.ainvoke(QUERIES[2]))
    await asyncio.sleep(0.1)
    invoking.cancel()
    with pytest.raises(asyncio.CancelledError):
        await invoking
    # The worker threads finish or stop at their next event and free the engine.
    await asyncio.to_thread(assert_healthy, chat.engine)
    same_calls([await bound.ainvoke(QUERIES[1])], serial[1:2])


def test_eight_concurrent_callers_get_the_serial_answers(bound: Any, serial: list[Any]) -> None:
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(bound.invoke, QUERIES))
    same_calls(threaded, serial)


def test_agent_never_runs_a_side_effect_tool_twice_when_it_crashes(faults: FaultHub) -> None:
    middleware = ProvisionalToolMiddleware()
    model = ChatToolweave(auto_calls="user_turn", max_tokens=48, reuse_prompt_cache=False)
    tools = [to_langchain(faults.hub.tool("crash_after"))]
    agent = create_agent(model, tools, middleware=[middleware])
    out = agent.invoke(
        {"messages": [HumanMessage("Write the line 'buy milk' to the log.")]},
        {"recursion_limit": 12},
    )
    messages = out["messages"]
    asked = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    crashes = [c for c in asked if c["name"] == "crash_after"]
    assert crashes, [m.content for m in messages]
    observations = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(observations) == len(asked)  # one observation per call, none repeated
    errors = [m for m in observations if m.status == "error"]
    assert errors and "the server process exited" in str(errors[0].content)
    # Each crash_after call the model made ran exactly once, none early.
    assert len(faults.executions()) == len(crashes)
    assert middleware.runner is not None
    assert all(run.call.name != "crash_after" for run in middleware.runner.runs)
    faults.usable()
    assert_healthy(model.engine)
