"""`ProvisionalToolMiddleware` inside real `create_agent` agents, fake at the LLM boundary.

The fake chat model does at the boundary what `ChatToolweave`'s decoder does: while it
"decodes" (a short sleep) it hands its call to the active `ProvisionalRunner`, then
answers with the same call. Tools count their executions, so every test sees how often
a tool really ran, on which path, and whose early result each run got.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langgraph.prebuilt import InjectedState

from toolweave.adapters.langchain.early import takes_injected_arguments
from toolweave.adapters.langchain.provisional import (
    ProvisionalRunner,
    ProvisionalToolMiddleware,
    active_runner,
)
from toolweave.adapters.mcp.client import MCPHub, demo_server_configs
from toolweave.toolspec import ToolCall

READ_ONLY = {"readOnlyHint": True}


class EarlyStartingFake(BaseChatModel):
    """Asks for the call written in the user's JSON message, starting it early first.

    The user message is ``{"tool": NAME, "args": {...}, "tag": T}``; after a tool result
    the model answers ``done: <result>``. ``started`` records, per tag, the runner the
    model saw and whether it accepted the early start.
    """

    decode_s: float = 0.1
    started: dict[str, Any] = {}  # noqa: RUF012 - a pydantic field, set per instance

    @property
    def _llm_type(self) -> str:
        return "early-starting-fake"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _begin(self, messages: list[BaseMessage]) -> AIMessage | None:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"done: {last.content}")
        request = json.loads(str(last.content))
        runner = active_runner()
        accepted = runner.start(ToolCall(request["tool"], request["args"])) if runner else False
        self.started[request["tag"]] = (runner, accepted)  # (ProvisionalRunner | None, bool)
        return None

    @staticmethod
    def _call(messages: list[BaseMessage]) -> AIMessage:
        request = json.loads(str(messages[-1].content))
        call = {"name": request["tool"], "args": request["args"], "id": f"call_{request['tag']}"}
        return AIMessage(content="", tool_calls=[call])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = self._begin(messages)
        if answer is None:
            time.sleep(self.decode_s)  # the rest of the message is being decoded
            answer = self._call(messages)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = self._begin(messages)
        if answer is None:
            await asyncio.sleep(self.decode_s)
            answer = self._call(messages)
        return ChatResult(generations=[ChatGeneration(message=answer)])


def ask(name: str, args: dict[str, Any], tag: str = "0") -> dict[str, Any]:
    return {"messages": [HumanMessage(json.dumps({"tool": name, "args": args, "tag": tag}))]}


class Counter:
    """Executions of a tool: (thread name, arguments), in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def hit(self, **arguments: Any) -> int:
        with self.lock:
            self.calls.append((threading.current_thread().name, arguments))
            return len(self.calls)


def coroutine_only(counter: Counter, *, delay: float = 0.0) -> BaseTool:
    """A read-only tool with only a coroutine, the way MCP adapters build their tools."""

    async def weather(city: str) -> str:
        n = counter.hit(city=city)
        await asyncio.sleep(delay)
        return f"reading {n}: sunny in {city}"

    return StructuredTool.from_function(
        coroutine=weather, name="weather", description="Weather in a city.", metadata=READ_ONLY
    )


def observations(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def test_coroutine_only_tool_starts_early_on_the_async_path() -> None:
    counter = Counter()
    middleware = ProvisionalToolMiddleware()
    model = EarlyStartingFake(started={})
    agent = create_agent(model, [coroutine_only(counter)], middleware=[middleware])

    state = asyncio.run(agent.ainvoke(ask("weather", {"city": "Oslo"})))

    (message,) = observations(state)
    assert (message.content, message.tool_call_id) == ("reading 1: sunny in Oslo", "call_0")
    assert len(counter.calls) == 1  # early, with ainvoke, and reused
    runner, accepted = model.started["0"]
    assert accepted and runner is not None
    (run,) = runner.runs
    assert run.claimed and run.fallback is None
    (execution,) = middleware.executions
    assert execution.early and execution.lead_ms is not None and execution.lead_ms > 0


def test_coroutine_only_tool_is_not_started_early_on_the_sync_path() -> None:
    counter = Counter()
    runner = ProvisionalRunner({"weather": coroutine_only(counter)}, frozenset({"weather"}))
    assert not runner.start(ToolCall("weather", {"city": "Oslo"}))
    assert runner.runs == [] and counter.calls == []


def flaky(
    counter: Counter,
    *,
    fail_first: bool = False,
    slow_first: float = 0.0,
    handle_errors: bool = False,
) -> BaseTool:
    """A read-only sync tool whose first execution fails or is slow; with
    ``handle_errors`` a failure comes back as an error message instead of raising."""

    def lookup(key: str) -> str:
        n = counter.hit(key=key)
        if n == 1 and fail_first:
            raise ToolException("the first lookup fails")
        if n == 1:
            time.sleep(slow_first)
        return f"value of {key} (execution {n})"

    return StructuredTool.from_function(
        lookup,
        name="lookup",
        description="Look a key up.",
        metadata=READ_ONLY,
        handle_tool_error=handle_errors,
    )


@pytest.mark.parametrize("handle_errors", [False, True], ids=["raises", "error-message"])
@pytest.mark.parametrize("path", ["sync", "async"])
def test_failed_early_run_falls_back_to_one_normal_call(path: str, handle_errors: bool) -> None:
    counter = Counter()
    middleware = ProvisionalToolMiddleware()
    model = EarlyStartingFake(started={})
    lookup = flaky(counter, fail_first=True, handle_errors=handle_errors)
    agent = create_agent(model, [lookup], middleware=[middleware])
    request = ask("lookup", {"key": "k"})

    state = agent.invoke(request) if path == "sync" else asyncio.run(agent.ainvoke(request))

    (message,) = observations(state)
    assert message.status == "success" and message.content == "value of k (execution 2)"
    assert len(counter.calls) == 2  # the failed early run, then the agent's own call
    runner, accepted = model.started["0"]
    assert accepted and runner is not None
    expected = (
        "returned an error: the first lookup fails"
        if handle_errors
        else "ToolException: the first lookup fails"
    )
    assert runner.runs[0].fallback == expected
    assert [e.early for e in middleware.executions] == [False]


@pytest.mark.parametrize("path", ["sync", "async"])
def test_early_run_past_the_timeout_falls_back_to_a_normal_call(path: str) -> None:
    counter = Counter()
    middleware = ProvisionalToolMiddleware(timeout=0.2)
    model = EarlyStartingFake(started={}, decode_s=0.0)
    agent = create_agent(model, [flaky(counter, slow_first=1.0)], middleware=[middleware])
    request = ask("lookup", {"key": "k"})

    t0 = time.perf_counter()
    state = agent.invoke(request) if path == "sync" else asyncio.run(agent.ainvoke(request))
    elapsed = time.perf_counter() - t0

    (message,) = observations(state)
    assert message.content == "value of k (execution 2)"
    assert elapsed < 0.9  # did not wait for the slow early run
    runner, _ = model.started["0"]
    assert runner is not None and runner.runs[0].fallback == "did not finish within 0.2 s"


def test_side_effect_and_injected_state_tools_never_start_early() -> None:
    sent = Counter()

    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent {sent.hit(to=to)}"

    @tool
    def my_notes(query: str, state: Annotated[dict, InjectedState]) -> str:
        """Search the user's notes (read-only)."""
        return f"{sent.hit(query=query)}: {len(state['messages'])} messages"

    notes = my_notes.model_copy(update={"metadata": READ_ONLY})
    email = StructuredTool.from_function(send_email, metadata={"readOnlyHint": False})
    assert takes_injected_arguments(notes) and not takes_injected_arguments(email)
    for name, args in (("send_email", {"to": "bob"}), ("my_notes", {"query": "tea"})):
        model = EarlyStartingFake(started={})
        agent = create_agent(model, [email, notes], middleware=[ProvisionalToolMiddleware()])
        state = agent.invoke(ask(name, args))
        assert observations(state)[0].status == "success"
        runner, accepted = model.started["0"]
        assert runner is not None and not accepted and runner.runs == []
    assert [a for _, a in sent.calls] == [{"to": "bob"}, {"query": "tea"}]  # once each


def test_tools_sharing_a_preamble_are_classified_on_their_own_words() -> None:
    ran = Counter()
    preamble = (
        "This tool belongs to the file system, which allows users to create, read and "
        "write files. Tool description: "
    )

    def ls(path: str) -> str:
        return f"listed {ran.hit(path=path)}"

    def rm(path: str) -> str:
        return f"removed {ran.hit(path=path)}"

    tools = [
        StructuredTool.from_function(ls, description=preamble + "List a directory."),
        StructuredTool.from_function(rm, description=preamble + "Remove a file."),
    ]
    for name, early in (("ls", True), ("rm", False)):
        model = EarlyStartingFake(started={})
        agent = create_agent(model, tools, middleware=[ProvisionalToolMiddleware()])
        state = agent.invoke(ask(name, {"path": "docs"}))
        assert observations(state)[0].status == "success"
        runner, accepted = model.started["0"]
        assert runner is not None and accepted is early, name
    assert [a for _, a in ran.calls] == [{"path": "docs"}] * 2  # once each


def test_abatch_runs_sharing_a_middleware_get_only_their_own_early_results() -> None:
    counter = Counter()
    middleware = ProvisionalToolMiddleware()
    model = EarlyStartingFake(started={})
    agent = create_agent(model, [coroutine_only(counter, delay=0.05)], middleware=[middleware])
    tags = [str(i) for i in range(6)]
    # The same call in every run: only the run that started it may take its result.
    states = asyncio.run(agent.abatch([ask("weather", {"city": "Oslo"}, t) for t in tags]))

    assert len(counter.calls) == len(tags)  # one early run per run, none run again
    for tag, state in zip(tags, states, strict=True):
        (message,) = observations(state)
        runner, accepted = model.started[tag]
        assert accepted and runner is not None
        (run,) = runner.runs
        assert run.claimed and run.fallback is None
        assert message.tool_call_id == f"call_{tag}"
        assert message.content == run.future.result().content
    assert len({m.content for s in states for m in observations(s)}) == len(tags)
    assert all(e.early for e in middleware.executions)
    assert middleware._runs == {}  # every run finished: no state left behind


def test_sync_batch_runs_sharing_a_middleware_get_only_their_own_early_results() -> None:
    counter = Counter()
    middleware = ProvisionalToolMiddleware()
    model = EarlyStartingFake(started={})
    agent = create_agent(model, [flaky(counter)], middleware=[middleware])
    tags = [str(i) for i in range(4)]
    states = agent.batch([ask("lookup", {"key": "k"}, t) for t in tags])

    assert len(counter.calls) == len(tags)
    for tag, state in zip(tags, states, strict=True):
        (message,) = observations(state)
        runner, _ = model.started[tag]
        assert runner is not None and runner.runs[0].claimed
        assert message.content == runner.runs[0].future.result().content


def test_run_state_is_bounded() -> None:
    from langgraph.errors import GraphRecursionError

    counter = Counter()
    middleware = ProvisionalToolMiddleware(max_runs=2)
    model = EarlyStartingFake(started={}, decode_s=0.0)
    agent = create_agent(model, [flaky(counter)], middleware=[middleware])
    # Runs stopped after their model call, before their tools: their state stays until
    # evicted, and at most max_runs of it is kept.
    for tag in "abc":
        with pytest.raises(GraphRecursionError):
            agent.invoke(ask("lookup", {"key": tag}, tag), {"recursion_limit": 1})
    assert len(middleware._runs) == 2
    evicted, _ = model.started["a"]
    assert evicted is not None and evicted.claim("lookup", {"key": "a"}) is None  # dropped
    with pytest.raises(ValueError, match="max_runs"):
        ProvisionalToolMiddleware(max_runs=0)


# --- a real MCP server behind a coroutine-only LangChain tool ----------------------------


@pytest.fixture(scope="module")
def weather_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MCPHub]:
    state = tmp_path_factory.mktemp("demo")
    with MCPHub(demo_server_configs(state, names=["weather"])) as hub:
        yield hub


def mcp_style(hub: MCPHub, name: str, runs: list[dict[str, Any]]) -> BaseTool:
    """The tool as MCP adapters build it: a coroutine, the server's schema and hints."""
    source = hub.tool(name)

    async def call(**arguments: Any) -> str:
        runs.append(arguments)
        result = await source.run(arguments)
        return result.observation()

    return StructuredTool(
        name=name,
        description=source.spec.description,
        args_schema=dict(source.spec.parameters),
        coroutine=call,
        metadata=dict(source.spec.annotations),
    )


def test_mcp_tool_with_only_a_coroutine_starts_early_in_an_async_agent(
    weather_hub: MCPHub,
) -> None:
    assert weather_hub.tool("current_weather").read_only
    args = {"city": "Oslo"}
    runs: list[dict[str, Any]] = []
    tools = [mcp_style(weather_hub, "current_weather", runs)]
    model = EarlyStartingFake(started={})
    agent = create_agent(model, tools, middleware=[ProvisionalToolMiddleware()])

    state = asyncio.run(agent.ainvoke(ask("current_weather", args)))

    (message,) = observations(state)
    assert runs == [args]  # once, early
    runner, accepted = model.started["0"]
    assert accepted and runner is not None and runner.runs[0].claimed
    assert message.content == runner.runs[0].future.result().content
