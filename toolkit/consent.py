"""Consent for side effects: who decides whether a call of a tool that is not read-only runs.

A `ConsentPolicy` answers each `ConsentRequest` (the tool, the arguments it would get,
the plan task) with a `ConsentDecision`: allowed, or denied with the reason the model
reads as the call's observation. Read-only tools never ask (`Tool.read_only`); every
other tool does, including tools whose read-only status is unknown.

    ConsentPolicy.allow_all()                  # every side effect runs
    ConsentPolicy.deny_all()                   # none runs (the plan-out agent's default)
    ConsentPolicy.allow_tools(["create_note"]) # these run, the rest are denied
    ConsentPolicy.ask(callback, allow=[...])   # the listed ones run, the callback decides the rest

A callback takes the `ConsentRequest` and returns True (run it) or False, directly or
as an awaitable; a plain function runs on a worker thread so it may block (a terminal
prompt). An answer must come within ``timeout`` seconds, else the call is denied.

The plan executor applies a policy itself; `with_consent` puts one in front of a
single tool for agents that run tools some other way (LangChain's tool node).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel

from toolweave.tools import Tool, ToolResult

__all__ = [
    "ASK_TIMEOUT",
    "DENIED_BY_POLICY",
    "DENIED_BY_USER",
    "ConsentCallback",
    "ConsentDecision",
    "ConsentPolicy",
    "ConsentRequest",
    "with_consent",
]

#: The observation of a call the user refused.
DENIED_BY_USER = "not run: the user denied this call"
#: The observation of a call no rule allows.
DENIED_BY_POLICY = "not run: side effects of this tool are not allowed here"

#: Longest a consent question may wait for its answer, in seconds (the default).
ASK_TIMEOUT = 300.0


@dataclass(frozen=True)
class ConsentRequest:
    """A call that needs consent: ``tool`` with ``arguments`` (references resolved);
    ``task`` is its plan task number, None outside a plan."""

    tool: str
    arguments: Mapping[str, Any]
    task: int | None = None
    description: str = ""

    def call_text(self) -> str:
        """``tool({"key": value, ...})`` on one line, JSON values (for a prompt)."""
        text = json.dumps(dict(self.arguments), ensure_ascii=False, default=str)
        return f"{self.tool}({text})"


@dataclass(frozen=True)
class ConsentDecision:
    """Allowed or not; ``by`` says who decided; ``reason`` is the observation of a denial."""

    allowed: bool
    by: Literal["policy", "user"]
    reason: str = ""


#: Decides one request: True runs the call. May block (run on a thread) or be async.
ConsentCallback = Callable[[ConsentRequest], bool | Awaitable[bool]]


class ConsentPolicy:
    """Decides every call of a tool that is not read-only (see the module docs)."""

    def __init__(
        self,
        *,
        allow: Iterable[str] = (),
        allow_everything: bool = False,
        ask: ConsentCallback | None = None,
        denial: str = DENIED_BY_POLICY,
        timeout: float = ASK_TIMEOUT,
    ) -> None:
        if timeout <= 0 or timeout != timeout:
            raise ValueError(f"the consent timeout must be a positive number, got {timeout!r}")
        self.allowed_tools = frozenset(allow)
        self.allow_everything = allow_everything
        self.callback = ask
        self.denial = denial
        self.timeout = timeout

    @classmethod
    def allow_all(cls) -> ConsentPolicy:
        """Every side effect runs."""
        return cls(allow_everything=True)

    @classmethod
    def deny_all(cls, reason: str = DENIED_BY_POLICY) -> ConsentPolicy:
        """No side effect runs; ``reason`` is what the model reads instead."""
        return cls(denial=reason)

    @classmethod
    def allow_tools(cls, names: Iterable[str], reason: str = DENIED_BY_POLICY) -> ConsentPolicy:
        """Side effects of the named tools run; others are denied with ``reason``."""
        return cls(allow=names, denial=reason)

    @classmethod
    def ask(
        cls,
        callback: ConsentCallback,
        *,
        allow: Iterable[str] = (),
        timeout: float = ASK_TIMEOUT,
    ) -> ConsentPolicy:
        """The named tools run; ``callback`` decides every other call."""
        return cls(allow=allow, ask=callback, timeout=timeout)

    async def decide(self, request: ConsentRequest) -> ConsentDecision:
        """The decision on ``request``; a callback that raises or times out denies."""
        if self.allow_everything or request.tool in self.allowed_tools:
            return ConsentDecision(True, "policy")
        if self.callback is None:
            return ConsentDecision(False, "policy", self.denial)
        answer: bool | None = None
        with anyio.move_on_after(self.timeout):
            try:
                answer = await _call(self.callback, request)
            except Exception as exc:  # a broken callback denies; it never runs the tool
                reason = f"not run: the consent question failed ({type(exc).__name__}: {exc})"
                return ConsentDecision(False, "policy", reason)
        if answer is None:
            reason = f"not run: no answer to the consent question within {self.timeout:g} s"
            return ConsentDecision(False, "policy", reason)
        if answer:
            return ConsentDecision(True, "user")
        return ConsentDecision(False, "user", DENIED_BY_USER)


async def _call(callback: ConsentCallback, request: ConsentRequest) -> bool:
    if inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
        getattr(callback, "__call__", None)  # noqa: B004  (an object with async __call__)
    ):
        result: Any = callback(request)
    else:  # may block (a terminal prompt): keep the event loop and the running tools going
        result = await _on_daemon_thread(callback, request)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, bool):
        raise TypeError(f"the callback returned {type(result).__name__}, not True or False")
    return result


async def _on_daemon_thread(callback: ConsentCallback, request: ConsentRequest) -> Any:
    """``callback(request)`` on a daemon thread: a question nobody answers (cancelled by
    the timeout) cannot keep the process alive."""
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    outcome: list[tuple[bool, Any]] = []

    def work() -> None:
        try:
            outcome.append((True, callback(request)))
        except Exception as exc:  # handed to the waiting side
            outcome.append((False, exc))
        # RuntimeError: the event loop is gone, nobody waits for the answer any more.
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=work, daemon=True, name="toolweave-consent").start()
    await done.wait()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def with_consent(
    tool: Tool,
    policy: ConsentPolicy,
    on_denied: Callable[[ConsentRequest, ConsentDecision], None] | None = None,
) -> Tool:
    """``tool`` whose calls ``policy`` decides first; a read-only tool comes back as is.

    A denied call returns an error `ToolResult` holding the reason (the model reads
    it) and is reported to ``on_denied``. The guarded tool keeps no ``origin``, so an
    adapter converts the guarded tool rather than handing back the original object.
    """
    if tool.read_only:
        return tool
    inner = tool.run

    async def run(arguments: Mapping[str, Any]) -> ToolResult:
        request = ConsentRequest(tool.name, dict(arguments), None, tool.spec.description)
        decision = await policy.decide(request)
        if not decision.allowed:
            if on_denied is not None:
                on_denied(request, decision)
            return ToolResult.error(decision.reason)
        return await inner(arguments)

    return Tool(tool.spec, run, tool.source)
