"""Every code block in the README runs as written (subprocess, real model): the Python
blocks, and the `toolweave` commands of the shell blocks (the install and the test
command are what CI itself runs)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
COMMANDS = [
    line.split("&&")[-1].strip()
    for block in re.findall(r"```bash\n(.*?)```", README, re.S)
    for line in block.splitlines()
    if line.split("&&")[-1].strip().startswith("toolweave ")
]


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TOOLWEAVE_DEMO_STATE": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip()


def test_the_readme_shows_the_main_command() -> None:
    assert any(c.startswith("toolweave run ") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=[c.split()[1] for c in COMMANDS])
def test_readme_shell_command_runs(command: str, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "toolweave.adapters.cli", *shlex.split(command)[1:]]
    proc = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        # The demo servers' own state; the prompt states are this test session's (conftest).
        env={**os.environ, "TOOLWEAVE_DEMO_STATE": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    if command.startswith("toolweave run "):
        assert "answer:" in proc.stdout and "planner round 1" in proc.stdout
    else:
        assert proc.stdout.strip()
