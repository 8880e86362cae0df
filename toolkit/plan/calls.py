"""One task's tool call, as pure functions: its arguments with ``$N`` substituted and
checked against the tool's schema, the call itself under a timeout (a tool's exception,
timeout or wrong return type becomes an error observation), and the record of a task
that was not run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from time import perf_counter
from typing import Any

import anyio

from toolweave.errors import ToolSpecError
from toolweave.plan.arguments import resolve_arguments
from toolweave.plan.format import PlanTask
from toolweave.plan.records import TaskRecord
from toolweave.tools import Tool, ToolResult

__all__ = ["call_arguments", "call_tool", "not_run"]


def call_arguments(
    task: PlanTask, tool: Tool, results: Mapping[int, ToolResult]
) -> tuple[dict[str, Any], str | None]:
    """Substitute references and validate; return arguments and a problem or None.

    ``results`` holds the observation of every task in ``task.dependencies``.
    """
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
        i: _json_or_text(texts[i]) if results[i].structured is None else values[i] for i in results
    }
    if decoded != values:
        retry = resolve_arguments(task, decoded, texts)
        try:
            tool.spec.validate_call(retry)
            return retry, None
        except ToolSpecError:
            pass
    return arguments, problem


async def call_tool(tool: Tool, arguments: Mapping[str, Any], timeout: float) -> ToolResult:
    """Run ``tool`` for at most ``timeout`` seconds (math.inf: no bound); never raises."""
    result: Any = None
    with anyio.move_on_after(timeout) as scope:
        try:
            result = await tool.run(arguments)
        except Exception as exc:  # a tool's bug is an observation, not a crash
            return ToolResult.error(f"{tool.name} raised {type(exc).__name__}: {exc}")
    if scope.cancelled_caught:
        return ToolResult.error(f"{tool.name} timed out after {timeout:g} s")
    if not isinstance(result, ToolResult):
        return ToolResult.error(
            f"{tool.name} returned {type(result).__name__} instead of a ToolResult"
        )
    return result


def not_run(task: PlanTask, problem: str, arguments: Mapping[str, Any] | None = None) -> TaskRecord:
    """The record of a task whose tool was not called: ``problem`` as its error."""
    now = perf_counter()
    used = task.arguments if arguments is None else arguments
    return TaskRecord(task, used, ToolResult.error(problem), now, now, ran=False)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
