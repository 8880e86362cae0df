"""Every example in examples/ runs as is (subprocess, real model, real MCP servers)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str, timeout: float = 600) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_langchain_agent_example_starts_the_read_only_tool_early() -> None:
    out = run_example("langchain_agent.py", "--query", "What's the weather in London right now?")
    assert "model called current_weather" in out
    assert "started early, result reused" in out
    assert "before the model's message was complete" in out


@pytest.mark.slow
def test_plan_out_mcp_example_prints_each_phase_on_a_server_command() -> None:
    server = f"{sys.executable} -m toolweave.adapters.demo_servers.weather"
    out = run_example("plan_out_mcp.py", "--server", server)
    assert "servers: weather; tools: current_weather" in out
    assert "planner: round 1, writing the plan" in out
    # Each task starts once its plan line is complete, before the plan is finished.
    line = out.index("plan line 1 complete: current_weather")
    started = out.index("task 1 current_weather started")
    assert line < started < out.index("plan written in")
    assert "task 1 done" in out
    assert re.search(r"arbiter decision: (finish|replan)", out)
    assert re.search(r"^answer: \S", out, re.MULTILINE)
    assert re.search(r"^\d round\(s\), [1-9]\d* tool call\(s\)", out, re.MULTILINE)


def test_fastpath_example_decodes_every_mode_and_lossless_equals_jump(tmp_path: Path) -> None:
    # Its `--tools` option with four of the bundled tools: the 24 take 20 s to prefill here
    # (the README's quick start runs those).
    tools = json.loads((ROOT / "examples" / "tools" / "assistant_tools.json").read_text("utf-8"))
    (tmp_path / "tools.json").write_text(json.dumps(tools[:4]), "utf-8")
    out = run_example("fastpath_python.py", "--tools", str(tmp_path / "tools.json"))
    assert "4 tools from" in out
    for mode in ("constrained", "jump", "fast", "lossless"):
        assert f"\n{mode}:\n  call get_current_weather(" in out
    assert '"location": "London"' in out
    passes = [int(n) for n in re.findall(r"(\d+) forward passes", out)]
    assert len(passes) == 4
    # jump and lossless prefill what the grammar forces: fewer passes than constrained;
    # lossless also verifies forecasts, so it never needs more passes than jump.
    assert passes[1] < passes[0] and passes[3] <= passes[1]
    assert "lossless == jump (tokens and text): yes" in out


def test_serving_session_example_reuses_checkpoints_across_a_restart(tmp_path: Path) -> None:
    out = run_example(
        "serving_session.py", "--steps", "4", "--restart-steps", "2", "--state-dir", str(tmp_path)
    )
    steps = re.findall(r"step +(\d+): prompt +(\d+) tokens, new +(\d+) \(([^)]*)\)", out)
    assert [int(s[0]) for s in steps] == [1, 2, 3, 4, 5, 6]
    first, *rest = steps
    assert int(first[2]) == int(first[1])  # nothing to reuse yet
    for _, prompt, new, _ in rest:  # the rules, tools and task are never prefilled again
        assert int(new) < int(prompt) / 2
    _, after = out.split("restart: a new engine and store over the same directory")
    assert re.search(r"^[1-9]\d* checkpoints found on disk", after, re.MULTILINE)
    assert "from disk" in steps[4][3]
    assert any(tmp_path.iterdir())  # --state-dir keeps the checkpoint files
