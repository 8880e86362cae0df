"""Run a plan as a DAG: every task starts as soon as its line is parsed and its
dependencies are done, in parallel (anyio).

Nothing a plan or a tool does makes `execute_plan` raise: tool errors, exceptions,
timeouts, arguments that fail the schema once ``$N`` is substituted, and a failed
dependency all become error observations in the task's `TaskRecord`; a malformed plan
becomes `PlanRun.error`. Only errors of the caller's own making propagate: an
exception other than `PlanError` from the task stream (running tools are cancelled),
or one raised by ``on_event``.

Provisional tasks (`PlanTask.provisional`, emitted early by a decoder) are run early
only when their tool is read-only; a later version with the same index replaces them
(a read-only run is cancelled or discarded and the new version runs). A tool that is
not read-only is started at most once per task.

Side effects wait for the whole plan. A task whose tool is not read-only is held
(event ``"held"``) until the plan has been read to its end and checked (``join()``
reached, every ``$N`` naming an earlier task); a plan that fails the check runs none
of them. Each such call then goes through the consent and ledger gate
(`toolweave.plan.gate`).

A read-only call a plan asks for twice runs once: the later task takes the earlier
run's observation (event ``"reused"``, `TaskRecord.shared_with`), unless it comes after
a side effect of the plan (one of its dependencies, directly or not, is not read-only).
See `toolweave.plan.shared_reads`.

The result types live in `toolweave.plan.records` and the mechanics of one call
(substitution, validation, timeout) in `toolweave.plan.calls`; this module holds the
scheduling.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterable, Callable, Mapping
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any

import anyio
import anyio.abc

from toolweave.consent import ConsentPolicy
from toolweave.plan.calls import call_arguments, call_tool, not_run
from toolweave.plan.format import Plan, PlanError, PlanTask, format_call
from toolweave.plan.gate import SideEffectGate
from toolweave.plan.ledger import CallLedger
from toolweave.plan.parse import parse_plan
from toolweave.plan.records import PlanRun, TaskEvent, TaskEventKind, TaskRecord
from toolweave.plan.shared_reads import SharedReads
from toolweave.tools import Tool, ToolResult

__all__ = [
    "PlanRun",
    "TaskEvent",
    "TaskEventKind",
    "TaskRecord",
    "execute_plan",
    "execute_plan_text",
]


async def execute_plan(
    plan_or_stream: Plan | AsyncIterable[PlanTask],
    tools: Mapping[str, Tool],
    *,
    timeout: float | None = 30.0,
    on_event: Callable[[TaskEvent], None] | None = None,
    consent: ConsentPolicy | None = None,
    ledger: CallLedger | None = None,
) -> PlanRun:
    """Run a plan, or tasks as a stream yields them, and return every record.

    ``timeout`` bounds each tool call in seconds (None: no bound). A `PlanError`
    raised by the stream ends reading; read-only tasks already read still run to
    completion, side-effect tasks do not run. ``consent`` decides each side-effect
    call (None: all run); ``ledger`` holds the side effects of earlier rounds of the
    same request (None: a fresh one).
    """
    policy = ConsentPolicy.allow_all() if consent is None else consent
    run = _Execution(tools, timeout, on_event, policy, ledger or CallLedger())
    error: PlanError | None = None
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        run.group = group
        if isinstance(plan_or_stream, Plan):
            for task in plan_or_stream.tasks:
                run.add(task)
        else:
            try:
                async for task in plan_or_stream:
                    run.add(task)
            except PlanError as exc:
                error = exc
            except Exception as exc:  # the producer's failure: stop, re-raise it unwrapped
                failure = exc
                group.cancel_scope.cancel()
        run.finalize_last()
        joined = plan_or_stream.joined if isinstance(plan_or_stream, Plan) else True
        run.check(error, joined)
    if failure is not None:
        raise failure
    return PlanRun(run.records(), error, tuple(run.notes))


async def execute_plan_text(
    text: str,
    tools: Mapping[str, Tool],
    *,
    timeout: float | None = 30.0,
    on_event: Callable[[TaskEvent], None] | None = None,
    consent: ConsentPolicy | None = None,
    ledger: CallLedger | None = None,
) -> PlanRun:
    """Parse and run a whole plan text; a malformed plan gives a run with only ``error``."""
    try:
        plan = parse_plan(text, {name: tool.spec for name, tool in tools.items()})
    except PlanError as exc:
        return PlanRun((), exc)
    return await execute_plan(
        plan, tools, timeout=timeout, on_event=on_event, consent=consent, ledger=ledger
    )


@dataclass(eq=False)
class _Slot:
    """The current version of one task and the state of its run."""

    task: PlanTask
    done: anyio.Event = field(default_factory=anyio.Event)
    record: TaskRecord | None = None
    scope: anyio.CancelScope | None = None
    started: bool = False  # the tool of the current version was called
    held: bool = False  # the "held" event was sent


class _Execution:
    def __init__(
        self,
        tools: Mapping[str, Tool],
        timeout: float | None,
        on_event: Callable[[TaskEvent], None] | None,
        consent: ConsentPolicy,
        ledger: CallLedger,
    ) -> None:
        self.tools = tools
        self.timeout = math.inf if timeout is None else timeout
        self.on_event = on_event
        self.gate = SideEffectGate(consent, ledger, self._emit)
        self.reads = SharedReads()
        self.slots: dict[int, _Slot] = {}
        self.last: int | None = None
        self.notes: list[str] = []
        self.group: anyio.abc.TaskGroup | None = None
        self.checked = anyio.Event()  # set once the whole plan was read and checked
        self.problem: str | None = None  # why the plan failed its check

    def check(self, error: PlanError | None, joined: bool) -> None:
        """The plan is read: check it and release (or refuse) the held side effects."""
        self.problem = self._problem(error, joined)
        self.checked.set()

    def _problem(self, error: PlanError | None, joined: bool) -> str | None:
        """Why the plan as read may not run side effects, or None."""
        if error is not None:
            return f"the plan is malformed ({error})"
        if not joined:
            return "the plan does not end with join()"
        for index in sorted(self.slots):
            task = self.slots[index].task
            if task.tool not in self.tools:
                return f"task {index} calls the unknown tool {task.tool!r}"
            missing = [d for d in task.dependencies if d >= index or d not in self.slots]
            if missing:
                return f"task {index} uses ${missing[0]}, which names no earlier task"
        return None

    def add(self, task: PlanTask) -> None:
        slot = self.slots.get(task.index)
        if slot is not None:
            self._update(slot, task)
            return
        # A later task means the decoder has moved on: the previous version is final.
        self.finalize_last()
        self.last = task.index
        self._start(_Slot(task))

    def finalize_last(self) -> None:
        if self.last is not None:
            slot = self.slots[self.last]
            if slot.task.provisional:
                self._update(slot, replace(slot.task, provisional=False))

    def records(self) -> tuple[TaskRecord, ...]:
        out = []
        for index in sorted(self.slots):
            slot = self.slots[index]
            if slot.record is not None:  # always set once the task group has exited
                out.append(replace(slot.record, task=slot.task))
        return tuple(out)

    def _start(self, slot: _Slot) -> None:
        self.slots[slot.task.index] = slot
        if self.group is None:
            raise RuntimeError("_Execution.group must be set before adding tasks")
        self.group.start_soon(self._drive, slot)

    def _update(self, slot: _Slot, task: PlanTask) -> None:
        if task == slot.task:
            return
        same_call = _same_call(task, slot.task)
        if task.index != self.last and not same_call:
            self.notes.append(
                f"task {task.index} changed after later tasks were planned; "
                f"the new version was not run"
            )
            return
        if slot.started and not same_call and not self._read_only(slot.task):
            self.notes.append(
                f"task {task.index} ({slot.task.tool}) changed after its tool had started; "
                f"a tool that is not read-only is never run twice, so "
                f"{format_call(task.tool, task.arguments)} was not run"
            )
            return
        if slot.done.is_set():
            if not same_call:  # a finished read-only provisional run: run the new call
                self.reads.forget(task.index)
                self._start(_Slot(task))
            else:
                slot.task = task
            return
        slot.task = task
        # Wake a waiting version (or cancel a read-only provisional run); a run of the
        # same call finishes undisturbed because _drive compares calls.
        if slot.scope is not None and (not same_call or not slot.started):
            slot.scope.cancel()

    async def _drive(self, slot: _Slot) -> None:
        while True:
            task = slot.task
            slot.started = False
            record: TaskRecord | None = None
            with anyio.CancelScope() as scope:
                slot.scope = scope
                record = await self._attempt(slot, task)
            slot.scope = None
            if record is not None and _same_call(slot.task, task):
                break
        slot.record = replace(record, task=slot.task)
        slot.done.set()
        self._emit(TaskEvent("finished", slot.task, slot.record))

    async def _attempt(self, slot: _Slot, task: PlanTask) -> TaskRecord:
        tool = self.tools.get(task.tool)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return not_run(task, f"unknown tool {task.tool!r} (tools: {known})")
        if task.provisional and not tool.read_only:
            await anyio.sleep_forever()  # until the final version replaces this one
        if not tool.read_only:
            if not self.checked.is_set():
                if not slot.held:
                    slot.held = True
                    self._emit(TaskEvent("held", task))
                await self.checked.wait()
            if self.problem is not None:
                why = f"{self.problem}; a plan that fails its check runs no side effect"
                return not_run(task, f"not run: {why}")
        for index in task.dependencies:
            dependency = self.slots.get(index)
            if dependency is None or index >= task.index:
                return not_run(task, f"not run: it uses ${index}, but there is no task {index}")
            await dependency.done.wait()
        for index in task.dependencies:
            done = self.slots[index]
            if done.record is not None and done.record.failed:
                return not_run(
                    task, f"not run: it uses ${index}, and task {index} ({done.task.tool}) failed"
                )
        results = {i: self._result(i) for i in task.dependencies}
        arguments, problem = call_arguments(task, tool, results)
        if problem is not None:
            return not_run(task, problem, arguments)
        if not tool.read_only:
            refused = await self.gate.admit(task, tool, arguments)
            if refused is not None:
                return refused
        elif not self._after_side_effect(task):
            return await self._read(slot, task, tool, arguments)
        return await self._call(slot, task, tool, arguments)

    async def _call(
        self, slot: _Slot, task: PlanTask, tool: Tool, arguments: dict[str, Any]
    ) -> TaskRecord:
        slot.started = True
        self._emit(TaskEvent("started", task))
        started = perf_counter()
        observation = await call_tool(tool, arguments, self.timeout)
        if not tool.read_only:
            self.gate.ran(task, tool, arguments, observation)
        return TaskRecord(task, arguments, observation, started, perf_counter())

    async def _read(
        self, slot: _Slot, task: PlanTask, tool: Tool, arguments: dict[str, Any]
    ) -> TaskRecord:
        """A read-only call: the observation of the same call earlier in the plan, or run."""
        earlier = await self.reads.earlier(task.tool, arguments)
        if earlier is not None and earlier.observation is not None:
            now = perf_counter()
            record = TaskRecord(
                task, arguments, earlier.observation, now, now, ran=False,
                shared_with=earlier.task,
            )  # fmt: skip
            self._emit(TaskEvent("reused", task, record))
            return record
        run = self.reads.claim(task.tool, arguments, task.index)
        try:
            record = await self._call(slot, task, tool, arguments)
            self.reads.finish(run, record.observation)
            return record
        finally:
            self.reads.release(run)  # cancelled: the call's later tasks run it themselves

    def _after_side_effect(self, task: PlanTask) -> bool:
        """True when a dependency of ``task``, directly or not, is not read-only."""
        seen: set[int] = set()
        todo = list(task.dependencies)
        while todo:
            index = todo.pop()
            slot = self.slots.get(index)
            if index in seen or slot is None:
                continue
            seen.add(index)
            if not self._read_only(slot.task):
                return True
            todo.extend(slot.task.dependencies)
        return False

    def _result(self, index: int) -> ToolResult:
        record = self.slots[index].record
        if record is None:  # unreachable: dependencies are awaited first
            raise RuntimeError(f"task {index} has no result yet")
        return record.observation

    def _read_only(self, task: PlanTask) -> bool:
        tool = self.tools.get(task.tool)
        return tool is not None and tool.read_only

    def _emit(self, event: TaskEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)


def _same_call(a: PlanTask, b: PlanTask) -> bool:
    return replace(a, provisional=False) == replace(b, provisional=False)
