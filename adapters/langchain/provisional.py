"""Start read-only tools while the model is still writing its message.

`ProvisionalToolMiddleware` is LangChain agent middleware. Around each model call it
makes a `ProvisionalRunner` visible to `ChatToolweave` (a context variable), which
starts a read-only tool the moment the decoder emits its provisional call (required
arguments decided, optional ones pending) or its final call, while the message is
still being decoded. When the agent then executes the tool calls of the message, the
middleware hands back the running result for a call equal to the one started, instead
of running the tool again; a call that differs (the model added or changed arguments)
runs normally and the unclaimed early run is dropped.

Safety: only tools classified read-only (annotations first, then name and description,
unsure means not read-only; `toolweave.readonly`) are ever started early, so a tool
with side effects runs exactly once, when the agent runs it. With any other chat model
the middleware does nothing.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse, ToolCallRequest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command

from toolweave.adapters.langchain.tools import from_langchain
from toolweave.events import Observer, ToolDone, ToolReused, ToolStart
from toolweave.readonly import classify_tool
from toolweave.toolspec import ToolCall

__all__ = [
    "ProvisionalRun",
    "ProvisionalRunner",
    "ProvisionalToolMiddleware",
    "ToolExecution",
    "active_runner",
]

_ACTIVE: ContextVar[ProvisionalRunner | None] = ContextVar("toolweave_provisional", default=None)


def active_runner() -> ProvisionalRunner | None:
    """The runner of the agent model call in progress, if a middleware set one."""
    return _ACTIVE.get()


def _defaults(tool: BaseTool) -> dict[str, Any]:
    """The schema defaults of a tool's arguments: a call that leaves an optional argument
    out runs exactly like one that writes its default."""
    props = from_langchain(tool).spec.parameters.get("properties", {})
    return {k: v["default"] for k, v in props.items() if isinstance(v, Mapping) and "default" in v}


@dataclass
class ProvisionalRun:
    """One early execution: when it started and finished (perf_counter seconds)."""

    call: ToolCall
    future: Future[ToolMessage]
    started: float
    finished: float | None = None
    claimed: bool = False


@dataclass
class ProvisionalRunner:
    """Runs read-only LangChain tools early, keyed by the exact call."""

    tools: Mapping[str, BaseTool]
    read_only: frozenset[str]
    timeout: float = 60.0
    observer: Observer | None = None
    runs: list[ProvisionalRun] = field(default_factory=list)
    _defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    _pending: dict[str, list[ProvisionalRun]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="toolweave-early")
    )

    def __post_init__(self) -> None:
        self._defaults = {name: _defaults(self.tools[name]) for name in self.read_only}

    def _key(self, name: str, arguments: Mapping[str, Any]) -> str:
        full = {**self._defaults.get(name, {}), **arguments}
        return name + "\x00" + json.dumps(full, sort_keys=True, ensure_ascii=False, default=str)

    def start(self, call: ToolCall) -> bool:
        """Start `call` if its tool is read-only and the same call is not running yet."""
        tool = self.tools.get(call.name)
        if tool is None or call.name not in self.read_only:
            return False
        key = self._key(call.name, call.arguments)
        with self._lock:
            if self._pending.get(key):
                return False
            run = ProvisionalRun(call, Future(), time.perf_counter())
            self._pending.setdefault(key, []).append(run)
            self.runs.append(run)
        self._pool.submit(self._execute, tool, run)
        return True

    def _execute(self, tool: BaseTool, run: ProvisionalRun) -> None:
        # The tool-call shape makes the tool build its ToolMessage exactly as ToolNode does.
        shaped = {
            "name": run.call.name,
            "args": dict(run.call.arguments),
            "id": f"early_{uuid.uuid4().hex[:12]}",
            "type": "tool_call",
        }
        if self.observer is not None:
            self.observer(ToolStart(run.call, early=True))
        try:
            out = tool.invoke(shaped)
            message = (
                out
                if isinstance(out, ToolMessage)
                else ToolMessage(content=str(out), tool_call_id=shaped["id"], name=run.call.name)
            )
            run.finished = time.perf_counter()
            run.future.set_result(message)
            self._finished(run, message.status == "error")
        except BaseException as exc:  # handed to whoever claims the run
            run.finished = time.perf_counter()
            run.future.set_exception(exc)
            self._finished(run, True)

    def _finished(self, run: ProvisionalRun, error: bool) -> None:
        if self.observer is not None:
            ms = ((run.finished or run.started) - run.started) * 1000
            self.observer(ToolDone(run.call.name, ms, early=True, error=error))

    def claim(self, name: str, arguments: Mapping[str, Any]) -> ProvisionalRun | None:
        """Take the early run of exactly this call, if there is one."""
        with self._lock:
            queue = self._pending.get(self._key(name, arguments))
            if not queue:
                return None
            run = queue.pop(0)
            run.claimed = True
            return run

    def drop_unclaimed(self) -> None:
        """Forget early runs no call asked for (their results are discarded)."""
        with self._lock:
            self._pending.clear()

    def result(self, run: ProvisionalRun, tool_call_id: str) -> ToolMessage:
        """The early run's message, re-addressed to the agent's tool call id."""
        message = run.future.result(timeout=self.timeout)
        return message.model_copy(update={"tool_call_id": tool_call_id})


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


class ProvisionalToolMiddleware(AgentMiddleware):
    """Agent middleware that lets `ChatToolweave` start read-only tools early.

    ``overrides`` maps tool names to a read-only decision that beats the classifier.
    ``runner`` is the current `ProvisionalRunner` (its ``runs`` carry timestamps).
    """

    def __init__(
        self,
        *,
        overrides: Mapping[str, bool] | None = None,
        timeout: float = 60.0,
        observer: Observer | None = None,
    ):
        super().__init__()
        self.overrides = dict(overrides or {})
        self.timeout = timeout
        self.observer = observer
        self.runner: ProvisionalRunner | None = None
        self.message_done: list[float] = []  # when each model message was complete
        self.executions: list[ToolExecution] = []  # every tool call the agent executed

    @property
    def name(self) -> str:
        return "ProvisionalToolMiddleware"

    def _runner_for(self, tools: Sequence[Any]) -> ProvisionalRunner:
        by_name = {t.name: t for t in tools if isinstance(t, BaseTool)}
        if self.runner is not None and dict(self.runner.tools) == by_name:
            self.runner.drop_unclaimed()
            return self.runner
        overrides = {k: v for k, v in self.overrides.items() if k in by_name}
        read_only = frozenset(
            name
            for name, tool in by_name.items()
            if classify_tool(from_langchain(tool).spec, overrides).read_only
        )
        self.runner = ProvisionalRunner(by_name, read_only, self.timeout, self.observer)
        return self.runner

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        token = _ACTIVE.set(self._runner_for(request.tools))
        try:
            return handler(request)
        finally:
            self.message_done.append(time.perf_counter())
            _ACTIVE.reset(token)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        token = _ACTIVE.set(self._runner_for(request.tools))
        try:
            return await handler(request)
        finally:
            self.message_done.append(time.perf_counter())
            _ACTIVE.reset(token)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        run = self.runner.claim(call["name"], call["args"]) if self.runner else None
        if run is None or self.runner is None:
            started = self._tool_start(call)
            out = handler(request)
            self._record(call, started, time.perf_counter(), early=False, out=out)
            return out
        message = self.runner.result(run, call["id"] or "")
        self._record(call, run.started, run.finished or time.perf_counter(), early=True)
        return message

    def _tool_start(self, call: Any) -> float:
        if self.observer is not None:
            self.observer(ToolStart(ToolCall(call["name"], call["args"]), early=False))
        return time.perf_counter()

    def _record(
        self, call: Any, started: float, finished: float, *, early: bool, out: Any = None
    ) -> None:
        if self.observer is not None:
            if early:
                self.observer(ToolReused(ToolCall(call["name"], call["args"])))
            else:
                error = isinstance(out, ToolMessage) and out.status == "error"
                ms = (finished - started) * 1000
                self.observer(ToolDone(call["name"], ms, early=False, error=error))
        done = self.message_done[-1] if self.message_done else None
        self.executions.append(
            ToolExecution(call["name"], dict(call["args"]), started, finished, done, early)
        )

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        runner = self.runner
        run = runner.claim(call["name"], call["args"]) if runner else None
        if run is None or runner is None:
            started = self._tool_start(call)
            out = await handler(request)
            self._record(call, started, time.perf_counter(), early=False, out=out)
            return out
        message = await asyncio.wait_for(asyncio.wrap_future(run.future), runner.timeout)
        self._record(call, run.started, run.finished or time.perf_counter(), early=True)
        return message.model_copy(update={"tool_call_id": call["id"] or ""})
