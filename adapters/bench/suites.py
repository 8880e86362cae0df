"""`toolweave bench all`: every benchmark suite at a size for one sitting, then one report.

    toolweave bench all --out DIR [--suites engine,fastpath] [--model M] [--report-only]

Each suite runs as its own process, `toolweave bench NAME --json DIR/NAME.json --plot
DIR/NAME.png [size options]`, with its output in DIR/NAME.log, while a progress line
estimates the time left. Then DIR/REPORT.md gets, per suite, what it measures, its
summary figures as Markdown tables (read from its JSON) and its plot, plus the machine
and the date. A suite whose command does not exist, fails or times out is reported as
such in REPORT.md and makes the exit code 1; the other suites still run.
`--report-only` rebuilds REPORT.md from the JSON files already in DIR.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

from toolweave.adapters.bench.report import (
    Suite,
    SuiteOutcome,
    machine,
    now,
    render_engine,
    render_fastpath,
    render_pipeline,
    render_serving,
    render_session,
    write_report,
)
from toolweave.errors import ToolweaveError

__all__ = ["SUITES", "TimeLeft", "bench_all", "run_suites"]

#: The suites at sizes for one sitting: about 70 minutes in all on the 2-core machine.
SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "engine",
            "engine cost table",
            "The engine's cost table, which the fast path plans with (one pass of k tokens "
            "against a serial step, prefill per token, state save and restore), then our "
            "`constrained` decoder against llama-cpp-python's `grammar` mode on the same "
            "assistant-tool queries, interleaved.",
            ("--calls", "12"),
            240.0,  # the serial-step sweep on both engines, then the cost table and calls
            render_engine,
        ),
        Suite(
            "fastpath",
            "decoding modes on BFCL",
            "The five decoding modes on the same BFCL v4 calls (simple, multiple, parallel, "
            "parallel_multiple), interleaved per call: time until the tool can start, total "
            "time, decode passes, correctness, agreement with `constrained` and peak memory; "
            "then what SchemaFill forecasts add to `lossless` (the same calls without them).",
            ("--calls", "100"),
            1650.0,  # ~16 s per call in five modes and lossless with the other forecast setting
            render_fastpath,
        ),
        Suite(
            "serving",
            "serving agent requests",
            "Consecutive agent requests from BFCL multi-turn conversations (two agents taking "
            "turns, a sliding window of recent actions) served with no prompt reuse, with "
            "llama-cpp-python's RAM and disk caches, and with toolweave's `StateStore`; then a "
            "restart over the same checkpoint directory and idle release.",
            ("--steps", "20"),
            360.0,  # ~15 s per request in four configurations, plus probes
            render_serving,
        ),
        Suite(
            "pipeline",
            "plan-out pipeline",
            "One Planner -> executor -> Arbiter round per BFCL multi-turn test request in "
            "each configuration (ToolRAG baseline, PromptWeaver prefix states, ExSpec "
            "decoding, both, and both with jump-forward), interleaved: prefill and decode "
            "time, uncached tokens, end-to-end latency and Planner accuracy; the ratios "
            "between configurations; PromptWeaver's coverage and storage per budget of saved "
            "states; and the cost of ExSpec's n-gram table.",
            # Budget 160 keeps ~7 GB of prefix states: above the default cache limit.
            ("--requests", "24", "--cache-limit", "8GiB"),
            1500.0,  # 2-core Xeon: ~20 min with the prefix states on disk, more to build them
            render_pipeline,
        ),
        Suite(
            "session",
            "LangChain agent sessions",
            "Multi-turn `create_agent` sessions (BFCL multi-turn conversations run by BFCL's "
            "own classes, and conversations with the demo MCP servers over stdio) in six "
            "configurations interleaved per turn: langchain-community's `ChatLlamaCpp` at "
            "its best thread count, llama-cpp-python's grammar, `ChatToolweave` constrained "
            "without state reuse, `ChatToolweave` as shipped, the same without session "
            "drafts, and with read-only tools started early; in a warm process and in a new "
            "process over the states on disk: time to the first tool start, turn latency, "
            "prompt tokens prefilled, decode passes, the session drafts' acceptance, each "
            "also per source (BFCL, MCP).",
            # The demo-server tools and a forecast result need more than 2,048 tokens.
            ("--bfcl", "2", "--mcp", "2", "--turns", "3", "--max-tokens", "48", "--n-ctx", "4096"),
            660.0,  # 2-core EPYC: 10 min (warm and new-process phases, the thread sweep)
            render_session,
        ),
    )
}


# ---------------------------------------------------------------------- running
def _bench_commands() -> dict[str, set[str]]:
    """The `toolweave bench` subcommands and the options each accepts."""
    from typer import _click as click  # typer's groups are built on its own copy of click
    from typer.core import TyperGroup

    from toolweave.adapters.cli.app import app  # the registrations live there

    root = typer.main.get_command(app)
    ctx = click.Context(root)
    bench = root.get_command(ctx, "bench") if isinstance(root, TyperGroup) else None
    if not isinstance(bench, TyperGroup):
        return {}
    # Through the group, which imports each (lazily registered) command.
    bench_ctx = click.Context(bench, parent=ctx)
    commands = {n: bench.get_command(bench_ctx, n) for n in bench.list_commands(bench_ctx)}
    return {
        name: {opt for p in cmd.params for opt in p.opts} | {"--json"}
        for name, cmd in commands.items()
        if name != "all" and cmd is not None
    }


def _command(suite: Suite, out: Path, accepted: set[str], model: str | None) -> list[str]:
    args = ["bench", suite.name, "--json", str(out / f"{suite.name}.json")]
    if "--plot" in accepted:
        args += ["--plot", str(out / f"{suite.name}.png")]
    if model is not None:
        args += ["--model", model]
    return [*args, *suite.options]


def _shown(args: Sequence[str], out: Path) -> str:
    return "toolweave " + shlex.join(a.replace(f"{out}{os.sep}", "") for a in args)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _run_one(
    suite: Suite, args: list[str], out: Path, timeout: float, tick: Callable[[float], None]
) -> SuiteOutcome:
    log = out / f"{suite.name}.log"
    shown = _shown(args, out)
    t0 = time.perf_counter()
    with log.open("w", encoding="utf-8") as fh:
        fh.write(f"$ {shown}\n")
        fh.flush()
        env = {**os.environ, "COLUMNS": "120"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolweave.adapters.cli", *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        while proc.poll() is None:
            elapsed = time.perf_counter() - t0
            if elapsed > timeout:
                os.killpg(proc.pid, signal.SIGKILL)  # the suite's own process group only
                proc.wait()
                return SuiteOutcome(
                    suite.name, "timeout", elapsed, shown, f"stopped after {elapsed:.0f} s"
                )
            tick(elapsed)
            time.sleep(0.5)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        return SuiteOutcome(
            suite.name, "failed", seconds, shown, f"exit code {proc.returncode}\n{_tail(log)}"
        )
    return SuiteOutcome(suite.name, "ok", seconds, shown)


class TimeLeft:
    """Time left from the suites' priors, rescaled by how long finished suites took
    against theirs (clamped to x0.5..x3: one odd suite should not swing it wildly)."""

    def __init__(self, suites: Sequence[Suite]) -> None:
        self.priors = [s.estimate_s for s in suites]
        self.spent = 0.0
        self.expected = 0.0

    def scale(self) -> float:
        return min(3.0, max(0.5, self.spent / self.expected)) if self.expected else 1.0

    def finished(self, index: int, seconds: float) -> None:
        self.spent += seconds
        self.expected += self.priors[index]

    def seconds(self, index: int, elapsed: float) -> float:
        """Seconds left while suite `index` has run for `elapsed` seconds."""
        current = max(self.priors[index] * self.scale() - elapsed, 5.0)
        return current + sum(self.priors[index + 1 :]) * self.scale()

    def progress(self, index: int, elapsed: float) -> float:
        """Seconds of the priors done (never quite all of the running suite's)."""
        fraction = min(elapsed / (self.priors[index] * self.scale()), 0.95)
        return sum(self.priors[:index]) + fraction * self.priors[index]


def _run_suite(
    suite: Suite,
    accepted: set[str] | None,
    out: Path,
    model: str | None,
    tick: Callable[[float], None],
) -> SuiteOutcome:
    """Run `suite` unless its command or one of its options does not exist."""
    if accepted is None:
        return SuiteOutcome(
            suite.name, "missing", message=f"`toolweave bench {suite.name}` does not exist"
        )
    unknown = [o for o in suite.options if o.startswith("--") and o not in accepted]
    if unknown:
        return SuiteOutcome(
            suite.name,
            "failed",
            message=f"`toolweave bench {suite.name}` has no option {', '.join(unknown)}",
        )
    args = _command(suite, out, accepted, model)
    return _run_one(suite, args, out, 3 * suite.estimate_s + 120, tick)


def run_suites(
    suites: Sequence[Suite],
    out: Path,
    *,
    model: str | None = None,
    console: Console | None = None,
) -> list[SuiteOutcome]:
    """Run `suites` one after another, each in its own process, showing the time left."""
    console = console or Console(stderr=True, highlight=False)
    commands = _bench_commands()
    eta = TimeLeft(suites)
    outcomes: list[SuiteOutcome] = []
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn())
    with Progress(*columns, TextColumn("{task.fields[left]}"), console=console) as progress:
        task = progress.add_task("", total=sum(eta.priors), left="")
        for i, suite in enumerate(suites):
            progress.update(task, description=f"{suite.name} ({i + 1}/{len(suites)})")

            def tick(elapsed: float, i: int = i) -> None:
                left = f"~{max(1, round(eta.seconds(i, elapsed) / 60))} min left"
                progress.update(task, completed=eta.progress(i, elapsed), left=left)

            tick(0.0)
            outcome = _run_suite(suite, commands.get(suite.name), out, model, tick)
            if outcome.status == "ok":
                eta.finished(i, outcome.seconds)
            outcomes.append(outcome)
            first_line = outcome.message.partition("\n")[0]
            progress.console.print(
                f"{suite.name}: {outcome.status} in {outcome.seconds:.0f} s"
                + (f" ({first_line})" if first_line else "")
            )
            progress.update(task, completed=sum(eta.priors[: i + 1]))
        progress.update(task, description="done", left="")
    return outcomes


def _record_run(
    path: Path, run: Mapping[str, Any], outcomes: Mapping[str, SuiteOutcome]
) -> dict[str, SuiteOutcome]:
    """RUN.json: the date, the machine and every suite's outcome (with the machine it ran
    on), for --report-only; suites of earlier runs into the same directory are kept.
    Returns every recorded outcome."""
    kept: dict[str, SuiteOutcome] = {}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        previous = json.loads(path.read_text(encoding="utf-8"))
        for name, o in dict(previous["suites"]).items():
            if name in SUITES:
                kept[name] = SuiteOutcome(**{"machine": previous.get("machine"), **o})
    kept.update({name: replace(o, machine=dict(run["machine"])) for name, o in outcomes.items()})
    doc = {**run, "suites": {name: asdict(o) for name, o in kept.items()}}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return kept


def _select(names: str | None) -> list[Suite]:
    if names is None:
        return list(SUITES.values())
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in SUITES]
    if unknown or not wanted:
        raise ToolweaveError(
            f"unknown suite {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"choose from {', '.join(SUITES)}"
        )
    return [SUITES[n] for n in dict.fromkeys(wanted)]


# ---------------------------------------------------------------------- the command
def bench_all(
    out: Annotated[Path, typer.Option("--out", help="Directory for JSON, PNG, logs, REPORT.md.")],
    suites: Annotated[
        str | None,
        typer.Option("--suites", help=f"Comma-separated subset of {', '.join(SUITES)}."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="GGUF path or model name for every suite.")
    ] = None,
    report_only: Annotated[
        bool, typer.Option("--report-only", help="Rebuild REPORT.md from DIR's JSON files.")
    ] = False,
) -> None:
    """Run every benchmark suite (about 70 min on 2 cores) and write DIR/REPORT.md."""
    chosen = _select(suites)
    out.mkdir(parents=True, exist_ok=True)
    run_file = out / "RUN.json"
    console = Console(highlight=False)
    if report_only:
        try:
            previous = json.loads(run_file.read_text(encoding="utf-8"))
            run = {"date": previous["date"], "machine": previous["machine"]}
            outcomes = {
                name: SuiteOutcome(**{"machine": previous["machine"], **o})
                for name, o in previous["suites"].items()
            }
        except (OSError, ValueError, KeyError, TypeError):  # no record of a run: JSONs only
            run, outcomes = None, {}
    else:
        run = {"date": now(), "machine": machine()}
        total = sum(s.estimate_s for s in chosen) / 60
        names = ", ".join(s.name for s in chosen)
        console.print(f"running {names} (about {total:.0f} min) in {out}")
        outcomes = {o.name: o for o in run_suites(chosen, out, model=model)}
        outcomes = _record_run(run_file, run, outcomes)
        # the report covers every suite recorded in the directory, not only this run's
        chosen = [s for name, s in SUITES.items() if name in outcomes]
    path, statuses = write_report(out, chosen, outcomes, run)
    bad = {name: status for name, status in statuses.items() if status != "ok"}
    console.print(f"wrote {path}")
    if bad:
        console.print(
            "not ok: " + ", ".join(f"{name} ({status})" for name, status in bad.items()),
            style="red",
        )
        raise typer.Exit(1)
