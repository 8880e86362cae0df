"""Events: what a decoder reports while it answers (`CallEvent`), and what an agent run
reports to its observer (`RunEvent`, one frozen dataclass per kind).

The chat-model and tool events are defined here; the plan-out agent's events live in
`toolweave.plan_events` and are re-exported from this module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

from toolweave.plan_events import (
    ArbiterDone,
    ArbiterStart,
    CallDenied,
    CallReused,
    PlanDone,
    PlanLine,
    PlannerStart,
    TaskDone,
    TaskHeld,
    TaskStart,
)
from toolweave.results import CallResult, CallStats
from toolweave.toolspec import ToolCall

__all__ = [
    "ArbiterDone",
    "ArbiterStart",
    "CallDenied",
    "CallEvent",
    "CallEventKind",
    "CallName",
    "CallReused",
    "FinalCall",
    "ModelDone",
    "ModelStart",
    "Note",
    "Observer",
    "PlanDone",
    "PlanLine",
    "PlannerStart",
    "PromptCacheEvent",
    "ProvisionalCallEvent",
    "RunEvent",
    "RunEventKind",
    "TaskDone",
    "TaskHeld",
    "TaskStart",
    "ToolDone",
    "ToolReused",
    "ToolStart",
]

CallEventKind = Literal["tokens", "name", "provisional", "call", "done"]


@dataclass(frozen=True)
class CallEvent:
    """Something that happened while answering, `t_ms` after decoding started.

    `kind` is one of 'tokens' (tokens appended; `decoded` False when prefilled), 'name'
    (the tool is decided), 'provisional' (a read-only call with its required arguments),
    'call' (a final call) and 'done' (the last event, carrying the `result`).
    """

    kind: CallEventKind
    t_ms: float
    tokens: tuple[int, ...] = ()
    decoded: bool = True
    call: ToolCall | None = None
    name: str | None = None
    result: CallResult | None = None


RunEventKind = Literal[
    "note",
    "prompt_cache",
    "model_start",
    "call_name",
    "provisional_call",
    "final_call",
    "model_done",
    "tool_start",
    "tool_done",
    "tool_reused",
    "planner_start",
    "plan_line",
    "task_held",
    "task_start",
    "call_denied",
    "call_reused",
    "task_done",
    "plan_done",
    "arbiter_start",
    "arbiter_done",
]


# ------------------------------------------------------------------ the chat model
@dataclass(frozen=True)
class Note:
    """A free-form phase line (servers started, tools selected, ...)."""

    kind: ClassVar[RunEventKind] = "note"
    text: str

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"text": self.text}


@dataclass(frozen=True)
class PromptCacheEvent:
    """A saved prompt state started the prompt: `reused` of `prompt_tokens` restored from
    `source`, `prefilled` run in `ms`; `saved_at` where a new state was saved, if one was."""

    kind: ClassVar[RunEventKind] = "prompt_cache"
    prompt_tokens: int
    reused: int
    prefilled: int
    source: str
    saved_at: int | None
    ms: float

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "reused": self.reused,
            "prefilled": self.prefilled,
            "source": self.source,
            "saved_at": self.saved_at,
            "ms": self.ms,
        }


@dataclass(frozen=True)
class ModelStart:
    """The chat model started a message, decoding tool calls in `mode`."""

    kind: ClassVar[RunEventKind] = "model_start"
    mode: str

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"mode": self.mode}


@dataclass(frozen=True)
class CallName:
    """The decoder decided which tool it calls, `t_ms` after decoding started."""

    kind: ClassVar[RunEventKind] = "call_name"
    name: str
    t_ms: float

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"name": self.name, "t_ms": self.t_ms}


@dataclass(frozen=True)
class ProvisionalCallEvent:
    """A read-only call with its required arguments decided (optional ones pending)."""

    kind: ClassVar[RunEventKind] = "provisional_call"
    call: ToolCall
    t_ms: float

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {**self.call.to_dict(), "t_ms": self.t_ms}


@dataclass(frozen=True)
class FinalCall:
    """A complete call of the message, `t_ms` after decoding started."""

    kind: ClassVar[RunEventKind] = "final_call"
    call: ToolCall
    t_ms: float

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {**self.call.to_dict(), "t_ms": self.t_ms}


@dataclass(frozen=True)
class ModelDone:
    """The message is complete: its cost, its calls, its text (empty when it calls)."""

    kind: ClassVar[RunEventKind] = "model_done"
    stats: CallStats
    calls: tuple[ToolCall, ...]
    text: str
    finish_reason: str

    @classmethod
    def of(cls, result: CallResult) -> ModelDone:
        """The event of a finished response."""
        text = "" if result.calls else result.text
        return cls(result.stats, tuple(result.calls), text, result.finish_reason)

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {
            "stats": self.stats.to_dict(),
            "calls": [c.to_dict() for c in self.calls],
            "text": self.text,
            "finish_reason": self.finish_reason,
        }


# ------------------------------------------------------------------ tools of an agent
@dataclass(frozen=True)
class ToolStart:
    """A tool started: `early` on the model's (provisional) call, else by the agent."""

    kind: ClassVar[RunEventKind] = "tool_start"
    call: ToolCall
    early: bool

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {**self.call.to_dict(), "early": self.early}


@dataclass(frozen=True)
class ToolDone:
    """A tool finished after `ms` (`error`: it failed)."""

    kind: ClassVar[RunEventKind] = "tool_done"
    name: str
    ms: float
    early: bool
    error: bool

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"name": self.name, "ms": self.ms, "early": self.early, "error": self.error}


@dataclass(frozen=True)
class ToolReused:
    """The agent took the early run's result of `call` instead of running it again."""

    kind: ClassVar[RunEventKind] = "tool_reused"
    call: ToolCall

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return self.call.to_dict()


RunEvent: TypeAlias = (
    Note
    | PromptCacheEvent
    | ModelStart
    | CallName
    | ProvisionalCallEvent
    | FinalCall
    | ModelDone
    | ToolStart
    | ToolDone
    | ToolReused
    | PlannerStart
    | PlanLine
    | TaskHeld
    | CallDenied
    | CallReused
    | TaskStart
    | TaskDone
    | PlanDone
    | ArbiterStart
    | ArbiterDone
)
#: Receives each event of a run as it happens (live displays, traces); it may be called
#: from decoder and tool threads.
Observer = Callable[[RunEvent], None]
