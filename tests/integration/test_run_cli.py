"""`toolweave run`: the agent on the embedded model and the demo MCP servers, end to end."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from toolweave.adapters.demo_servers.store import call_counts


def toolweave(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # Runs share this test session's prompt states, as a user's runs do (conftest).
    return subprocess.run(
        [sys.executable, "-m", "toolweave.adapters.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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


@pytest.mark.slow
def test_a_second_run_starts_from_the_first_runs_saved_prompt_states(tmp_path: Path) -> None:
    def run(request: str, *extra: str) -> dict:
        proc = toolweave(
            "run", request, "--demo", "weather", "--state-dir", tmp_path / "servers",
            "--prompt-cache", tmp_path / "states", "--json", *extra,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        doc: dict = json.loads(proc.stdout)
        return doc

    # The first run, in the mode asked for (the README's `run` runs the default,
    # `lossless`), streams the plan line by line, starts tasks mid-plan, then arbitrates.
    first = run("What's the weather in London and in Paris right now?", "--mode", "constrained")
    kinds = [e["kind"] for e in first["events"]]
    modes = [e["mode"] for e in first["events"] if e["kind"] == "model_start"]
    assert modes and set(modes) == {"constrained"}, modes
    for kind in ("planner_start", "plan_line", "task_start", "plan_done", "arbiter_done"):
        assert kind in kinds, kinds
    assert kinds.index("task_start") < kinds.index("plan_done")  # tasks start mid-plan
    assert first["summary"]["tool_calls"] >= 2 and first["answer"]
    caches = [e for e in first["events"] if e["kind"] == "prompt_cache"]
    assert len(caches) >= 2 and caches[0]["source"] == "none"  # Planner, then Arbiter
    again = run("What's the weather in Rome right now?", "--compare")
    planner, arbiter = [e for e in again["events"] if e["kind"] == "prompt_cache"]
    # Saved by the first process: the rules and tools of the Planner's prompt, and the
    # Arbiter's rules and worked exchanges (its prompt up to the request).
    assert planner["source"] == "disk" and planner["reused"] > 0.7 * planner["prompt_tokens"]
    assert arbiter["source"] == "disk" and arbiter["reused"] > 0.6 * arbiter["prompt_tokens"]
    assert again["answer"]
    # --compare: the same prompts prefilled from scratch give the same output, slower.
    rows = again["compare"]["messages"]
    assert [r["message"] for r in rows] == ["1 planner", "1 arbiter"]
    assert all(r["same_calls"] for r in rows)
    assert again["compare"]["speedup"] > 1.5


def test_run_rejects_an_unknown_mode_with_one_line() -> None:
    proc = toolweave("run", "hi", "--mode", "nope")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "nope" in proc.stderr


# -- side effects need consent ------------------------------------------------------------

NOTE_REQUEST = "Make a note titled Groceries that says buy milk and eggs."


@pytest.fixture(scope="module")
def prompt_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared by the consent runs: only the first one prefills the long prompt prefixes."""
    return tmp_path_factory.mktemp("states") / "prompt-cache"


def consent_run(
    state: Path, cache: Path, *flags: str, stdin: Any = subprocess.DEVNULL
) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "toolweave.adapters.cli", "run", NOTE_REQUEST, "--demo", "notes",
         "--state-dir", str(state), "--prompt-cache", str(cache), "--json", *flags],
        stdin=stdin, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc, proc.stderr


def started_side_effects(doc: dict[str, Any]) -> Counter[str]:
    side_effects = {"create_note", "update_note", "delete_note"}
    return Counter(
        e["tool"] for e in doc["events"] if e["kind"] == "task_start" and e["tool"] in side_effects
    )


@pytest.mark.slow
def test_without_a_terminal_side_effects_are_denied_and_shown(
    tmp_path: Path, prompt_cache: Path
) -> None:
    doc, _ = consent_run(tmp_path, prompt_cache)
    denied = [e for e in doc["events"] if e["kind"] == "call_denied"]
    assert denied, [e["kind"] for e in doc["events"]]  # the model planned a side effect
    assert all("no terminal" in e["reason"] and e["tool"] == "create_note" for e in denied)
    assert call_counts("notes", tmp_path) == {}  # the server ran none
    assert not started_side_effects(doc)
    assert doc["summary"]["denied"] == len(denied)


def test_with_yes_each_side_effect_runs_once_on_the_server(
    tmp_path: Path, prompt_cache: Path
) -> None:
    doc, _ = consent_run(tmp_path, prompt_cache, "--yes")
    assert not [e for e in doc["events"] if e["kind"] == "call_denied"]
    started = started_side_effects(doc)
    assert started, [e["kind"] for e in doc["events"]]
    assert call_counts("notes", tmp_path) == dict(started)  # what the server ran = approved
    # At most once per request: a later round repeating the call reused its result.
    reused = [e for e in doc["events"] if e["kind"] == "call_reused"]
    assert all(e["round"] == 1 for e in reused)


def test_on_a_terminal_each_side_effect_is_asked_and_runs_after_yes(
    tmp_path: Path, prompt_cache: Path
) -> None:
    main, terminal = pty.openpty()
    try:
        os.write(main, b"y\n" * 4)  # typed ahead: one answer a question
        doc, stderr = consent_run(tmp_path, prompt_cache, stdin=terminal)
    finally:
        os.close(main)
        os.close(terminal)
    questions = stderr.count("allow create_note(")
    assert questions >= 1 and '"title": "Groceries"' in stderr and "[y/N]" in stderr
    started = started_side_effects(doc)
    assert call_counts("notes", tmp_path) == dict(started) and started["create_note"] >= 1


def test_consent_and_read_only_flags_are_checked_with_one_line(tmp_path: Path) -> None:
    proc = toolweave(
        "run", "hi", "--demo", "notes", "--state-dir", tmp_path, "--allow", "no_such_tool"
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "no_such_tool" in proc.stderr
    proc = toolweave("run", "hi", "--read-only", "x", "--not-read-only", "x")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "both" in proc.stderr


def test_read_only_flags_reclassify_tools_for_consent(tmp_path: Path, prompt_cache: Path) -> None:
    doc, _ = consent_run(
        tmp_path, prompt_cache, "--read-only", "create_note", "--not-read-only", "list_notes"
    )
    notes = [e["text"] for e in doc["events"] if e["kind"] == "note"]
    effects = next(n for n in notes if n.startswith("side effects ("))
    assert "list_notes" in effects and "create_note" not in effects, effects
    # create_note now counts as read-only: no consent needed, even without a terminal.
    assert not [e for e in doc["events"] if e["kind"] == "call_denied"]
    assert call_counts("notes", tmp_path).get("create_note", 0) >= 1
