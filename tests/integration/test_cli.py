"""The `toolweave` command line, run as a subprocess the way users and benchmarks run it."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from toolweave.toolspec import load_tools_file

ROOT = Path(__file__).resolve().parents[2]
ASSISTANT_TOOLS = ROOT / "examples" / "tools" / "assistant_tools.json"
THREE = ("get_current_weather", "send_email", "start_timer")


def toolweave(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolweave.adapters.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    catalogue: list[dict[str, Any]] = json.loads(ASSISTANT_TOOLS.read_text(encoding="utf-8"))
    path = tmp_path_factory.mktemp("cli") / "three_tools.json"
    path.write_text(json.dumps([t for t in catalogue if t["name"] in THREE]), encoding="utf-8")
    return path


def test_call_json_prints_a_valid_call(tools_file: Path) -> None:
    proc = toolweave(
        "call", "--tools", tools_file, "--query", "What's the weather in Paris?", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"calls", "provisional", "stats"} <= set(out)
    assert {
        "forward_passes",
        "decode_passes",
        "prefill_tokens",
        "time_to_tool_ms",
        "total_ms",
    } <= set(out["stats"])
    assert out["stats"]["forward_passes"] >= out["stats"]["decode_passes"] > 0
    assert len(out["calls"]) == 1
    call = out["calls"][0]
    specs = {t.name: t for t in load_tools_file(tools_file)}
    assert call["name"] in specs
    specs[call["name"]].validate_call(call["arguments"])


def test_call_samples_with_a_seed(tools_file: Path) -> None:
    args = ("call", "--tools", tools_file, "--query", "What's the weather in Paris?", "--json")
    sampled = [*args, "--temperature", "1.5", "--top-k", "8", "--seed", "3"]
    first, again = toolweave(*sampled), toolweave(*sampled)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    assert a["calls"] == b["calls"] and len(a["calls"]) == 1  # same seed, same call
    specs = {t.name: t for t in load_tools_file(tools_file)}
    specs[a["calls"][0]["name"]].validate_call(a["calls"][0]["arguments"])


def test_call_prints_call_and_stats(tools_file: Path) -> None:
    proc = toolweave(
        "call", "--tools", tools_file, "--query", "Start a timer for 5 minutes", "--mode", "jump"
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("prompt cache: ")  # saved prompt states are on by default
    assert lines[1].startswith("call ")
    assert lines[-1].startswith("jump: ") and "passes" in lines[-1]


def bad_inputs(tmp: Path, tools_file: Path) -> dict[str, list[str | Path]]:
    invalid_json = tmp / "invalid.json"
    invalid_json.write_text("[{", encoding="utf-8")
    bad_schema = tmp / "bad_schema.json"
    bad_schema.write_text(
        json.dumps([{"name": "f", "parameters": {"type": "object", "properties": {"a": 3}}}]),
        encoding="utf-8",
    )
    not_gguf = tmp / "model.gguf"
    not_gguf.write_text("not a model", encoding="utf-8")
    ok: list[str | Path] = ["--tools", tools_file, "--query", "hi"]
    return {
        "missing tools file": ["call", "--tools", tmp / "absent.json", "--query", "hi"],
        "invalid tools JSON": ["call", "--tools", invalid_json, "--query", "hi"],
        "invalid schema": ["call", "--tools", bad_schema, "--query", "hi"],
        "unknown mode": ["call", *ok, "--mode", "warp"],
        "missing model": ["call", *ok, "--model", tmp / "absent.gguf"],
        "model not GGUF": ["call", *ok, "--model", not_gguf],
        "model is a directory": ["call", *ok, "--model", tmp],
        "unknown format": ["call", *ok, "--format", "xml"],
        "negative max calls": ["call", *ok, "--max-calls", "-1"],
        "top_p above 1": ["call", *ok, "--temperature", "0.7", "--top-p", "2"],
        "missing query": ["call", "--tools", tools_file],
        "unknown command": ["frobnicate"],
    }


def test_bad_inputs_exit_2_with_one_line(tmp_path: Path, tools_file: Path) -> None:
    failures = []
    cases = bad_inputs(tmp_path, tools_file)
    with ThreadPoolExecutor(4) as pool:  # separate processes: none waits for another
        runs = list(pool.map(lambda a: toolweave(*a, timeout=60), cases.values()))
    for case, proc in zip(cases, runs, strict=True):
        lines = proc.stderr.strip().splitlines()
        ok = (
            proc.returncode == 2
            and len(lines) == 1
            and lines[0].startswith("toolweave: error: ")
            and "Traceback" not in proc.stderr
        )
        if not ok:
            failures.append(f"{case}: rc={proc.returncode} stderr={proc.stderr!r}")
    assert not failures, "\n".join(failures)


def test_help_without_command_succeeds() -> None:
    proc = toolweave()
    assert proc.returncode == 0
    assert "call" in proc.stdout and "bench" in proc.stdout


def test_bench_fastpath_writes_report_and_plot(tmp_path: Path) -> None:
    out, png = tmp_path / "fastpath.json", tmp_path / "fastpath.png"
    proc = toolweave("bench", "fastpath", "--json", out, "--plot", png, "--calls", "1", timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["calls"] == 1
    assert set(report["modes"]) == {"grammar", "constrained", "jump", "fast", "lossless"}
    assert report["lossless_equals_jump"] == 1
    assert png.stat().st_size > 0


def test_bench_fastpath_runs_a_subset_of_modes(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    args = ("bench", "fastpath", "--json", out, "--calls", "1", "--modes", "lossless,jump")
    proc = toolweave(*args, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert list(report["modes"]) == ["jump", "lossless"]  # in the order of MODES
    assert report["lossless_equals_jump"] + len(report["lossless_differs"]) == 1
    assert report["modes"]["jump"]["speedup_time_to_tool_vs_constrained"] is None
    assert "forecast" not in report and "by_arguments" not in report

    bad = toolweave("bench", "fastpath", "--json", out, "--modes", "jump,turbo")
    assert bad.returncode == 2 and "unknown mode turbo" in bad.stderr


def test_version_names_both_packages_without_loading_the_engine() -> None:
    from importlib.metadata import version

    proc = toolweave("--version", timeout=30)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line == (
        f"toolweave {version('toolweave')} (llama-cpp-python {version('llama-cpp-python')})"
    )
    probe = "import sys; from toolweave.adapters.cli.app import version_line; version_line()"
    probe += "; assert 'llama_cpp' not in sys.modules"
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=30)
