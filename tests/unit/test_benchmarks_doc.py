"""docs/benchmarks.md is generated from the benchmark JSONs: the real report renders,
its figures are the JSONs' values, and a missing or malformed file is one clear error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from toolweave.adapters.bench.benchmarks_doc import (
    BenchmarkDocError,
    headline_rows,
    headline_table,
    main,
    render,
)

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "bench" / "report"
FILES = (
    "RUN.json",
    "engine.json",
    "fastpath.json",
    "serving.json",
    "pipeline.json",
    "session.json",
)


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # commands on the page name paths from the repository root


def _json(name: str) -> dict:
    return json.loads((REPORT / name).read_text(encoding="utf-8"))


@pytest.fixture
def report_copy(tmp_path: Path) -> Path:
    out = tmp_path / "docs" / "bench" / "report"
    out.mkdir(parents=True)
    for name in FILES:
        shutil.copy(REPORT / name, out / name)
    return out


def test_the_real_report_renders_every_suite() -> None:
    text = render(REPORT)
    assert text.startswith("# Benchmarks\n")
    for suite in ("engine", "fastpath", "serving", "pipeline", "session"):
        assert f"## {suite}: " in text
    assert "toolweave bench all --out docs/bench/report" in text
    assert "no GPU" in text
    # plots are linked relative to docs/, where the page lives
    assert "![fastpath](bench/report/fastpath.png)" in text


def test_figures_equal_the_json_values() -> None:
    text = render(REPORT)
    fastpath = _json("fastpath.json")
    ttt = fastpath["modes"]["lossless"]["time_to_tool_ms"]
    assert f"`lossless` {ttt:.0f} ms" in text
    assert f"{fastpath['lossless_equals_jump']}/{fastpath['calls']}" in text
    pipeline = _json("pipeline.json")
    assert f"(x{pipeline['ratios']['e2e_both']:.2f})" in text
    step = _json("engine.json")["cost_table"]["serial_step_ms"]
    assert f"serial step {step:.1f} ms" in text
    serving = _json("serving.json")["summary"]["toolweave"]
    assert f"`StateStore` {serving['step_ms_geomean']:.0f} ms" in text


def test_headline_rows_are_in_the_page_and_cover_every_suite() -> None:
    rows = headline_rows(REPORT)
    assert [r[0] for r in rows] == ["engine", "fastpath", "serving", "pipeline", "session"]
    text = render(REPORT)
    for line in headline_table(REPORT).splitlines()[2:]:
        assert line in text


def test_a_missing_file_is_one_clear_error(report_copy: Path) -> None:
    (report_copy / "serving.json").unlink()
    with pytest.raises(BenchmarkDocError, match=r"serving\.json: file not found"):
        render(report_copy)


def test_malformed_json_names_the_file(report_copy: Path) -> None:
    (report_copy / "engine.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BenchmarkDocError, match=r"engine\.json: not readable JSON"):
        render(report_copy)


def test_an_unexpected_layout_names_the_file(report_copy: Path) -> None:
    doc = _json("pipeline.json")
    del doc["ratios"]
    (report_copy / "pipeline.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(BenchmarkDocError, match=r"unexpected layout"):
        render(report_copy)


def test_main_writes_the_page_or_prints_one_error_line(
    report_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = report_copy.parent.parent / "benchmarks.md"
    assert main([str(report_copy), str(page)]) == 0
    assert page.read_text(encoding="utf-8") == render(report_copy, page.parent)
    (report_copy / "RUN.json").unlink()
    assert main([str(report_copy), str(page)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "RUN.json" in err and "Traceback" not in err


def test_the_committed_page_is_up_to_date() -> None:
    page = ROOT / "docs" / "benchmarks.md"
    assert page.read_text(encoding="utf-8") == render(REPORT, page.parent)


def test_the_readme_results_table_is_the_headline_rows() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for line in headline_table(REPORT).splitlines():
        assert line in readme


def test_the_session_headline_gives_gemmas_ratios_when_its_run_is_kept(
    report_copy: Path,
) -> None:
    def session_row(report: Path) -> str:
        return next(r[2] for r in headline_rows(report) if r[0] == "session")

    assert "Gemma" not in session_row(report_copy)  # no Gemma run beside this report
    gemma = json.loads((REPORT.parent / "session_bfcl_mcp_gemma3.json").read_text(encoding="utf-8"))
    (report_copy.parent / "session_bfcl_mcp_gemma3.json").write_text(json.dumps(gemma))
    new = gemma["ratios"]["new_process"]["first_tool_vs_chat_llama_cpp"]
    warm = gemma["ratios"]["warm"]["first_tool_vs_chat_llama_cpp"]
    assert session_row(report_copy).endswith(f"; Gemma 3 270M x{new:.2f} (warm x{warm:.2f})")
