"""`toolweave bench fastpath`: the five decoding modes on BFCL v4, interleaved in one process.

    toolweave bench fastpath --json OUT [--plot OUT.png] [--calls N] [--model M] [--modes M,..]

Cases are sampled uniformly over the number of ground-truth arguments from simple,
multiple, parallel and parallel_multiple. Every case runs in every mode back to back (the
order alternates per case); times are measured from the end of the prompt prefill, which
all modes share. Reported per mode: geometric means of time to tool start and total time,
decode passes per call, BFCL-style correctness, agreement with `constrained`, peak
resident memory (VmHWM, reset before each call), and the phase breakdown of `fast`;
speedups are ratios of geometric means. `lossless` also runs with SchemaFill forecasts
switched the other way from its default (on only on the exact engine), so what they add
(speedup, passes, acceptance) is reported per group of categories. `--modes` runs a
subset (e.g. ``constrained,jump,lossless``: the equality check of `lossless` against
`jump` without the slow baseline); the summaries that need a missing mode are left out.
`fastpath_summary` computes the summaries.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from toolweave.adapters.bench.fastpath_summary import (
    FORECAST_OFF,
    FORECAST_ON,
    ceiling,
    memory_summary,
    summarize,
)
from toolweave.adapters.bench.plotting import pyplot
from toolweave.eval.bfcl import BfclCase, sample_cases
from toolweave.models import MODELS, resolve_model
from toolweave.modes import MODES
from toolweave.native.baselines.grammar import GrammarBaseline
from toolweave.native.calibration import engine_costs
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.native.states.idle import peak_resident_bytes, reset_peak_resident, resident_bytes
from toolweave.results import CallResult

__all__ = ["CATEGORIES", "bench_fastpath"]

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
#: `lossless` with forecasting switched the other way from its default, run beside the
#: modes; the summary reads both settings under `FORECAST_ON` and `FORECAST_OFF`.
OTHER_FORECAST = "lossless_other_forecast"


def _run_case(
    engine: Engine,
    baseline: GrammarBaseline,
    case: BfclCase,
    index: int,
    max_tokens: int,
    memory: dict[str, list[tuple[int, int]]],
    modes: Sequence[str] = MODES,
) -> dict[str, CallResult]:
    several = case.category.startswith("parallel")
    calls = None if several else 1
    caller = ToolCaller(engine, case.tools, max_calls=calls, max_tokens=max_tokens)
    # The same lossless decoder with SchemaFill forecasts the other way: what they add.
    other = ToolCaller(
        engine, case.tools, max_calls=calls, max_tokens=max_tokens, forecast=not caller.forecast
    )
    request = [dict(m) for m in case.messages]
    caller.call(request, "jump")  # prefill the prompt once, untimed, for every mode
    full = tuple(modes) == MODES
    runs = [*modes, OTHER_FORECAST] if full else list(modes)
    order = runs if index % 2 == 0 else list(reversed(runs))
    results: dict[str, CallResult] = {}
    for mode in order:
        measured = reset_peak_resident()
        before = resident_bytes()
        if mode == "grammar":
            results[mode] = baseline.call(caller, request)
        elif mode == OTHER_FORECAST:
            results[mode] = other.call(request, "lossless")
        else:
            results[mode] = caller.call(request, mode)
        if measured:  # (peak during the call, its increase over the resident memory before)
            peak = peak_resident_bytes()
            memory.setdefault(mode, []).append((peak, peak - before))
    if full:
        pair = (results["lossless"], results[OTHER_FORECAST])
        results[FORECAST_ON], results[FORECAST_OFF] = pair[:: 1 if caller.forecast else -1]
    return results


def _plot(summary: dict[str, Any], path: Path, title: str) -> None:
    plt = pyplot()

    modes = list(summary["modes"])
    ttt = [summary["modes"][m]["speedup_time_to_tool_vs_constrained"] for m in modes]
    tot = [summary["modes"][m]["speedup_total_vs_constrained"] for m in modes]
    xs = range(len(modes))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4))
    ax.bar([x - 0.2 for x in xs], ttt, width=0.4, label="time to tool")
    ax.bar([x + 0.2 for x in xs], tot, width=0.4, label="total")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(list(xs), modes)
    ax.set_ylabel("speedup vs constrained (geomean)")
    ax.set_title(title)
    ax.legend()
    groups = summary.get("by_arguments", {})
    keys = list(groups)
    width = 0.8 / len(modes)
    for j, mode in enumerate(modes):
        ax2.bar(
            [k + (j - len(modes) / 2 + 0.5) * width for k in range(len(keys))],
            [groups[g][mode] for g in keys],
            width=width,
            label=mode,
        )
    ax2.axhline(1.0, color="grey", linewidth=0.8)
    ax2.set_xticks(range(len(keys)), [f"{g} args ({groups[g]['calls']:.0f})" for g in keys])
    ax2.set_ylabel("time to tool, x vs constrained")
    ax2.set_title("by number of arguments (calls)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_fastpath(
    json_out: Annotated[Path, typer.Option("--json", help="Where to write the results.")],
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG of the speedups.")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help=f"GGUF path or {', '.join(MODELS)}.")
    ] = None,
    calls: Annotated[int, typer.Option("--calls", min=1, help="BFCL cases sampled.")] = 100,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1)] = 256,
    modes: Annotated[
        str, typer.Option("--modes", help=f"Comma-separated subset of {', '.join(MODES)}.")
    ] = ",".join(MODES),
) -> None:
    """The five decoding modes on BFCL v4 (simple, multiple, parallel, parallel_multiple)."""
    chosen = _chosen_modes(modes)
    cases = sample_cases(CATEGORIES, calls, seed=seed)
    console = Console(highlight=False, stderr=True)
    runs: list[dict[str, CallResult]] = []
    memory: dict[str, list[tuple[int, int]]] = {}
    with Engine(resolve_model(model), n_ctx=4096) as engine:
        baseline = GrammarBaseline(engine)
        try:
            with console.status("") as status:
                for i, case in enumerate(cases):
                    status.update(f"BFCL case {i + 1}/{len(cases)} ({case.id})")
                    runs.append(_run_case(engine, baseline, case, i, max_tokens, memory, chosen))
        finally:
            baseline.close()
        name = engine.model_name
        costs = engine_costs(engine)
    summary = summarize(cases, runs, chosen)
    if "jump" in chosen:
        summary["ceiling"] = ceiling(runs, costs)
    report = {
        "benchmark": "fastpath",
        "model": name,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "categories": CATEGORIES,
        "cases": [c.id for c in cases],
        **summary,
        "memory": memory_summary(memory, chosen),
    }
    json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if plot is not None and "by_arguments" in summary:
        _plot(summary, plot, f"{name}: {len(cases)} BFCL calls")
    _print({**summary, "memory": report["memory"]}, Console(highlight=False))


def _chosen_modes(text: str) -> tuple[str, ...]:
    """The modes of ``--modes``, in the order of `MODES` (all five when all are named)."""
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = sorted(names - set(MODES))
    if unknown or not names:
        raise typer.BadParameter(
            f"unknown mode {unknown[0] if unknown else '(none)'}; choose from {', '.join(MODES)}",
            param_hint="--modes",
        )
    return tuple(m for m in MODES if m in names)


def _x(value: float | None) -> str:
    return "-" if value is None else f"x{value:.2f}"


def _print(summary: dict[str, Any], console: Console) -> None:
    table = Table(title=f"{summary['calls']} BFCL calls (geometric means)")
    memory = summary.get("memory") or {}
    cols = ("mode", "to tool ms", "total ms", "x to tool", "passes", "correct", "= constr.")
    for col in (*cols, "peak MB"):
        table.add_column(col, justify="right")
    for mode, m in summary["modes"].items():
        peak = memory.get(mode)
        table.add_row(
            mode,
            f"{m['time_to_tool_ms']:.0f}",
            f"{m['total_ms']:.0f}",
            _x(m["speedup_time_to_tool_vs_constrained"]),
            f"{m['decode_passes']:.1f}",
            f"{m['correct']:.0%}",
            "-" if m["agree_with_constrained"] is None else f"{m['agree_with_constrained']:.0%}",
            f"{peak['peak_mb']:.0f} ({peak['peak_vs_constrained_mb']:+.1f})" if peak else "-",
        )
    console.print(table)
    if "lossless_equals_jump" in summary:
        equal = summary["lossless_equals_jump"]
        console.print(f"lossless == jump on {equal}/{summary['calls']} calls")
    for d in summary.get("lossless_differs", []):
        why = "after a logged drift tie" if d["explained_by_drift_tie"] else "UNEXPLAINED"
        console.print(f"  {d['case']}: parts at token {d['first_difference']}, {why}")
    cap = summary.get("ceiling")
    if cap is None:
        return
    console.print(
        f"cost model: {cap['chosen_share']:.0%} of tokens chosen by the model, a prefilled "
        f"token costs {cap['prefill_ratio']:.2f} step, a value token in parallel "
        f"{cap['parallel_token_cost']:.2f} step (k={cap['parallel_width']:.0f}); ceilings vs "
        f"constrained: x{cap['bound_no_drafts']:.2f} without drafts, "
        f"x{cap['bound_parallel_values']:.2f} with parallel values, "
        f"x{cap['bound_all_drafted']:.2f} with every token drafted and accepted"
    )
    phases = summary["modes"].get("fast", {}).get("mean_phases_ms", {})
    if phases:
        console.print(
            "fast, mean ms per call: "
            + ", ".join(f"{k} {v:.0f}" for k, v in phases.items() if k != "time_to_final_call")
        )
    for group, f in summary.get("forecast", {}).items():
        console.print(
            f"forecasts ({group}, {f['calls']} calls): lossless x{f['speedup_total']:.2f} total "
            f"time, passes {f['passes']:.1f} vs {f['passes_without']:.1f} without, "
            f"{f['acceptance']:.0%} of {f['forecast_tokens']:.1f} forecast tokens accepted, "
            f"same tokens {f['same_tokens']}/{f['calls']}"
        )
