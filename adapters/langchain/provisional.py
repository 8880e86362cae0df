"""Start read-only tools while the model is still writing its message.

`ProvisionalToolMiddleware` is LangChain agent middleware. Around each model call it
makes a `ProvisionalRunner` visible to `ChatToolweave` (a context variable), which
starts a read-only tool the moment the decoder emits its provisional call (required
arguments decided, optional ones pending) or its final call, while the message is
still being decoded. When the agent then executes the tool calls of the message, the
middleware hands back the running result for a call equal to the one started, instead
of running the tool again; a call that differs (the model added or changed arguments)
runs normally and the unclaimed early run is dropped. An early run that failed, timed
out or returned something other than a plain message is not handed back either: the
agent's call then runs the tool normally, once.

State is kept per agent run (the run's LangGraph run control, thread and subgraph
namespace), never shared between runs: one middleware instance serves ``batch`` and
``abatch`` of many runs, and each run claims only its own early results. At most
`MAX_RUNS` runs are tracked (the least recently active is forgotten), a finished run
is forgotten at once, and the execution records kept for inspection are capped.

Safety: only tools classified read-only (annotations first, then name and description,
unsure means not read-only; `toolweave.readonly`) and free of injected arguments are
ever started early (see `toolweave.adapters.langchain.early`), so a tool with side
effects runs exactly once, when the agent runs it. With any other chat model the
middleware does nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse, ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.runtime import get_runtime
from langgraph.types import Command

from toolweave.adapters.langchain.early import (
    ACTIVE_RUNNER,
    ProvisionalRun,
    ProvisionalRunner,
    active_runner,
    argument_defaults,
    takes_injected_arguments,
)
from toolweave.adapters.langchain.tools import from_langchain
from toolweave.events import Observer, ToolDone, ToolReused, ToolStart
from toolweave.readonly import classify_tools
from toolweave.toolspec import ToolCall

__all__ = [
    "MAX_RECORDS",
    "MAX_RUNS",
    "ProvisionalRun",
    "ProvisionalRunner",
    "ProvisionalToolMiddleware",
    "ToolExecution",
    "active_runner",
]

#: Agent runs whose early results are tracked at once (least recently active dropped).
MAX_RUNS = 256
#: Tool executions and message end times kept for inspection.
MAX_RECORDS = 1000
#: Tool catalogues whose read-only classification is remembered.
_MAX_CATALOGUES = 32


@dataclass(frozen=True)
class ToolExecution:
    """One tool call the agent executed: when the tool started and finished, when the
    model message asking for it was complete (perf_counter seconds), and whether the
    result came from an early run."""

    name: str
    arguments: Mapping[str, Any]
    started: float
    finished: float
    message_done: float | None
    early: bool

    @property
    def lead_ms(self) -> float | None:
        """How long before the end of the model's message the tool started (< 0: after)."""
        return None if self.message_done is None else (self.message_done - self.started) * 1000


@dataclass
class _RunState:
    """What one agent run needs between its model call and its tool calls."""

    control: object | None  # held so that its id, part of the key, is not reused
    runner: ProvisionalRunner | None = None
    message_done: float | None = None


@dataclass(frozen=True)
class _Catalogue:
    tools: tuple[BaseTool, ...]
    by_name: dict[str, BaseTool]
    read_only: frozenset[str]
    defaults: dict[str, dict[str, Any]]


def _run_key(runtime: Any) -> tuple[Hashable, object | None]:
    """The run a model or tool call belongs to, and the object that identifies it.

    LangGraph gives every top-level run its own run control, shared by the run's model
    and tool nodes; the thread id and the namespace above the node tell apart agents
    that share one run (subgraphs run side by side).
    """
    control = getattr(runtime, "control", None)
    if control is None:
        with suppress(Exception):  # outside a graph run: no run control
            control = get_runtime().control
    info = getattr(runtime, "execution_info", None)
    namespace = str(getattr(info, "checkpoint_ns", "") or "")
    thread = getattr(info, "thread_id", None)
    scope = namespace.rpartition("|")[0]  # drop the node's own "model:<task>" part
    return (id(control) if control is not None else 0, thread, scope), control


def _has_tool_calls(response: Any) -> bool:
    """Whether the model's answer asks for tools (the run goes on to its tool node)."""
    messages = getattr(response, "result", None)
    if messages is None:
        messages = [response]
    return any(isinstance(m, AIMessage) and m.tool_calls for m in messages)


class ProvisionalToolMiddleware(AgentMiddleware):
    """Agent middleware that lets `ChatToolweave` start read-only tools early.

    ``overrides`` maps tool names to a read-only decision that beats the classifier;
    ``timeout`` bounds the wait for an early result before the tool runs normally.
    ``runner`` is the runner of the run with the latest model call (for inspection;
    its ``runs`` carry timestamps); ``executions`` and ``message_done`` record the latest
    `MAX_RECORDS` tool executions and model message end times, over all runs.
    """

    def __init__(
        self,
        *,
        overrides: Mapping[str, bool] | None = None,
        timeout: float = 60.0,
        observer: Observer | None = None,
        max_runs: int = MAX_RUNS,
    ):
        super().__init__()
        if timeout <= 0 or max_runs < 1:
            raise ValueError("timeout must be > 0 and max_runs >= 1")
        self.overrides = dict(overrides or {})
        self.timeout = timeout
        self.observer = observer
        self.max_runs = max_runs
        self.message_done: deque[float] = deque(maxlen=MAX_RECORDS)
        self.executions: deque[ToolExecution] = deque(maxlen=MAX_RECORDS)
        self._latest: ProvisionalRunner | None = None
        self._runs: OrderedDict[Hashable, _RunState] = OrderedDict()
        self._catalogues: OrderedDict[tuple[int, ...], _Catalogue] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    @property
    def name(self) -> str:
        return "ProvisionalToolMiddleware"

    @property
    def runner(self) -> ProvisionalRunner | None:
        """The runner of the run that made the latest model call (inspection only)."""
        return self._latest

    # ------------------------------------------------------------ model calls
    def _catalogue(self, tools: Sequence[Any]) -> _Catalogue:
        """The tools' read-only classification, computed once per catalogue."""
        lc = tuple(t for t in tools if isinstance(t, BaseTool))
        ident = tuple(id(t) for t in lc)
        with self._lock:
            cached = self._catalogues.get(ident)
            if cached is not None and all(a is b for a, b in zip(cached.tools, lc, strict=True)):
                self._catalogues.move_to_end(ident)
                return cached
        by_name = {t.name: t for t in lc}
        overrides = {k: v for k, v in self.overrides.items() if k in by_name}
        # Classified together: a preamble the tools share is not any one tool's words.
        decisions = classify_tools([from_langchain(t).spec for t in by_name.values()], overrides)
        read_only = frozenset(
            d.name
            for d, tool in zip(decisions, by_name.values(), strict=True)
            if d.read_only and not takes_injected_arguments(tool)
        )
        defaults = {name: argument_defaults(by_name[name]) for name in read_only}
        catalogue = _Catalogue(lc, by_name, read_only, defaults)
        with self._lock:
            self._catalogues[ident] = catalogue
            while len(self._catalogues) > _MAX_CATALOGUES:
                self._catalogues.popitem(last=False)
        return catalogue

    def _thread_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(4, thread_name_prefix="toolweave-early")
            return self._pool

    def _begin(
        self, request: ModelRequest, loop: asyncio.AbstractEventLoop | None
    ) -> tuple[Hashable, _RunState]:
        """The run's runner, ready for this model call (a new one for a new run or a
        changed tool catalogue)."""
        catalogue = self._catalogue(request.tools)
        key, control = _run_key(request.runtime)
        with self._lock:
            state = self._runs.pop(key, None) or _RunState(control)
            self._runs[key] = state
            while len(self._runs) > self.max_runs:
                _, old = self._runs.popitem(last=False)
                if old.runner is not None:
                    old.runner.drop_unclaimed()
        runner = state.runner
        if runner is not None and runner.tools is catalogue.by_name:
            runner.drop_unclaimed()  # the previous message's calls have run
            runner.loop = loop
        else:
            runner = ProvisionalRunner(
                catalogue.by_name,
                catalogue.read_only,
                self.timeout,
                self.observer,
                loop=loop,
                pool=self._thread_pool(),
                defaults=catalogue.defaults,
            )
            state.runner = runner
        self._latest = runner
        return key, state

    def _end(self, key: Hashable, state: _RunState, response: Any) -> None:
        done = time.perf_counter()
        state.message_done = done
        self.message_done.append(done)
        if response is not None and not _has_tool_calls(response):
            with self._lock:  # the run ends here: nothing left to claim
                if self._runs.get(key) is state:
                    del self._runs[key]
            if state.runner is not None:
                state.runner.drop_unclaimed()

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        key, state = self._begin(request, None)
        token = ACTIVE_RUNNER.set(state.runner)
        response: ModelResponse | None = None
        try:
            response = handler(request)
            return response
        finally:
            ACTIVE_RUNNER.reset(token)
            self._end(key, state, response)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        key, state = self._begin(request, asyncio.get_running_loop())
        token = ACTIVE_RUNNER.set(state.runner)
        response: ModelResponse | None = None
        try:
            response = await handler(request)
            return response
        finally:
            ACTIVE_RUNNER.reset(token)
            self._end(key, state, response)

    # ------------------------------------------------------------ tool calls
    def _claim(
        self, request: ToolCallRequest
    ) -> tuple[_RunState | None, ProvisionalRunner | None, ProvisionalRun | None]:
        key, _ = _run_key(request.runtime)
        with self._lock:
            state = self._runs.get(key)
        runner = state.runner if state is not None else None
        if runner is None:
            return state, None, None
        call = request.tool_call
        return state, runner, runner.claim(call["name"], call["args"])

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        state, runner, run = self._claim(request)
        if runner is not None and run is not None:
            message = runner.result(run, call["id"] or "")
            if message is not None:
                return self._reused(call, run, state, message)
        started = self._tool_start(call)
        out = handler(request)
        self._record(call, started, time.perf_counter(), state, early=False, out=out)
        return out

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        state, runner, run = self._claim(request)
        if runner is not None and run is not None:
            message = await runner.aresult(run, call["id"] or "")
            if message is not None:
                return self._reused(call, run, state, message)
        started = self._tool_start(call)
        out = await handler(request)
        self._record(call, started, time.perf_counter(), state, early=False, out=out)
        return out

    def _reused(
        self, call: Any, run: ProvisionalRun, state: _RunState | None, message: ToolMessage
    ) -> ToolMessage:
        finished = run.finished or time.perf_counter()
        self._record(call, run.started, finished, state, early=True)
        return message

    def _tool_start(self, call: Any) -> float:
        if self.observer is not None:
            self.observer(ToolStart(ToolCall(call["name"], call["args"]), early=False))
        return time.perf_counter()

    def _record(
        self,
        call: Any,
        started: float,
        finished: float,
        state: _RunState | None,
        *,
        early: bool,
        out: Any = None,
    ) -> None:
        if self.observer is not None:
            if early:
                self.observer(ToolReused(ToolCall(call["name"], call["args"])))
            else:
                error = isinstance(out, ToolMessage) and out.status == "error"
                ms = (finished - started) * 1000
                self.observer(ToolDone(call["name"], ms, early=False, error=error))
        done = state.message_done if state is not None else None
        self.executions.append(
            ToolExecution(call["name"], dict(call["args"]), started, finished, done, early)
        )
