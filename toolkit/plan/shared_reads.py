"""Identical read-only calls of one plan run once.

A plan may ask for the same read-only call in two tasks (``current_weather(city="London")``
twice). The first task to reach the call runs it; a task that reaches the same call
(tool and canonical arguments) while that run is under way, or after it, waits for it
and takes its observation instead of calling the tool again. The executor decides which
tasks may share: never one that comes after a side effect of its plan.

A run that ends without an observation (cancelled: a provisional version replaced)
shares nothing; a task waiting on it runs the call itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from toolweave.plan.ledger import canonical_call
from toolweave.tools import ToolResult

__all__ = ["ReadRun", "SharedReads"]


@dataclass(eq=False)
class ReadRun:
    """One run of a read-only call, by plan task ``task``."""

    task: int
    done: anyio.Event = field(default_factory=anyio.Event)
    observation: ToolResult | None = None


class SharedReads:
    """The read-only calls one plan has run or is running, by canonical call."""

    def __init__(self) -> None:
        self._runs: dict[str, ReadRun] = {}

    async def earlier(self, tool: str, arguments: Mapping[str, Any]) -> ReadRun | None:
        """The finished run of the same call, waiting for one under way; None when the
        call has no run with an observation (the caller then runs it: `claim`)."""
        key = canonical_call(tool, arguments)
        while (run := self._runs.get(key)) is not None:
            await run.done.wait()
            if run.observation is not None:
                return run
            # That run was cancelled and has left the table: look again.
        return None

    def claim(self, tool: str, arguments: Mapping[str, Any], task: int) -> ReadRun:
        """Note that ``task`` runs the call now; `finish` or `release` the run it returns."""
        run = ReadRun(task)
        self._runs[canonical_call(tool, arguments)] = run
        return run

    def finish(self, run: ReadRun, observation: ToolResult) -> None:
        """The run ended with ``observation``: later identical calls take it."""
        run.observation = observation
        run.done.set()

    def release(self, run: ReadRun) -> None:
        """The run ended without an observation: forget it and wake its waiters."""
        if run.observation is None:
            for key, known in list(self._runs.items()):
                if known is run:
                    del self._runs[key]
        run.done.set()

    def forget(self, task: int) -> None:
        """Task ``task`` was replaced by another call: its runs are no longer its plan's."""
        for key, run in list(self._runs.items()):
            if run.task == task and run.done.is_set():
                del self._runs[key]
