"""Reading LLMCompiler plans (format: `toolweave.plan.format`), whole or as they stream.

`PlanStreamParser` returns each task as soon as its line ends, so an executor can start
it while the model still writes the rest; `parse_plan` reads a whole text.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Mapping

from toolweave.plan.arguments import LineProblem, read_arguments
from toolweave.plan.format import END_OF_PLAN, Plan, PlanError, PlanTask
from toolweave.toolspec import ToolSpec

__all__ = ["PlanStreamParser", "parse_plan"]

# Task numbers have at most 9 digits: int() refuses strings of more than 4300 digits.
_TASK_LINE = re.compile(r"(\d{1,9})\s*\.\s*(.*)", re.DOTALL)
_THOUGHT_LINE = re.compile(r"Thought\s*:(.*)", re.DOTALL | re.IGNORECASE)
_CALL = re.compile(r"([A-Za-z0-9_.\-]+)\s*(\(.*)", re.DOTALL)
_JOIN = re.compile(r"join\s*\(\s*\)\s*(?:" + re.escape(END_OF_PLAN) + r")?")


def parse_plan(text: str, tools: Mapping[str, ToolSpec]) -> Plan:
    """Parse a whole plan; `PlanError` on the first defect."""
    parser = PlanStreamParser(tools)
    parser.feed(text)
    return parser.close()


class PlanStreamParser:
    """Incremental plan parser: `feed` text as the model writes it, `close` at the end.

    `feed` returns each task as soon as its line ends (its newline arrived); `close`
    parses a last line without newline, requires ``join()`` and returns the `Plan`.
    When a chunk completes good lines and then a bad one, `feed` returns the good
    tasks and the `PlanError` is raised by the next `feed` or `close`.
    """

    def __init__(self, tools: Mapping[str, ToolSpec]) -> None:
        self._tools = tools
        self._buffer = ""
        self._line_number = 0
        self._tasks: list[PlanTask] = []
        self._thoughts: list[str] = []
        self._joined = False
        self._error: PlanError | None = None
        self._plan: Plan | None = None

    @property
    def joined(self) -> bool:
        """True once ``join()`` was read: the model can stop writing."""
        return self._joined

    @property
    def tasks(self) -> tuple[PlanTask, ...]:
        """The tasks parsed so far."""
        return tuple(self._tasks)

    @property
    def plan(self) -> Plan | None:
        """The plan `close` returned, None before."""
        return self._plan

    def feed(self, text: str) -> list[PlanTask]:
        """Add text; return the tasks whose lines it completed, in order."""
        self._raise_pending()
        if self._plan is not None:
            raise RuntimeError("feed() after close(): the plan is already complete")
        self._buffer += text
        emitted: list[PlanTask] = []
        while (cut := self._buffer.find("\n")) >= 0:
            line, self._buffer = self._buffer[:cut], self._buffer[cut + 1 :]
            try:
                task = self._read_line(line)
            except PlanError as exc:
                self._error = exc
                if emitted:
                    return emitted
                raise
            if task is not None:
                emitted.append(task)
        return emitted

    def close(self) -> Plan:
        """End the text: read the last line, check for ``join()``, return the plan."""
        if self._plan is not None:
            return self._plan
        self._raise_pending()
        if self._buffer:
            line, self._buffer = self._buffer, ""
            try:
                self._read_line(line)
            except PlanError as exc:
                self._error = exc
                raise
        if not self._joined:
            next_number = self._tasks[-1].index + 1 if self._tasks else 1
            self._error = PlanError(
                self._line_number + 1,
                f"the plan ends without join(); after the last task write '{next_number}. join()'",
            )
            raise self._error
        self._plan = Plan(tuple(self._tasks), tuple(self._thoughts), joined=True)
        return self._plan

    async def iter_tasks(self, deltas: AsyncIterable[str]) -> AsyncIterator[PlanTask]:
        """Feed an async stream of text deltas, yielding tasks as their lines end.

        Closes the parser when the stream ends (so a missing ``join()`` raises there);
        the `Plan` is then in `plan`.
        """
        async for delta in deltas:
            for task in self.feed(delta):
                yield task
        self.close()

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise self._error

    def _read_line(self, raw: str) -> PlanTask | None:
        self._line_number += 1
        line = raw.strip()
        try:
            return self._interpret(line)
        except LineProblem as exc:
            raise PlanError(self._line_number, str(exc), line) from None

    def _interpret(self, line: str) -> PlanTask | None:
        if self._joined:
            if line and line != END_OF_PLAN:
                raise LineProblem(
                    "text after join(): the plan must end with join(); "
                    "put every task and thought before it"
                )
            return None
        if not line:
            return None
        if thought := _THOUGHT_LINE.fullmatch(line):
            self._thoughts.append(thought[1].strip())
            return None
        task_line = _TASK_LINE.fullmatch(line)
        if task_line is None:
            raise LineProblem(
                "expected a numbered task 'N. tool_name(arg=value, ...)', "
                "a 'Thought: ...' line or 'N. join()'"
            )
        number, body = int(task_line[1]), task_line[2]
        self._check_number(number)
        if _JOIN.fullmatch(body):
            self._joined = True
            return None
        call = _CALL.fullmatch(body)
        if call is None:
            raise LineProblem(f"expected 'tool_name(arg=value, ...)' after '{number}.'")
        name, rest = call[1], call[2]
        if name == "join":
            raise LineProblem(f"join takes no arguments: write '{number}. join()'")
        task = self._task(number, name, rest)
        self._tasks.append(task)
        self._thoughts = []
        return task

    def _check_number(self, number: int) -> None:
        last = self._tasks[-1].index if self._tasks else 0
        if number > last:
            return
        if number == 0:
            raise LineProblem("task numbers start at 1")
        if any(task.index == number for task in self._tasks):
            raise LineProblem(
                f"task number {number} is used twice; number the tasks 1, 2, 3, ... "
                f"(the next one is {last + 1})"
            )
        raise LineProblem(
            f"task number {number} comes after task {last}; numbers must increase "
            f"(the next one is {last + 1})"
        )

    def _task(self, number: int, name: str, rest: str) -> PlanTask:
        spec = self._tools.get(name)
        if spec is None:
            known = ", ".join(sorted(self._tools)) or "none"
            raise LineProblem(
                f"unknown tool {name!r}; use one of: {known} (or '{number}. join()' "
                f"to end the plan)"
            )
        earlier = {task.index for task in self._tasks}
        arguments, dependencies = read_arguments(spec, rest, number, earlier)
        return PlanTask(
            index=number,
            tool=name,
            arguments=arguments,
            dependencies=dependencies,
            thought="\n".join(self._thoughts) if self._thoughts else None,
        )
