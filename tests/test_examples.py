"""Every example in examples/ runs as is (subprocess, real model, real MCP servers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
