"""What running a plan produces: each task's `TaskRecord`, the live `TaskEvent` updates
sent while it runs, and the `PlanRun` that collects the records with a plan-level error
and notes (and renders them as the Arbiter's scratchpad).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from toolweave.errors import CallFormatError
from toolweave.plan.format import PlanError, PlanTask, format_call
from toolweave.tools import ToolResult

__all__ = ["PlanRun", "TaskEvent", "TaskEventKind", "TaskRecord"]


@dataclass(frozen=True)
class TaskRecord:
    """One task's call and observation.

    ``arguments`` are the arguments after substitution (the planned ones when the
    task never got that far); ``started``/``finished`` are `time.perf_counter`
    values; ``ran`` is False when the tool was not called (equal times then).
    ``denied`` marks a call the consent policy refused; ``reused_round`` the round
    of the same request whose identical call's observation this one reuses;
    ``shared_with`` the task of the same plan whose identical read-only call's
    observation this one takes.
    """

    task: PlanTask
    arguments: Mapping[str, Any]
    observation: ToolResult
    started: float
    finished: float
    ran: bool = True
    denied: bool = False
    reused_round: int | None = None
    shared_with: int | None = None

    @property
    def failed(self) -> bool:
        return self.observation.is_error

    @property
    def reused(self) -> bool:
        """True when an earlier round's observation stands in for this call."""
        return self.reused_round is not None

    @property
    def shared(self) -> bool:
        """True when an earlier task of the same plan ran this read-only call."""
        return self.shared_with is not None


TaskEventKind = Literal["held", "started", "denied", "reused", "finished"]


@dataclass(frozen=True)
class TaskEvent:
    """A live update: a side-effect task ``"held"`` until the plan is checked, a tool
    call ``"started"``, a call ``"denied"`` or ``"reused"`` (with its record), and at
    the end of every task ``"finished"`` (with its record). ``by`` says who denied
    a call: ``"user"`` or ``"policy"``."""

    kind: TaskEventKind
    task: PlanTask
    record: TaskRecord | None = None
    by: str | None = None


@dataclass(frozen=True)
class PlanRun:
    """What executing a plan produced: records by task index, a plan-level error, notes.

    ``error`` is set when the plan (or its stream) turned out malformed; tasks read
    before the defect still ran. ``notes`` explain task versions that were not run.
    """

    records: tuple[TaskRecord, ...]
    error: PlanError | None = None
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the plan was well formed and every task succeeded."""
        return self.error is None and not any(record.failed for record in self.records)

    def record(self, index: int) -> TaskRecord:
        """The record of task ``index``; KeyError if there is none."""
        for record in self.records:
            if record.task.index == index:
                return record
        raise KeyError(index)

    def observations_text(self) -> str:
        """Call/observation pairs in LLMCompiler's scratchpad form, for the Arbiter."""
        lines: list[str] = []
        for record in self.records:
            if record.task.thought is not None:
                lines.extend(f"Thought: {part}" for part in record.task.thought.split("\n"))
            lines.append(f"{record.task.index}. {_call_text(record)}")
            text = record.observation.observation()
            prefix = "Error: " if record.failed else ""
            if record.reused:
                prefix = f"(done in round {record.reused_round}, not run again) " + prefix
            lines.append(f"Observation: {prefix}{text}")
        lines.extend(f"Note: {note}" for note in self.notes)
        if self.error is not None:
            lines.append(f"Plan error: {self.error} (write a corrected plan)")
        return "\n".join(lines)


def _call_text(record: TaskRecord) -> str:
    try:
        return format_call(record.task.tool, record.arguments)
    except CallFormatError:  # a structured result with no literal form (NaN, a set...)
        return f"{record.task.tool}({json.dumps(dict(record.arguments), default=str)})"
