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
of them. Each such call then goes through the `ConsentPolicy` (default: allow, since
the caller chose the plan; the plan-out agent passes its own) and the request's
`CallLedger`: a call that ran in an earlier round is not run again, its observation
is reused (event ``"reused"``); a denied call becomes an error observation (event
``"denied"``).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterable, Callable, Mapping
from dataclasses import dataclass, field, replace
from time import perf_counter
from typing import Any, Literal

import anyio
import anyio.abc

from toolweave.consent import ConsentPolicy, ConsentRequest
from toolweave.errors import CallFormatError, ToolSpecError
from toolweave.plan.arguments import resolve_arguments
from toolweave.plan.format import Plan, PlanError, PlanTask, format_call
from toolweave.plan.ledger import CallLedger
from toolweave.plan.parse import parse_plan
from toolweave.tools import Tool, ToolResult

__all__ = [
    "PlanRun",
    "TaskEvent",
    "TaskEventKind",
    "TaskRecord",
    "execute_plan",
    "execute_plan_text",
]


@dataclass(frozen=True)
class TaskRecord:
    """One task's call and observation.

    ``arguments`` are the arguments after substitution (the planned ones when the
    task never got that far); ``started``/``finished`` are `time.perf_counter`
    values; ``ran`` is False when the tool was not called (equal times then).
    ``denied`` marks a call the consent policy refused; ``reused_round`` the round
    of the same request whose identical call's observation this one reuses.
    """

    task: PlanTask
    arguments: Mapping[str, Any]
    observation: ToolResult
    started: float
    finished: float
    ran: bool = True
    denied: bool = False
    reused_round: int | None = None

    @property
    def failed(self) -> bool:
        return self.observation.is_error

    @property
    def reused(self) -> bool:
        """True when an earlier round's observation stands in for this call."""
        return self.reused_round is not None


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
        self.consent = consent
        self.ledger = ledger
        self.slots: dict[int, _Slot] = {}
        self.last: int | None = None
        self.notes: list[str] = []
        self.group: anyio.abc.TaskGroup | None = None
        self.checked = anyio.Event()  # set once the whole plan was read and checked
        self.problem: str | None = None  # why the plan failed its check
        self.asking = anyio.Lock()  # one consent question at a time

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
            return _not_run(task, f"unknown tool {task.tool!r} (tools: {known})")
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
                return _not_run(task, f"not run: {why}")
        for index in task.dependencies:
            dependency = self.slots.get(index)
            if dependency is None or index >= task.index:
                return _not_run(task, f"not run: it uses ${index}, but there is no task {index}")
            await dependency.done.wait()
        for index in task.dependencies:
            done = self.slots[index]
            if done.record is not None and done.record.failed:
                return _not_run(
                    task, f"not run: it uses ${index}, and task {index} ({done.task.tool}) failed"
                )
        arguments, problem = self._call_arguments(task, tool)
        if problem is not None:
            return _not_run(task, problem, arguments)
        if not tool.read_only:
            refused = await self._gate(task, tool, arguments)
            if refused is not None:
                return refused
        slot.started = True
        self._emit(TaskEvent("started", task))
        started = perf_counter()
        observation = await self._call(tool, arguments)
        if not tool.read_only:
            self.ledger.record(tool.name, arguments, task.index, observation)
        return TaskRecord(task, arguments, observation, started, perf_counter())

    async def _gate(
        self, task: PlanTask, tool: Tool, arguments: dict[str, Any]
    ) -> TaskRecord | None:
        """None when the side effect may run now; else the record that stands for it."""
        earlier = self.ledger.earlier(tool.name, arguments)
        now = perf_counter()
        if earlier is not None:
            record = TaskRecord(
                task, arguments, earlier.observation, now, now, ran=False,
                reused_round=earlier.round,
            )  # fmt: skip
            self._emit(TaskEvent("reused", task, record))
            return record
        by = "user"
        if self.ledger.denied_before(tool.name, arguments):
            reason = "not run: the user denied this call earlier in this request"
        else:
            request = ConsentRequest(tool.name, arguments, task.index, tool.spec.description)
            async with self.asking:
                decision = await self.consent.decide(request)
            if decision.allowed:
                return None
            if decision.by == "user":
                self.ledger.deny(tool.name, arguments)
            by, reason = decision.by, decision.reason
        now = perf_counter()
        record = TaskRecord(
            task, arguments, ToolResult.error(reason), now, now, ran=False, denied=True
        )
        self._emit(TaskEvent("denied", task, record, by))
        return record

    def _call_arguments(self, task: PlanTask, tool: Tool) -> tuple[dict[str, Any], str | None]:
        """Substitute references and validate; return arguments and a problem or None."""
        results = {i: self._result(i) for i in task.dependencies}
        texts = {i: result.observation() for i, result in results.items()}
        values = {
            i: texts[i] if result.structured is None else result.structured
            for i, result in results.items()
        }
        arguments = resolve_arguments(task, values, texts)
        try:
            tool.spec.validate_call(arguments)
            return arguments, None
        except ToolSpecError as exc:
            problem = f"not run: invalid arguments once results were substituted: {exc}"
        # A text result may hold a number or list the argument needs: try it as JSON.
        decoded = {
            i: _json_or_text(texts[i]) if results[i].structured is None else values[i]
            for i in results
        }
        if decoded != values:
            retry = resolve_arguments(task, decoded, texts)
            try:
                tool.spec.validate_call(retry)
                return retry, None
            except ToolSpecError:
                pass
        return arguments, problem

    def _result(self, index: int) -> ToolResult:
        record = self.slots[index].record
        if record is None:  # unreachable: dependencies are awaited first
            raise RuntimeError(f"task {index} has no result yet")
        return record.observation

    async def _call(self, tool: Tool, arguments: Mapping[str, Any]) -> ToolResult:
        result: Any = None
        with anyio.move_on_after(self.timeout) as scope:
            try:
                result = await tool.run(arguments)
            except Exception as exc:  # a tool's bug is an observation, not a crash
                return ToolResult.error(f"{tool.name} raised {type(exc).__name__}: {exc}")
        if scope.cancelled_caught:
            return ToolResult.error(f"{tool.name} timed out after {self.timeout:g} s")
        if not isinstance(result, ToolResult):
            return ToolResult.error(
                f"{tool.name} returned {type(result).__name__} instead of a ToolResult"
            )
        return result

    def _read_only(self, task: PlanTask) -> bool:
        tool = self.tools.get(task.tool)
        return tool is not None and tool.read_only

    def _emit(self, event: TaskEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)


def _same_call(a: PlanTask, b: PlanTask) -> bool:
    return replace(a, provisional=False) == replace(b, provisional=False)


def _not_run(
    task: PlanTask, problem: str, arguments: Mapping[str, Any] | None = None
) -> TaskRecord:
    now = perf_counter()
    used = task.arguments if arguments is None else arguments
    return TaskRecord(task, used, ToolResult.error(problem), now, now, ran=False)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _call_text(record: TaskRecord) -> str:
    try:
        return format_call(record.task.tool, record.arguments)
    except CallFormatError:  # a structured result with no literal form (NaN, a set...)
        return f"{record.task.tool}({json.dumps(dict(record.arguments), default=str)})"
