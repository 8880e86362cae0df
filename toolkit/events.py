"""Events: what a decoder reports while it answers (`CallEvent`), and what an agent run
reports to its observer (`RunEvent`, one frozen dataclass per kind)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

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


# ------------------------------------------------------------------ the plan-out agent
@dataclass(frozen=True)
class PlannerStart:
    """The Planner started writing the plan of `round` (from 1)."""

    kind: ClassVar[RunEventKind] = "planner_start"
    round: int

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"round": self.round}


@dataclass(frozen=True)
class PlanLine:
    """Plan line `index` (a call of `tool`) is complete and may run."""

    kind: ClassVar[RunEventKind] = "plan_line"
    index: int
    tool: str

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"index": self.index, "tool": self.tool}


@dataclass(frozen=True)
class TaskHeld:
    """Task `index` calls `tool`, which is not read-only: it waits until the whole plan
    has been read and checked (a plan that fails the check runs none of them)."""

    kind: ClassVar[RunEventKind] = "task_held"
    index: int
    tool: str

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"index": self.index, "tool": self.tool}


@dataclass(frozen=True)
class CallDenied:
    """A call of `tool` (not read-only) with `arguments` was not run: `reason` is what
    the model reads instead; `by` is "user" or "policy"; `index` its plan task, if any."""

    kind: ClassVar[RunEventKind] = "call_denied"
    tool: str
    arguments: Mapping[str, Any]
    reason: str
    by: str = "policy"
    index: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "reason": self.reason,
            "by": self.by,
            "index": self.index,
        }


@dataclass(frozen=True)
class CallReused:
    """Task `index` repeats a side effect already run in `round` of the same request: it
    is not run again, the earlier `observation` stands for it."""

    kind: ClassVar[RunEventKind] = "call_reused"
    index: int
    tool: str
    round: int
    observation: str

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {
            "index": self.index,
            "tool": self.tool,
            "round": self.round,
            "observation": self.observation,
        }


@dataclass(frozen=True)
class TaskStart:
    """Task `index` (a call of `tool`) started."""

    kind: ClassVar[RunEventKind] = "task_start"
    index: int
    tool: str

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"index": self.index, "tool": self.tool}


@dataclass(frozen=True)
class TaskDone:
    """Task `index` finished after `ms` (`error`: it failed) with its `observation`."""

    kind: ClassVar[RunEventKind] = "task_done"
    index: int
    tool: str
    error: bool
    ms: float
    observation: str

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {
            "index": self.index,
            "tool": self.tool,
            "error": self.error,
            "ms": self.ms,
            "observation": self.observation,
        }


@dataclass(frozen=True)
class PlanDone:
    """The Planner wrote `plan` in `planner_s` seconds; `ok`: every task succeeded."""

    kind: ClassVar[RunEventKind] = "plan_done"
    plan: str
    ok: bool
    planner_s: float

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {"plan": self.plan, "ok": self.ok, "planner_s": self.planner_s}


@dataclass(frozen=True)
class ArbiterStart:
    """The Arbiter started reading the observations."""

    kind: ClassVar[RunEventKind] = "arbiter_start"

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`): none."""
        return {}


@dataclass(frozen=True)
class ArbiterDone:
    """The Arbiter's decision: `finish` with `answer` (`truncated`: cut before its end),
    or replan; and its `thought`. A `problem` means the reply was unreadable and the
    request stops there."""

    kind: ClassVar[RunEventKind] = "arbiter_done"
    finish: bool
    answer: str
    thought: str
    truncated: bool = False
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {
            "finish": self.finish,
            "answer": self.answer,
            "thought": self.thought,
            "truncated": self.truncated,
            "problem": self.problem,
        }


RunEvent = (
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
