"""LLMCompiler plans: numbered tool calls with ``$N`` references, and writing them.

    Thought: I need the weather in both cities first.
    1. get_weather(city="Paris")
    2. get_weather("Rome")
    3. compare(a=$1, b=$2, question="Is ${1} warmer than $2?")
    4. join()

A task line is ``N. tool(arguments)``: keyword arguments with Python-literal values
(JSON's ``true``/``false``/``null`` are read too), or positional ones taken in the
tool's `ToolSpec.argument_order`. ``$N`` or ``${N}`` as a whole value (also inside a
list or dict) is a `TaskRef` to the result of task N; inside a string it stands for
the result's text. Inside strings ``${N}`` must name an earlier task, while a bare
``$N`` counts only when task N is an earlier task (so ``"under $300"`` stays text,
as in LLMCompiler). Numbers must increase; ``join()`` ends the plan (LLMCompiler's
``<END_OF_PLAN>`` marker may follow it). ``Thought:`` lines belong to the next task.

`toolweave.plan.parse` reads plans, as they stream, and `toolweave.plan.arguments`
a task's arguments. Every defect raises `PlanError`, whose message names the line and
says what to write instead: it is meant to go back to the model as an observation for
replanning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolweave.errors import ToolweaveError
from toolweave.formats.pycall import to_literal

__all__ = [
    "END_OF_PLAN",
    "Plan",
    "PlanError",
    "PlanTask",
    "TaskRef",
    "format_call",
    "format_plan",
    "format_task",
]

#: LLMCompiler's end marker, accepted after ``join()``.
END_OF_PLAN = "<END_OF_PLAN>"


class PlanError(ToolweaveError, ValueError):
    """A plan that cannot run; the message names the line and how to fix it.

    ``line`` is the 1-based line number (one past the last line for a missing
    ``join()``), ``text`` the offending line, ``problem`` the explanation.
    """

    def __init__(self, line: int, problem: str, text: str | None = None) -> None:
        self.line = line
        self.problem = problem
        self.text = text
        where = f"line {line}" if text is None else f"line {line} ({text.strip()!r})"
        super().__init__(f"plan {where}: {problem}")


@dataclass(frozen=True)
class TaskRef:
    """``$N`` as a whole argument value: the result of task ``index``."""

    index: int

    def __str__(self) -> str:
        return f"${self.index}"


@dataclass(frozen=True)
class PlanTask:
    """One numbered tool call of a plan.

    ``arguments`` holds literal values, `TaskRef` values and strings that may contain
    ``$N``; ``dependencies`` lists the earlier tasks they refer to, ascending;
    ``thought`` is the ``Thought:`` text written just before the task (lines joined
    by ``"\\n"``). ``provisional`` marks an early version of a call that a later
    version with the same index may replace (an executor runs it early only for
    read-only tools); the parser never sets it.
    """

    index: int
    tool: str
    arguments: Mapping[str, Any]
    dependencies: tuple[int, ...] = ()
    thought: str | None = None
    provisional: bool = False

    # Hash by position: dict fields are unhashable, and indices are unique in a plan.
    def __hash__(self) -> int:
        return hash((self.index, self.tool))


@dataclass(frozen=True)
class Plan:
    """A parsed plan: its tasks in order, the thoughts after the last task, join seen."""

    tasks: tuple[PlanTask, ...]
    thoughts: tuple[str, ...] = ()
    joined: bool = True


def format_plan(plan: Plan) -> str:
    """Write a plan in canonical form: keyword arguments, ``join()`` numbered one past
    the last task. `toolweave.plan.parse.parse_plan` reads a joined plan back equal."""
    lines: list[str] = []
    for task in plan.tasks:
        if task.thought is not None:
            lines.extend(f"Thought: {part}" for part in task.thought.split("\n"))
        lines.append(format_task(task))
    lines.extend(f"Thought: {thought}" for thought in plan.thoughts)
    if plan.joined:
        last = plan.tasks[-1].index if plan.tasks else 0
        lines.append(f"{last + 1}. join()")
    return "\n".join(lines)


def format_task(task: PlanTask) -> str:
    """``N. tool(key=value, ...)``."""
    return f"{task.index}. {format_call(task.tool, task.arguments)}"


def format_call(tool: str, arguments: Mapping[str, Any]) -> str:
    """``tool(key=value, ...)`` with Python literals and ``$N`` for `TaskRef` values."""
    return f"{tool}({', '.join(f'{key}={_format_value(v)}' for key, v in arguments.items())})"


def _format_value(value: Any) -> str:
    if isinstance(value, TaskRef):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{to_literal(key)}: {_format_value(item)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    return to_literal(value)
