"""The run display's lines for reused and shared call results."""

from __future__ import annotations

import io

from rich.console import Console

from toolweave.adapters.cli.display import RunTrace
from toolweave.plan_events import CallReused


def shown(event: CallReused) -> str:
    out = io.StringIO()
    trace = RunTrace(Console(file=out, width=200, highlight=False))
    trace(event)
    assert trace.events[-1]["kind"] == "call_reused"
    assert trace.events[-1]["same_as"] == event.same_as
    return out.getvalue()


def test_a_result_shared_within_the_plan_names_the_task_that_ran_it() -> None:
    line = shown(CallReused(3, "current_weather", 1, "12 C", same_as=1))
    assert "task 3 current_weather: the same read-only call as task 1" in line
    assert "round" not in line


def test_a_side_effect_of_an_earlier_round_names_the_round() -> None:
    line = shown(CallReused(2, "create_note", 1, "created"))
    assert "already ran in round 1" in line
