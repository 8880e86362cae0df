"""Run events of the plan-out agent: the Planner writing a plan, its tasks being held,
denied, reused, started and finished, and the Arbiter's decision (one frozen dataclass
per kind; part of `toolweave.events.RunEvent`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from toolweave.events import RunEventKind

__all__ = [
    "ArbiterDone",
    "ArbiterStart",
    "CallDenied",
    "CallReused",
    "PlanDone",
    "PlanLine",
    "PlannerStart",
    "TaskDone",
    "TaskHeld",
    "TaskStart",
]


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
    """Task `index` repeats a side effect already run in `round` of the same request, or
    (`same_as` set) a read-only call task `same_as` of the same plan ran: it is not run
    again, the earlier `observation` stands for it."""

    kind: ClassVar[RunEventKind] = "call_reused"
    index: int
    tool: str
    round: int
    observation: str
    same_as: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON-ready fields (without `kind`)."""
        return {
            "index": self.index,
            "tool": self.tool,
            "round": self.round,
            "observation": self.observation,
            "same_as": self.same_as,
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
