"""Prompt states are saved and restored by default: `toolweave call` and `ChatToolweave`
in a second process prefill fewer prompt tokens than the first and give the same call;
two processes writing one cache directory at once leave it readable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from toolweave.native.states.state_file import read_header

TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name."}},
            "required": ["city"],
        },
    },
    {
        "name": "send_email",
        "description": "Send an email to someone.",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "body"],
        },
    },
]
QUERY = "What's the weather in Paris?"

# A second process: ChatToolweave with its default state store, one forced tool call.
CHAT_SCRIPT = """
import json, sys
from langchain_core.tools import tool
from toolweave import ChatToolweave

@tool
def get_weather(city: str) -> str:
    '''Get the current weather in a city.'''
    return city

events = []
chat = ChatToolweave(max_tokens=32, observer=events.append)
msg = chat.bind_tools([get_weather], tool_choice="any").invoke("What's the weather in Paris?")
cache = [e for e in events if e.kind == "prompt_cache"][-1]
print(json.dumps({"calls": [[c["name"], c["args"]] for c in msg.tool_calls],
                  "reused": cache.reused, "prefilled": cache.prefilled, "source": cache.source}))
"""


def _call(tools_file: Path, states: Path) -> dict[str, object]:
    cmd = [
        sys.executable,
        "-m",
        "toolweave.adapters.cli",
        "call",
        "--tools",
        str(tools_file),
        "--query",
        QUERY,
        "--json",
        "--prompt-cache",
        str(states),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    doc: dict[str, object] = json.loads(out.stdout)
    return doc


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS), encoding="utf-8")
    return path


def test_second_call_process_restores_the_prompt(tools_file: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    first, second = _call(tools_file, states), _call(tools_file, states)
    c1, c2 = first["prompt_cache"], second["prompt_cache"]
    assert isinstance(c1, dict) and isinstance(c2, dict)
    assert c1["source"] == "none" and c1["reused"] == 0
    assert c2["source"] == "disk"
    assert c2["prefilled"] < c1["prefilled"]
    assert second["calls"] == first["calls"]
    assert first["calls"], "the forced weather request makes a call"
    # The states of calls on one catalogue share a session of their own: calls on
    # another tools file do not count against their budget.
    sessions = {read_header(f).session for f in states.glob("*.twstate")}
    assert len(sessions) == 1 and next(iter(sessions)).startswith("call:"), sessions


def test_no_cache_saves_nothing(tools_file: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    cmd = [sys.executable, "-m", "toolweave.adapters.cli", "call", "--tools", str(tools_file)]
    cmd += ["--query", QUERY, "--json", "--no-cache", "--prompt-cache", str(states)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(out.stdout)["prompt_cache"] is None
    assert not states.exists() or not any(states.iterdir())


@pytest.mark.slow
def test_chat_model_restores_states_across_processes(
    tmp_path: Path, link_measurements: Callable[[Path], Path]
) -> None:
    """Two processes at once on an empty cache, then a third: the store's files stay
    readable (checksummed, atomic writes; both processes succeed) and the third
    restores from disk."""
    env = {**os.environ, "TOOLWEAVE_CACHE_DIR": str(tmp_path / "root")}
    link_measurements(tmp_path / "root")
    cmd = [sys.executable, "-c", CHAT_SCRIPT]
    both = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    firsts = []
    for proc in both:
        text, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        firsts.append(json.loads(text))
    states = list((tmp_path / "root" / "prompt-states").glob("*.twstate"))
    assert states, "the default store saved the prompt's state"
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=True)
    third = json.loads(out.stdout)
    # Started together, a process may still find the other's state, written as soon as
    # its request ended: each starts cold or from that file, and one at least cold.
    assert all(f["source"] in ("none", "disk") for f in firsts), firsts
    cold = [f for f in firsts if f["source"] == "none"]
    assert cold and all(f["reused"] == 0 for f in cold), firsts
    assert third["source"] == "disk"  # restored from the files both processes wrote
    assert third["prefilled"] < cold[0]["prefilled"]
    assert third["calls"] == firsts[0]["calls"] == firsts[1]["calls"]
    assert third["calls"][0][0] == "get_weather"
