"""`toolweave bench ...`: benchmark commands (argument parsing, workload files, printing).

    toolweave bench engine --json OUT [--model M] [--calls N] [--contexts 300,1000,3000]

`engine` measures the engine's cost table, then `constrained` against `grammar` on the
bundled assistant tools, both modes interleaved per query in one process, then the serial
step of toolweave's engine against llama-cpp-python's at every thread count and each
context length (`toolweave.adapters.bench.engine_steps`). The cost table itself is
measured by `toolweave.native.calibration`.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from toolweave.adapters.bench.engine_steps import (
    CONTEXTS,
    StepSweep,
    print_sweep,
    sweep_points,
    sweep_steps,
)
from toolweave.errors import ToolSpecError
from toolweave.eval.modebench import ModeComparison, compare_modes
from toolweave.models import MODELS, resolve_model
from toolweave.native.baselines.grammar import GrammarBaseline
from toolweave.native.calibration import CostTable, measure_costs
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.native.threads import default_threads
from toolweave.results import CallResult
from toolweave.toolspec import ToolSpec, load_tools_file

__all__ = ["BenchRequest", "assistant_requests", "bench_engine"]

#: The packaged workload: an assistant's 24 tools and a query for each (package data).
DATA = Path(__file__).resolve().parent / "data"
DEFAULT_TOOLS = DATA / "assistant_tools.json"
DEFAULT_QUERIES = DATA / "tool_queries.json"
#: Modes compared by `bench engine`, and the context window it uses (4 tools fit easily).
BENCH_MODES = ("constrained", "grammar")
BENCH_CONTEXT = 4096


@dataclass(frozen=True)
class BenchRequest:
    """One benchmark query with the tool subset its prompt shows."""

    query: str
    tool: str
    tools: tuple[ToolSpec, ...]


def assistant_requests(
    tools_file: Path, queries_file: Path, n: int, *, others: int = 3
) -> list[BenchRequest]:
    """The first `n` queries, each with its own tool plus `others` tools picked by a
    hash of the query (deterministic), in catalogue order so position gives no hint."""
    catalogue = load_tools_file(tools_file)
    by_name = {t.name: t for t in catalogue}
    try:
        items = json.loads(queries_file.read_text(encoding="utf-8"))
        pairs = [(str(q["query"]), str(q["tool"])) for q in items[:n]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolSpecError(
            None, f"queries file {queries_file} is not a list of {{'query', 'tool'}} objects: {exc}"
        ) from None
    requests = []
    for query, tool in pairs:
        if tool not in by_name:
            raise ToolSpecError(tool, f"named by {queries_file} but not in {tools_file}")
        rest = sorted(
            (t for t in catalogue if t.name != tool),
            key=lambda t: zlib.crc32(f"{query}\x00{t.name}".encode()),
        )
        chosen = {tool, *(t.name for t in rest[:others])}
        subset = tuple(t for t in catalogue if t.name in chosen)
        requests.append(BenchRequest(query, tool, subset))
    return requests


class _ModeRunner:
    """Runs one request in one mode; one `ToolCaller` per request (it owns sequence 0)."""

    def __init__(self, engine: Engine, max_tokens: int) -> None:
        self.engine = engine
        self.max_tokens = max_tokens
        self.baseline = GrammarBaseline(engine)
        self._current: tuple[BenchRequest, ToolCaller] | None = None

    def __call__(self, request: BenchRequest, mode: str) -> CallResult:
        caller = self._caller(request)
        if mode == "grammar":
            return self.baseline.call(caller, request.query)
        return caller.call(request.query, mode)

    def _caller(self, request: BenchRequest) -> ToolCaller:
        if self._current is None or self._current[0] is not request:
            self._current = (
                request,
                ToolCaller(self.engine, request.tools, max_tokens=self.max_tokens),
            )
        return self._current[1]

    def close(self) -> None:
        self.baseline.close()


def bench_engine(
    json_out: Annotated[Path, typer.Option("--json", help="Where to write the results.")],
    model: Annotated[
        str | None, typer.Option("--model", help=f"GGUF path or {', '.join(MODELS)}.")
    ] = None,
    calls: Annotated[int, typer.Option("--calls", min=1, help="Queries per mode.")] = 12,
    tools: Annotated[Path, typer.Option("--tools", help="Tool catalogue.")] = DEFAULT_TOOLS,
    queries: Annotated[Path, typer.Option("--queries", help="Queries file.")] = DEFAULT_QUERIES,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1)] = 256,
    contexts: Annotated[
        str,
        typer.Option("--contexts", help="Prompt lengths of the serial-step sweep; '' skips it."),
    ] = ",".join(map(str, CONTEXTS)),
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Sweep rounds.")] = 3,
    flash_attn: Annotated[
        str,
        typer.Option(
            "--flash-attn",
            help="The sweep's default engine: default (off), auto (llama.cpp's), on or off.",
        ),
    ] = "default",
) -> None:
    """Engine cost table, constrained vs grammar, serial steps vs llama-cpp-python."""
    lengths = _contexts(contexts)
    if flash_attn not in ("default", "auto", "on", "off"):
        raise typer.BadParameter(
            f"--flash-attn must be default, auto, on or off, got {flash_attn!r}"
        )
    requests = assistant_requests(tools, queries, calls)
    out = Console(highlight=False)
    path = resolve_model(model)
    with Engine(path, n_ctx=BENCH_CONTEXT) as engine, _progress() as progress:
        task = progress.add_task("cost table", total=1)
        table = measure_costs(engine)
        progress.update(task, advance=1)
        runner = _ModeRunner(engine, max_tokens)
        task = progress.add_task("calls", total=len(requests) * len(BENCH_MODES))
        try:
            comparison = compare_modes(
                requests,
                BENCH_MODES,
                runner,
                on_result=lambda i, mode, r: progress.update(task, advance=1),
            )
        finally:
            runner.close()
        sweep = None
        if lengths:
            total = sweep_points(lengths, rounds, default_threads())
            task = progress.add_task("serial steps", total=total)
            sweep = sweep_steps(
                path,
                contexts=lengths,
                rounds=rounds,
                flash_attn={"default": None, "auto": "auto", "on": True, "off": False}[flash_attn],
                on_point=lambda key: progress.update(task, advance=1),
            )
        report = _report(engine, table, comparison, requests, sweep)
    print_cost_table(table, out)
    print_comparison(comparison, out)
    if sweep is not None:
        print_sweep(sweep, out)
    json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    out.print(f"wrote {json_out}")


@contextmanager
def _progress() -> Iterator[Progress]:
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        yield progress


def _contexts(text: str) -> tuple[int, ...]:
    try:
        lengths = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        msg = f"--contexts takes comma-separated token counts, got {text!r}"
        raise typer.BadParameter(msg) from None
    if any(n < 16 for n in lengths):
        raise typer.BadParameter("--contexts: each length must be at least 16 tokens")
    return lengths


def _report(
    engine: Engine,
    table: CostTable,
    comparison: ModeComparison,
    requests: Sequence[BenchRequest],
    sweep: StepSweep | None,
) -> dict[str, Any]:
    return {
        "benchmark": "engine",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "model": {"name": engine.model_name, "path": str(engine.model_path)},
        "n_threads": engine.n_threads,
        "n_ctx": engine.n_ctx,
        "cost_table": table.to_dict(),
        "calls": {
            **comparison.to_dict(),
            "requests": [
                {"query": r.query, "tool": r.tool, "tools": [t.name for t in r.tools]}
                for r in requests
            ],
            "grammar_over_constrained": comparison.ratio("grammar", "constrained"),
        },
        "serial_steps": None if sweep is None else sweep.to_dict(),
    }


def print_cost_table(table: CostTable, console: Console) -> None:
    """Pass costs in ms and as multiples of a serial step, then prefill and state costs."""
    view = Table(
        title=f"{table.model} · {table.n_threads} threads · {table.context_tokens}-token prefix"
    )
    for header in ("k", "k sequences", "verify, all logits", "verify, last logits"):
        view.add_column(header, justify="right")
    for k in range(1, max(table.verify_last_ms) + 1):
        view.add_row(
            str(k),
            _ms_ratio(table.pass_ms(k, k, sequences=True), table.sequences_ratio(k)),
            _ms_ratio(table.pass_ms(k, k), table.verify_ratio(k)),
            _ms_ratio(table.pass_ms(k, 1), table.verify_ratio(k, last_only=True)),
        )
    console.print(view)
    console.print(
        f"serial step {table.serial_step_ms:.2f} ms · prefill {table.prefill_ms_per_token:.2f} "
        f"ms/token (x{table.prefill_ratio():.2f}) · state of {table.state_tokens} tokens "
        f"({table.state_bytes / 1e6:.1f} MB): get {table.state_get_ms:.1f} ms, set "
        f"{table.state_set_ms:.1f} ms, save {table.state_save_ms:.1f} ms, load "
        f"{table.state_load_ms:.1f} ms"
    )


def _ms_ratio(ms: float, ratio: float) -> str:
    return f"{ms:.1f} ms  x{ratio:.2f}"


def print_comparison(comparison: ModeComparison, console: Console) -> None:
    """One row per mode, then the ratio of ms per output token."""
    view = Table(title="tool calls (geometric means)")
    for header in ("mode", "ms/token", "ms/call", "tokens/call", "passes/call", "valid"):
        view.add_column(header, justify="right")
    for cost in comparison.costs.values():
        view.add_row(
            cost.mode,
            f"{cost.ms_per_token:.2f}",
            f"{cost.ms_per_call:.0f}",
            f"{cost.output_tokens:.1f}",
            f"{cost.forward_passes:.1f}",
            f"{cost.valid_rate:.0%}",
        )
    console.print(view)
    console.print(
        f"grammar / constrained ms per token: x{comparison.ratio('grammar', 'constrained'):.2f}"
        f" · same calls in {comparison.agreement:.0%} of queries"
    )
