"""Early runs of read-only LangChain tools, keyed by the exact call.

A `ProvisionalRunner` belongs to one agent run (one message at a time). The decoder hands
it each provisional and final call as soon as it is decided; the runner starts the call
if its tool is read-only and may run outside the agent's tool node, and keeps the
running result until the agent's own call of the same tool with the same arguments
claims it. An early run that fails (raises or returns an error message), times out or
returns something other than a plain `ToolMessage` is never handed over: the claiming
call runs the tool normally instead (a read-only tool may run twice then, never a tool
with side effects: those never start early).

How a tool is run early: on the async path (the runner has an event loop) a tool with
a coroutine runs with ``ainvoke`` on that loop, other tools with ``invoke`` on a worker
thread; on the sync path only tools with a sync function start early (a coroutine-only
tool, as the MCP adapters build them, then runs when the agent runs it). Tools whose
arguments are injected by the tool node (``InjectedState``, ``InjectedStore``,
``InjectedToolCallId``, ``ToolRuntime``, ...) never start early: their values exist
only inside the agent's own call.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools import Tool as SimpleTool

from toolweave.adapters.langchain.tools import from_langchain
from toolweave.events import Observer, ToolDone, ToolStart
from toolweave.toolspec import ToolCall

__all__ = [
    "ACTIVE_RUNNER",
    "MAX_EARLY_RUNS",
    "MAX_KEPT_RUNS",
    "ProvisionalRun",
    "ProvisionalRunner",
    "active_runner",
    "argument_defaults",
    "takes_injected_arguments",
]

#: Early runs one model message may start; later calls run when the agent runs them.
MAX_EARLY_RUNS = 16
#: Early runs a runner keeps in ``runs`` for inspection (the oldest are dropped).
MAX_KEPT_RUNS = 256


class _NotReusable(Exception):
    """The early run returned something the agent's call cannot stand in for."""


def argument_defaults(tool: BaseTool) -> dict[str, Any]:
    """The schema defaults of a tool's arguments: a call that leaves an optional argument
    out runs exactly like one that writes its default."""
    props = from_langchain(tool).spec.parameters.get("properties", {})
    return {k: v["default"] for k, v in props.items() if isinstance(v, Mapping) and "default" in v}


def takes_injected_arguments(tool: BaseTool) -> bool:
    """True when the tool node fills some of the tool's arguments (state, store, runtime,
    call id, any `InjectedToolArg`); True as well when that cannot be determined."""
    try:
        # A JSON-schema dict declares no injected types; a pydantic schema may.
        schema = tool.args_schema
        model = None if isinstance(schema, dict) else tool.get_input_schema()
        fields = set(getattr(model, "model_fields", {}))
        injected = set(getattr(tool, "_injected_args_keys", frozenset()))
        return bool(injected) or bool(fields - set(tool.args)) or "runtime" in fields
    except Exception:  # an unusual tool class: unsure means not early
        return True


def has_sync_run(tool: BaseTool) -> bool:
    """Whether ``invoke`` can run the tool (coroutine-only tools cannot)."""
    if isinstance(tool, StructuredTool | SimpleTool):
        return tool.func is not None
    return True


def has_async_run(tool: BaseTool) -> bool:
    """Whether the tool has a coroutine of its own (else ``ainvoke`` runs it in a thread)."""
    if isinstance(tool, StructuredTool | SimpleTool):
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


@dataclass
class ProvisionalRun:
    """One early execution: when it started and finished (perf_counter seconds).

    ``claimed``: an agent call took it; ``fallback``: why that call ran the tool
    normally instead of using this result (None when the result was used or unclaimed).
    """

    call: ToolCall
    future: Future[ToolMessage]
    started: float
    finished: float | None = None
    claimed: bool = False
    fallback: str | None = None
    handle: Future[None] | None = field(default=None, repr=False)


@dataclass
class ProvisionalRunner:
    """Runs read-only LangChain tools early, keyed by the exact call (see the module doc).

    ``loop``: the agent's event loop on the async path (None on the sync path);
    ``pool``: the threads that run sync tools (a small one of its own when not given);
    ``defaults``: each read-only tool's `argument_defaults` (computed when not given).
    """

    tools: Mapping[str, BaseTool]
    read_only: frozenset[str]
    timeout: float = 60.0
    observer: Observer | None = None
    loop: asyncio.AbstractEventLoop | None = None
    pool: Executor | None = None
    defaults: Mapping[str, Mapping[str, Any]] | None = None
    runs: list[ProvisionalRun] = field(default_factory=list)
    _defaults: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    _pending: dict[str, list[ProvisionalRun]] = field(default_factory=dict)
    _started: int = 0  # early runs started since the last drop_unclaimed
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        given = self.defaults or {}
        self._defaults = {
            name: given[name] if name in given else argument_defaults(self.tools[name])
            for name in self.read_only
        }
        if self.pool is None:
            self.pool = ThreadPoolExecutor(4, thread_name_prefix="toolweave-early")

    def _key(self, name: str, arguments: Mapping[str, Any]) -> str:
        full = {**self._defaults.get(name, {}), **arguments}
        return name + "\x00" + json.dumps(full, sort_keys=True, ensure_ascii=False, default=str)

    def _native_async(self, tool: BaseTool) -> bool:
        return self.loop is not None and has_async_run(tool)

    def start(self, call: ToolCall) -> bool:
        """Start `call` if its tool is read-only, can run here and the same call is not
        running yet; False when it was not started."""
        tool = self.tools.get(call.name)
        if tool is None or call.name not in self.read_only:
            return False
        native = self._native_async(tool)
        if not native and not has_sync_run(tool):
            return False  # coroutine-only tool on the sync path
        key = self._key(call.name, call.arguments)
        with self._lock:
            if self._pending.get(key) or self._started >= MAX_EARLY_RUNS:
                return False
            future: Future[ToolMessage] = Future()
            future.set_running_or_notify_cancel()  # only the run itself settles it
            run = ProvisionalRun(call, future, time.perf_counter())
            self._pending.setdefault(key, []).append(run)
            self._started += 1
            self.runs.append(run)
            del self.runs[:-MAX_KEPT_RUNS]
        try:
            if native and self.loop is not None:
                run.handle = asyncio.run_coroutine_threadsafe(self._arun(tool, run), self.loop)
            elif self.pool is not None:
                self.pool.submit(self._run, tool, run)
        except RuntimeError as exc:  # the loop or the pool is closed
            self._settle(run, None, exc)
        return True

    @staticmethod
    def _shaped(run: ProvisionalRun) -> dict[str, Any]:
        # The tool-call shape makes the tool build its ToolMessage exactly as ToolNode does.
        return {
            "name": run.call.name,
            "args": dict(run.call.arguments),
            "id": f"early_{uuid.uuid4().hex[:12]}",
            "type": "tool_call",
        }

    def _run(self, tool: BaseTool, run: ProvisionalRun) -> None:
        if self.observer is not None:
            self.observer(ToolStart(run.call, early=True))
        try:
            out = tool.invoke(self._shaped(run))
        except BaseException as exc:  # the claiming call runs the tool normally
            self._settle(run, None, exc)
        else:
            self._settle(run, out, None)

    async def _arun(self, tool: BaseTool, run: ProvisionalRun) -> None:
        if self.observer is not None:
            self.observer(ToolStart(run.call, early=True))
        try:
            out = await tool.ainvoke(self._shaped(run))
        except BaseException as exc:  # cancellation included: never left unsettled
            self._settle(run, None, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            self._settle(run, out, None)

    def _settle(self, run: ProvisionalRun, out: Any, exc: BaseException | None) -> None:
        run.finished = time.perf_counter()
        if exc is None and not isinstance(out, ToolMessage):
            exc = _NotReusable(f"returned {type(out).__name__}, not a ToolMessage")
        elif exc is None and isinstance(out, ToolMessage) and out.status == "error":
            # Maybe passing (a restarted server, a timeout): the agent's own call decides.
            exc = _NotReusable(f"returned an error: {' '.join(str(out.content).split())[:200]}")
        if exc is None and isinstance(out, ToolMessage):
            run.future.set_result(out)
        else:
            run.future.set_exception(exc if exc is not None else _NotReusable("no result"))
        if self.observer is not None:
            error = exc is not None or (isinstance(out, ToolMessage) and out.status == "error")
            ms = (run.finished - run.started) * 1000
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
        """Forget early runs no call asked for (their results are discarded); the next
        model message may start `MAX_EARLY_RUNS` again."""
        with self._lock:
            self._pending.clear()
            self._started = 0

    def result(self, run: ProvisionalRun, tool_call_id: str) -> ToolMessage | None:
        """The early run's message, re-addressed to the agent's tool call id; None when
        the run failed or did not finish within ``timeout`` (run the tool normally)."""
        try:
            message = run.future.result(timeout=self.timeout)
        except (FutureTimeout, CancelledError):
            self._fall_back(run, f"did not finish within {self.timeout:g} s")
            return None
        except BaseException as exc:
            self._fall_back(run, _describe(exc))
            return None
        return message.model_copy(update={"tool_call_id": tool_call_id})

    async def aresult(self, run: ProvisionalRun, tool_call_id: str) -> ToolMessage | None:
        """`result` for async callers: waits without blocking the event loop."""
        waiting = asyncio.wrap_future(run.future)
        try:
            # asyncio.wait, not wait_for: a timeout must not try to cancel the shared future.
            done, _ = await asyncio.wait({waiting}, timeout=self.timeout)
        finally:
            # Settle the asyncio copy here: one left with an unread exception is logged,
            # with its traceback, when it is garbage-collected.
            if not waiting.done():
                waiting.cancel()  # the copy only: the run itself cannot be cancelled
            elif not waiting.cancelled():
                waiting.exception()
        if not done:
            self._fall_back(run, f"did not finish within {self.timeout:g} s")
            return None
        return self.result(run, tool_call_id)

    def _fall_back(self, run: ProvisionalRun, reason: str) -> None:
        run.fallback = reason
        if run.handle is not None:
            run.handle.cancel()  # an abandoned coroutine stops; a thread runs to its end


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    if isinstance(exc, _NotReusable):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: The runner of the agent model call in progress, set by `ProvisionalToolMiddleware`
#: around each model call; here, apart from the middleware, so the chat model reads it
#: without importing LangChain's agents (a third of a second).
ACTIVE_RUNNER: ContextVar[ProvisionalRunner | None] = ContextVar(
    "toolweave_provisional", default=None
)


def active_runner() -> ProvisionalRunner | None:
    """The runner of the agent model call in progress, if a middleware set one."""
    return ACTIVE_RUNNER.get()
