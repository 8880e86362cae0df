"""REPORT.md of `toolweave bench all`: per suite what it measures, its figures, its plot.

Figures are read from each suite's JSON (the layouts written by `toolweave bench
engine`, `fastpath`, `serving`, `pipeline` and `session`) and shown as Markdown tables. A JSON that
is missing or does not have the expected layout is reported in its section, never
raised: the other suites' sections are still written.

The per-suite sections are written by `toolweave.adapters.bench.report_render`; this
module keeps the suites, their outcomes, the machine and the report itself, and
re-exports `md_table` and the `render_*` functions.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolweave.adapters.bench.report_render import (
    Doc,
    _model,
    md_table,
    render_engine,
    render_fastpath,
    render_pipeline,
    render_serving,
    render_session,
)

__all__ = [
    "Suite",
    "SuiteOutcome",
    "machine",
    "md_table",
    "now",
    "render_engine",
    "render_fastpath",
    "render_pipeline",
    "render_serving",
    "render_session",
    "write_report",
]


@dataclass(frozen=True)
class Suite:
    """One benchmark suite: its command's size options and a prior of its run time.

    ``estimate_s`` comes from the committed full-size runs in docs/bench, scaled to
    ``options``, on the 2-core reference machine.
    """

    name: str
    title: str
    about: str
    options: tuple[str, ...]
    estimate_s: float
    render: Callable[[Doc], list[str]]


@dataclass(frozen=True)
class SuiteOutcome:
    """What became of one suite: ``ok``, ``failed``, ``timeout``, ``missing`` (no such
    command), ``no results`` or ``bad results`` (its JSON is absent or unreadable)."""

    name: str
    status: str
    seconds: float = 0.0
    command: str = ""
    message: str = ""
    #: The machine the suite ran on (`machine()`); None in records from before it was kept.
    machine: dict[str, Any] | None = None


# ---------------------------------------------------------------------- the report
def machine() -> dict[str, Any]:
    """The CPU, the core count and the versions that matter for the figures."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            names = (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
            cpu = next(names, cpu)
    except OSError:
        pass
    try:
        llama = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        llama = "not installed"
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "llama_cpp_python": llama,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _section(
    suite: Suite, outcome: SuiteOutcome | None, out: Path
) -> tuple[list[str], str, str | None]:
    """The suite's Markdown lines, its final status (results are checked here) and the
    model its results are for."""
    lines = [f"## {suite.name}: {suite.title}", "", suite.about, ""]
    if outcome and outcome.command:
        lines += [f"Command: `{outcome.command}`", ""]
    if outcome is not None and outcome.status != "ok":
        head, _, rest = outcome.message.partition("\n")
        after = f" after {outcome.seconds:.0f} s" if outcome.seconds else ""
        lines.append(f"**{outcome.status}**{after}: {head}")
        if rest.strip():
            lines += ["", f"Last lines of `{suite.name}.log`:", "", "```", rest.strip(), "```"]
        return lines, outcome.status, None
    path = out / f"{suite.name}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        model = _model(doc)
        blocks = [
            f"Model: {model}; run {doc.get('date', 'at an unknown date')}.",
            *suite.render(doc),
        ]
    except FileNotFoundError:
        status, message = "no results", f"{path.name} does not exist"
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        status = "bad results"
        message = f"{path.name} does not have the expected layout ({type(exc).__name__}: {exc})"
    else:
        lines += [b + "\n" for b in blocks]
        png = out / f"{suite.name}.png"
        lines.append(
            f"![{suite.name}]({png.name})" if png.exists() else f"(no plot: {png.name} missing)"
        )
        return lines, "ok", model
    return [*lines, f"**{status}**: {message}"], status, None


def write_report(
    out: Path,
    suites: Sequence[Suite],
    outcomes: Mapping[str, SuiteOutcome] | None = None,
    run: Mapping[str, Any] | None = None,
) -> tuple[Path, dict[str, str]]:
    """Write DIR/REPORT.md for `suites`; return its path and each suite's final status.

    `outcomes` are the runs' results (without them, each suite's JSON must exist);
    `run` holds the run's date and machine (default: now, this machine).
    """
    outcomes = outcomes or {}
    run = run or {"date": now(), "machine": machine()}
    sections: list[str] = []
    statuses: dict[str, str] = {}
    models: dict[str, None] = {}
    for suite in suites:
        lines, statuses[suite.name], model = _section(suite, outcomes.get(suite.name), out)
        sections.append("\n".join(lines))
        if model:
            models[model] = None
    m = run["machine"]
    overview = md_table(
        ["suite", "status", "time", "CPU"],
        [
            [
                s.name,
                statuses[s.name],
                f"{outcomes[s.name].seconds:.0f} s" if s.name in outcomes else "-",
                _cpu(outcomes[s.name].machine if s.name in outcomes else None, m),
            ]
            for s in suites
        ],
    )
    machine_table = md_table(
        ["", ""],
        [
            ["CPU", m["cpu"]],
            ["CPU cores", m["cpu_count"]],
            ["model", ", ".join(models) or "-"],
            ["llama-cpp-python", m["llama_cpp_python"]],
            ["Python", m["python"]],
            ["platform", m["platform"]],
        ],
    )
    head = [
        "# toolweave benchmarks",
        "",
        f"Run on {run['date']} (UTC); report written {now()}.",
        "",
        overview,
        "",
        "## Machine",
        "",
        "The latest run's machine (each suite's CPU is in the table above):",
        "",
        machine_table,
        "",
    ]
    path = out / "REPORT.md"
    path.write_text("\n".join(head) + "\n" + "\n\n".join(sections) + "\n", encoding="utf-8")
    return path, statuses


def _cpu(suite_machine: Mapping[str, Any] | None, run_machine: Mapping[str, Any]) -> str:
    """The CPU a suite ran on: suites kept from earlier runs may have run on another one."""
    m = suite_machine or run_machine
    return f"{m.get('cpu', '?')}, {m.get('cpu_count', '?')} cores"


def now() -> str:
    """The current UTC time, as the suites date their JSON."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
