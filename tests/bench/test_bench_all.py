"""`toolweave bench all`: the report from real JSON layouts, and every way a suite can fail.

No benchmark runs here: the fixtures under tests/data/bench_*.json are trimmed copies of
the committed docs/bench outputs (pipeline: the layout its command promises), and the
failing suites fail before loading a model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolweave.adapters.bench.report import Suite, md_table, write_report
from toolweave.adapters.bench.suites import SUITES, TimeLeft, run_suites

DATA = Path(__file__).resolve().parents[1] / "data"
NAMES = ("engine", "fastpath", "serving", "pipeline", "session")


def toolweave(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolweave.adapters.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A directory as a finished run leaves it (one plot is enough to check embedding)."""
    for name in NAMES:
        shutil.copy(DATA / f"bench_{name}.json", tmp_path / f"{name}.json")
    (tmp_path / "fastpath.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return tmp_path


def section(report: str, name: str) -> str:
    start = report.index(f"\n## {name}: ")
    end = report.find("\n## ", start + 1)
    return report[start : end if end > 0 else None]


def test_md_table() -> None:
    table = md_table(["a", "b"], [[1, 0.123456], ["x|y", None], [True, 1234.5]])
    assert table.splitlines() == [
        "| a | b |",
        "|---|---|",
        "| 1 | 0.12 |",
        "| x\\|y | - |",
        "| yes | 1234 |",
    ]


def test_report_has_each_suites_tables_plot_and_the_machine(results: Path) -> None:
    path, statuses = write_report(results, list(SUITES.values()))
    assert statuses == dict.fromkeys(NAMES, "ok")
    report = path.read_text(encoding="utf-8")
    assert "| CPU cores | " in report and "| llama-cpp-python | " in report
    assert "SmolLM2-135M-Instruct.Q4_1" in section(report, "serving")

    engine = section(report, "engine")
    assert "| 4 | x2.69 | x2.68 | x2.28 |" in engine
    assert "| grammar | 13.9 | 719 | 74.4 | 75.4 | 92% |" in engine
    assert "(12 queries per mode" in engine
    assert "(no plot: engine.png missing)" in engine

    fastpath = section(report, "fastpath")
    assert "| lossless | 215 | 668 | x1.83 | x1.74 | 68.4 | 9% | 100% |" in fastpath
    assert "on 100/100 calls" in fastpath
    assert "![fastpath](fastpath.png)" in fastpath

    serving = section(report, "serving")
    assert "| toolweave | 144 | 1.00 | 528 | x4.82 | 460 | 460 | 20/24 |" in serving
    assert "found 21 checkpoints on disk" in serving
    assert "232 MB loaded, 179 MB released" in serving

    pipeline = section(report, "pipeline")
    assert "| config | latency_ms | planner_ms | prefill_tokens | tool_recall |" in pipeline
    assert "| toolweave | 3111 | 2016 | 402 | 0.71 |" in pipeline
    assert "| prefill_tokens | 4.55 |" in pipeline
    assert "| budget | coverage | coverage_train | storage_mb |" in pipeline
    assert "| 16 | 81% | 90% | 221 |" in pipeline
    assert "312 entries" in pipeline

    session = section(report, "session")
    assert "2 sessions of 3 turns on SmolLM2-135M-Instruct.Q4_1.gguf" in session
    assert "| toolweave | 6 | 8466 | 9865 | 1297 | 45.8 | 3/6 | 12/16 | 0 |" in session
    assert "| new_process | session_drafts_later_first_tool | x1.12 |" in session


def test_a_results_file_with_another_layout_is_reported_not_raised(results: Path) -> None:
    doc = json.loads((results / "serving.json").read_text())
    del doc["summary"]["toolweave"]["disk_mb"]
    (results / "serving.json").write_text(json.dumps(doc))
    (results / "engine.json").write_text("{not json")
    path, statuses = write_report(results, list(SUITES.values()))
    assert statuses == {
        "engine": "bad results",
        "fastpath": "ok",
        "serving": "bad results",
        "pipeline": "ok",
        "session": "ok",
    }
    report = path.read_text()
    assert "serving.json does not have the expected layout (KeyError: 'disk_mb')" in report
    assert "| lossless | 215 |" in report  # the other suites are still there


def test_report_only_rebuilds_from_json_and_flags_missing_results(results: Path) -> None:
    (results / "pipeline.json").unlink()
    proc = toolweave("bench", "all", "--out", results, "--report-only")
    assert proc.returncode == 1, proc.stderr
    assert "pipeline (no results)" in proc.stdout
    report = (results / "REPORT.md").read_text()
    assert "| pipeline | no results | - |" in report
    assert "**no results**: pipeline.json does not exist" in report
    assert "| engine | ok | - |" in report

    proc = toolweave("bench", "all", "--out", results, "--report-only", "--suites", "fastpath")
    assert proc.returncode == 0, proc.stderr
    report = (results / "REPORT.md").read_text()
    assert "## fastpath: " in report and "## engine: " not in report


def test_unknown_suite_is_a_usage_error(tmp_path: Path) -> None:
    proc = toolweave("bench", "all", "--out", tmp_path, "--suites", "engine,nosuch")
    assert proc.returncode == 2
    assert proc.stderr.startswith("toolweave: error: unknown suite 'nosuch'; choose from engine")
    assert not (tmp_path / "REPORT.md").exists()


def test_missing_and_failing_suites_are_reported_and_the_others_still_run(
    tmp_path: Path,
) -> None:
    missing = Suite("nosuch", "a suite", "No command.", (), 1.0, SUITES["engine"].render)
    # A real suite with a size its command rejects: it fails before loading a model.
    failing = Suite("engine", "t", "Rejected size.", ("--calls", "0"), 1.0, SUITES["engine"].render)
    unknown_option = Suite(
        "fastpath", "t", "Old command.", ("--requests", "3"), 1.0, SUITES["fastpath"].render
    )
    outcomes = run_suites([missing, failing, unknown_option], tmp_path)
    assert [o.status for o in outcomes] == ["missing", "failed", "failed"]
    assert outcomes[1].command.startswith("toolweave bench engine --json engine.json --calls 0")
    assert "--plot" not in outcomes[1].command  # `bench engine` has no --plot
    assert "exit code 2" in outcomes[1].message and "--calls" in outcomes[1].message
    assert "has no option --requests" in outcomes[2].message
    assert "toolweave: error:" in (tmp_path / "engine.log").read_text()

    path, statuses = write_report(
        tmp_path, [missing, failing, unknown_option], {o.name: o for o in outcomes}
    )
    assert statuses == {"nosuch": "missing", "engine": "failed", "fastpath": "failed"}
    report = path.read_text()
    assert "**missing**: `toolweave bench nosuch` does not exist" in report
    assert "Last lines of `engine.log`:" in report
    assert "**failed**: `toolweave bench fastpath` has no option --requests" in report


def test_time_left_rescales_by_the_finished_suites() -> None:
    suites = [SUITES["engine"], SUITES["fastpath"]]
    eta = TimeLeft(suites)
    prior = SUITES["engine"].estimate_s + SUITES["fastpath"].estimate_s
    assert eta.seconds(0, 0.0) == pytest.approx(prior)
    assert eta.progress(0, 10 * prior) < SUITES["engine"].estimate_s  # never done early
    eta.finished(0, 2 * SUITES["engine"].estimate_s)  # took twice its prior
    assert eta.seconds(1, 0.0) == pytest.approx(2 * SUITES["fastpath"].estimate_s)
    assert eta.progress(1, 0.0) == pytest.approx(SUITES["engine"].estimate_s)


def test_a_subset_run_keeps_the_earlier_suites_and_the_cpu_each_ran_on(results: Path) -> None:
    from toolweave.adapters.bench.report import SuiteOutcome
    from toolweave.adapters.bench.suites import _record_run

    xeon = {"cpu": "Xeon", "cpu_count": 2, "llama_cpp_python": "0.3.36", "python": "3.11"}
    earlier = {n: {"name": n, "status": "ok", "seconds": 1.0} for n in NAMES}
    run_file = results / "RUN.json"
    run_file.write_text(json.dumps({"date": "d0", "machine": xeon, "suites": earlier}))
    epyc = {**xeon, "cpu": "EPYC", "platform": "p"}
    kept = _record_run(run_file, {"date": "d1", "machine": epyc}, {
        "session": SuiteOutcome("session", "ok", 2.0)
    })  # fmt: skip
    assert list(kept) == list(NAMES)
    assert kept["session"].machine == epyc and kept["engine"].machine == xeon
    doc = json.loads(run_file.read_text())
    assert doc["machine"] == epyc and doc["suites"]["fastpath"]["machine"] == xeon
    path, _ = write_report(
        results, [SUITES[n] for n in NAMES], kept, {"date": "d1", "machine": epyc}
    )
    report = path.read_text()
    assert "| engine | ok | 1 s | Xeon, 2 cores |" in report
    assert "| session | ok | 2 s | EPYC, 2 cores |" in report
