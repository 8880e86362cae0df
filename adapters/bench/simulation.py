"""`toolweave bench simulate`: a memory-bound model simulated with a random-weight 1B GGUF.

    python -m toolweave.adapters.bench.simulation --json OUT [--calls N] [--layers L]

Users' 1-8B models at Q4_K_M on laptops are bound by memory bandwidth, where a k-token
pass costs close to one serial step; only 135M/270M models ship with toolweave. This
builds a qwen2-architecture GGUF of about 1B parameters (the real qwen2 tokenizer and
the Qwen2.5 chat template from the llama-cpp-python sdist, seeded random weights, F16
quantized to Q4_K_M by llama.cpp) with the model zoo's own functions, caches it in
``<cache root>/sim/``, measures its pass costs, and reports what toolweave's planner
decides and what the cost model predicts for `fast` against `jump`, next to the same
prediction from SmolLM2's table measured in the same run.

Everything here is a simulation: random weights choose arbitrary tokens, so the calls
are nonsense whose lengths the call grammar and ``max_tokens`` bound. Only the pass
costs are real.

The model is built by `toolweave.adapters.bench.simulation_model`, and the traces and
predictions come from `toolweave.adapters.bench.simulation_predict`; this module keeps
the pass-cost measurement, the run, its printing and `main`, and re-exports the names
of both.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolweave.adapters.bench.simulation_model import (
    MANIFEST,
    SIM_FAMILY,
    Progress,
    build_sim_model,
    sim_dims,
)
from toolweave.adapters.bench.simulation_predict import (
    CAVEAT,
    CallTrace,
    _predictions,
    decisions,
    predict_ms,
    trace_call,
)
from toolweave.adapters.bench.simulation_predict import batch_pays as batch_pays
from toolweave.errors import ModelError, ToolweaveError

if TYPE_CHECKING:
    from toolweave.native.calibration import CostTable
    from toolweave.native.engine import Engine
    from toolweave.results import CallResult

__all__ = [
    "SIM_FAMILY",
    "CallTrace",
    "bench_simulation",
    "build_sim_model",
    "predict_ms",
    "sim_dims",
    "trace_call",
]

# ============================================================ the pass costs
_FILLER = "The agent reads the request, picks a tool and writes its arguments as JSON. "


def measure_table(
    engine: Engine, *, max_k: int = 16, context: int = 256, repeats: int = 3
) -> CostTable:
    """The engine's cost table with passes of k = 1..`max_k` tokens in one sequence and
    k sequences (up to the engine's `n_seq_max`) after a `context`-token prefix, each the
    lower median of `repeats` interleaved timings; state figures from the quick table.
    Every sequence must be empty; they are empty again on return."""
    from toolweave.native.calibration import measure_costs
    from toolweave.native.engine import BatchToken

    base = measure_costs(engine, quick=True)
    unit = engine.tokenize(_FILLER)
    toks = (unit * ((context + max_k) // len(unit) + 1))[: context + max_k]
    seqs = list(range(min(max_k, engine.n_seq_max)))

    def timed(items: list[BatchToken], drop: Sequence[int]) -> float:
        t0 = time.perf_counter()
        engine.forward(items)
        ms = (time.perf_counter() - t0) * 1000
        for s in drop:
            engine.seq_remove(s, context)
        return ms

    def verify(k: int, rows: bool) -> float:
        items = [
            BatchToken(toks[context + i], context + i, (0,), rows or i == k - 1) for i in range(k)
        ]
        return timed(items, [0])

    def sequences(k: int) -> float:
        items = [BatchToken(toks[context + i], context, (s,), True) for i, s in enumerate(seqs[:k])]
        return timed(items, seqs[:k])

    with engine.lock:
        if any(engine.seq_len(s) for s in range(engine.n_seq_max)):
            raise ModelError("measure_table needs an engine whose sequences are all empty")
        try:
            engine.prefill(0, toks[:context], logits_last=False)
            half = context // 2
            engine.seq_remove(0, half)
            t0 = time.perf_counter()
            engine.prefill(0, toks[half:context], start=half, logits_last=False)
            prefill = (time.perf_counter() - t0) * 1000 / (context - half)
            for s in seqs[1:]:
                engine.seq_copy(0, s, 0, context)
            verify(1, True)  # warm-up
            jobs = [("all", 1)] + [
                (n, k)
                for k in range(2, max_k + 1)
                for n in ("all", "last", "seqs")
                if n != "seqs" or k <= len(seqs)
            ]
            samples: dict[tuple[str, int], list[float]] = {job: [] for job in jobs}
            for _ in range(repeats):  # interleaved: drift in machine load hits every point
                for n, k in jobs:
                    samples[(n, k)].append(sequences(k) if n == "seqs" else verify(k, n == "all"))
        finally:
            for s in range(engine.n_seq_max):
                engine.seq_remove(s)
    low = {key: sorted(v)[(len(v) - 1) // 2] for key, v in samples.items()}
    step = low[("all", 1)]
    curve = {
        n: {1: step, **{k: ms for (m, k), ms in low.items() if m == n}}
        for n in ("all", "last", "seqs")
    }
    return replace(
        base, context_tokens=context, serial_step_ms=step, sequences_ms=curve["seqs"],
        verify_all_ms=curve["all"], verify_last_ms=curve["last"],
        prefill_ms_per_token=prefill, repeats=repeats, quick=False,
    )  # fmt: skip


def _stats(result: CallResult) -> dict[str, Any]:
    s = result.stats
    keys = ("total_ms", "time_to_tool_ms", "decode_passes", "output_tokens", "decoded_tokens")
    out: dict[str, Any] = {k: getattr(s, k) for k in (*keys, "drafted_tokens")}
    out["values_ms"] = s.phases_ms.get("values", 0.0)
    return {**out, "finish_reason": result.finish_reason, "valid_calls": len(result.calls)}


def _run_sim(
    engine: Engine,
    costs: CostTable,
    calls: int,
    measure: int,
    max_tokens: int,
    seed: int,
    say: Progress,
) -> tuple[list[dict[str, Any]], list[CallTrace]]:
    """`jump` on `calls` BFCL cases (each traced), `fast` too on the first `measure`."""
    from toolweave.adapters.bench.fastpath import CATEGORIES
    from toolweave.eval.bfcl import sample_cases
    from toolweave.native.caller import ToolCaller

    rows: list[dict[str, Any]] = []
    traces: list[CallTrace] = []
    for i, case in enumerate(sample_cases(CATEGORIES, calls, seed=seed)):
        say(f"sim: call {i + 1}/{calls} ({case.id})")
        caller = ToolCaller(engine, case.tools, max_calls=1, max_tokens=max_tokens, costs=costs)
        request = [dict(m) for m in case.messages]
        chosen: list[bool] = []
        result: CallResult | None = None
        for ev in caller.events(request, "jump"):  # also prefills the prompt for the rest
            if ev.kind == "tokens":
                chosen += [ev.decoded] * len(ev.tokens)
            elif ev.kind == "done":
                result = ev.result
        assert result is not None
        present = [
            (c.name, [k for k in caller.by_name[c.name].required if k in c.arguments])
            for c in result.calls
        ]
        trace = trace_call([engine.token_bytes(t) for t in result.tokens], chosen, present)
        traces.append(trace)
        row: dict[str, Any] = {
            "id": case.id, "chosen_tokens": sum(chosen), "forced_tokens": len(chosen) - sum(chosen),
            "value_tokens": [list(r[2]) for r in trace.regions], "first_jump": _stats(result),
            "trace": {"chosen": "".join("c" if c else "f" for c in chosen),
                      "regions": [[a, b, list(n)] for a, b, n in trace.regions]},
        }  # fmt: skip
        if i < measure:
            row["measured"] = {m: _stats(caller.call(request, m)) for m in ("jump", "fast")}
        rows.append(row)
    return rows, traces


def bench_simulation(
    json_out: Annotated[Path, typer.Option("--json", help="Where to write the results.")],
    calls: Annotated[int, typer.Option("--calls", min=1, help="BFCL cases traced.")] = 20,
    layers: Annotated[int, typer.Option("--layers", min=1, help="Layers of the sim model.")] = 16,
    width: Annotated[int, typer.Option("--width", min=256, help="Its hidden width.")] = 2048,
    measure: Annotated[
        int, typer.Option("--measure", min=0, help="Calls timed in jump and fast.")
    ] = 3,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=8)] = 96,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Timings per pass.")] = 3,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """SIMULATION: a random-weight ~1B qwen2 model's pass costs, the planner's decisions
    on them and the cost model's fast-vs-jump prediction, next to SmolLM2's table."""
    from rich.console import Console

    from toolweave.models import resolve_model
    from toolweave.native.caller import TYPICAL_VALUE_TOKENS
    from toolweave.native.engine import Engine

    err = Console(highlight=False, stderr=True)

    def say(msg: str) -> None:
        err.print(msg)

    t_start = time.perf_counter()
    path = build_sim_model(layers, width, progress=say)
    manifest = json.loads((path.parent / MANIFEST).read_text(encoding="utf-8"))
    tables: dict[str, CostTable] = {}
    with Engine(path) as engine:
        say(f"sim: measuring the pass costs of {path.name} (k = 1..16)")
        tables["sim"] = measure_table(engine, repeats=repeats)
        rows, traces = _run_sim(engine, tables["sim"], calls, measure, max_tokens, seed, say)
    with Engine(resolve_model(None)) as engine:
        say("sim: measuring SmolLM2-135M's pass costs for comparison")
        tables["smollm2"] = measure_table(engine, repeats=repeats)
    lengths = [n for t in traces for r in t.regions for n in r[2]]
    mean_len = sum(lengths) / len(lengths) if lengths else TYPICAL_VALUE_TOKENS
    for row, trace in zip(rows, traces, strict=True):
        row["predicted"] = {
            name: _predictions(trace, table, TYPICAL_VALUE_TOKENS) for name, table in tables.items()
        }
    summary: dict[str, Any] = {}
    for name in tables:
        tot = {
            k: sum(r["predicted"][name][k] for r in rows)
            for k in ("jump_ms", "fast_ms", "fast_parallel_ms")
        }
        summary[name] = {**tot, **{
            f"speedup_{k[:-3]}": tot["jump_ms"] / tot[k] if tot[k] else 1.0
            for k in ("fast_ms", "fast_parallel_ms")
        }}  # fmt: skip
    report = {
        "benchmark": "simulation", "simulation": True, "caveat": CAVEAT,
        "model": {"path": str(path), **manifest},
        "settings": {"calls": calls, "measure": measure, "max_tokens": max_tokens,
                     "repeats": repeats, "seed": seed, "mean_value_tokens": mean_len,
                     "planner_value_tokens": TYPICAL_VALUE_TOKENS},
        "tables": {name: t.to_dict() for name, t in tables.items()},
        "decisions": {n: decisions(t, (TYPICAL_VALUE_TOKENS, mean_len)) for n, t in tables.items()},
        "summary": summary, "calls": rows, "run_s": time.perf_counter() - t_start,
    }  # fmt: skip
    json_out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    _print(report, Console(highlight=False))


def _print(report: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    console.print(f"[bold]{report['caveat']}[/bold]")
    tables = report["tables"]
    grid = Table(title="SIMULATION: pass cost in serial steps (sim 1B Q4_K_M vs SmolLM2-135M)")
    grid.add_column("k", justify="right")
    for name in tables:
        for col in ("k tokens", "k tok, last row", "k seqs"):
            grid.add_column(f"{name} {col}", justify="right")
    for k in range(1, 17):
        cells = [str(k)]
        for t in tables.values():
            r = t["ratios"]
            cells += [f"x{r[key][str(k)]:.2f}" for key in ("verify_all", "verify_last")]
            cells.append(f"x{r['sequences'][str(k)]:.2f}" if str(k) in t["sequences_ms"] else "-")
        grid.add_row(*cells)
    console.print(grid)
    for name, t in tables.items():
        d = report["decisions"][name]
        par = {v: [n for n, ok in m.items() if ok] for v, m in d["parallel_values"].items()}
        console.print(
            f"{name}: serial step {t['serial_step_ms']:.1f} ms, prefill "
            f"x{t['ratios']['prefill_per_token']:.2f}; parallel values pay for n values of "
            f"(value tokens: n) {par}; batching pays at k "
            f"{[k for k, ok in d['batch_pays'].items() if ok]}; forecast draft length by "
            f"acceptance {d['forecast_draft_length']}"
        )
        s = report["summary"][name]
        console.print(
            f"{name} predicted on the sim's jump tokens: jump {s['jump_ms']:.0f} ms, fast "
            f"{s['fast_ms']:.0f} ms (x{s['speedup_fast']:.2f}), fast with parallel values "
            f"{s['fast_parallel_ms']:.0f} ms "
            f"(x{s['speedup_fast_parallel']:.2f})"
        )
    for row in report["calls"]:
        if "measured" in row:
            m, p = row["measured"], row["predicted"]["sim"]
            console.print(
                f"sim measured {row['id']}: jump {m['jump']['total_ms']:.0f} ms / "
                f"{m['jump']['decode_passes']} passes, fast {m['fast']['total_ms']:.0f} ms / "
                f"{m['fast']['decode_passes']} passes "
                f"(predicted {p['jump_ms']:.0f} / {p['fast_ms']:.0f} ms)"
            )


def main() -> None:
    try:
        typer.run(bench_simulation)
    except ToolweaveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
