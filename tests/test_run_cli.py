"""`toolweave run`: the agent on the embedded model and the demo MCP servers, end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def toolweave(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolweave.adapters.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_plan_agent_run_streams_plan_lines_tasks_and_the_arbiter(tmp_path: Path) -> None:
    proc = toolweave(
        "run",
        "What's the weather in London and in Paris right now?",
        "--demo",
        "weather",
        "--state-dir",
        tmp_path,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    kinds = [e["kind"] for e in doc["events"]]
    for kind in ("planner_start", "plan_line", "task_start", "plan_done", "arbiter_done"):
        assert kind in kinds, kinds
    assert kinds.index("task_start") < kinds.index("plan_done")  # tasks start mid-plan
    assert doc["summary"]["tool_calls"] >= 2 and doc["answer"]


def test_react_run_json_trace_shows_each_phase_and_the_answer(tmp_path: Path) -> None:
    proc = toolweave(
        "run",
        "What's the weather in London right now?",
        "--agent",
        "react",
        "--demo",
        "weather",
        "--state-dir",
        tmp_path,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    kinds = [e["kind"] for e in doc["events"]]
    for kind in ("model_start", "call_name", "final_call", "tool_start", "model_done"):
        assert kind in kinds, kinds
    # The read-only weather tool started before the first model message was done,
    # and the agent reused its result instead of running it again.
    first_done = kinds.index("model_done")
    assert kinds.index("tool_start") < first_done
    assert "tool_reused" in kinds
    assert sum(1 for e in doc["events"] if e["kind"] == "tool_start") == 1
    assert doc["answer"] and doc["answer"] != "(no answer)"
    assert doc["summary"]["tool_calls"] == 1


def test_run_rejects_an_unknown_demo_server_with_one_line() -> None:
    proc = toolweave("run", "hi", "--demo", "nope")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "nope" in proc.stderr
