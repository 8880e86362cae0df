"""`toolweave run --chat-template FILE`: the file is checked before any server starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolweave.adapters.cli", "run", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the chat template"),
        ("{% if %}", "is not a Jinja template"),
        ("no messages rendered", "does not render a two-message chat"),
    ],
)
def test_a_bad_chat_template_is_one_line_and_exit_2(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "template.jinja"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    proc = run("What's the weather in London?", "--demo", "weather", "--chat-template", path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and str(path) in lines[0], proc.stderr
    assert "starting" not in proc.stdout  # no MCP server was started


def test_run_help_lists_the_chat_template_option() -> None:
    proc = run("--help")
    assert proc.returncode == 0 and "--chat-template" in proc.stdout, proc.stderr
