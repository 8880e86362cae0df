"""`toolweave bench serving`: consecutive agent requests, with and without state reuse.

    toolweave bench serving --json OUT [--plot OUT.png] [--steps N] [--model M]

The workload is `toolweave.eval.serving_trace.replay_trace` over BFCL v4 ``multi_turn_base``:
`--interleave` agents take turns on one engine slot, each request rebuilt from fixed
rules, tools and user requests plus a sliding window of the last actions. Every step
runs, interleaved in one process (order rotated per step), in

- ``no_reuse``: toolweave's engine, the whole prompt prefilled every time;
- ``llama_cpp_ram`` / ``llama_cpp_disk``: a `llama_cpp.Llama` on the same GGUF with its own
  prompt cache (`LlamaRAMCache` / `LlamaDiskCache`, default settings);
- ``toolweave``: `StateStore` (divergence-point checkpoints, written to disk).

Each step prefills the prompt and decodes `--decode` tokens greedily. Reported: new
prompt tokens per step against the ideal prefix cache (the longest common prefix with
any earlier request), latency per step (geometric means, speedups as their ratios),
memory and disk held by each cache, agreement of outputs with ``no_reuse``. Then, on
requests the agents send next (never seen before): a restart (a new engine and store
over the same directory serve `--restart-steps` of them) and idle release (resident
memory loaded vs released, and the extra latency of the first request after a release
against the same request served warm). The machine's load average is recorded: the
latencies mean little when other processes share the CPU. The probes and the counts of
the ideal prefix cache are in `serving_probes`.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import shutil
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from toolweave.adapters.bench.plotting import pyplot
from toolweave.adapters.bench.serving_configs import NoReuse, ServingConfig, ToolweaveConfig
from toolweave.adapters.bench.serving_probes import (
    ideal_new,
    idle_probe,
    previous_new,
    restart_probe,
)
from toolweave.errors import ToolweaveError
from toolweave.eval.bfcl_multi_turn import load_multi_turn
from toolweave.eval.modebench import geomean
from toolweave.eval.serving_trace import TraceStep, replay_trace
from toolweave.models import MODELS, resolve_model
from toolweave.native.baselines.llama_cpp_cache import LlamaCppCached, StepRun
from toolweave.native.chat import chat_tokens
from toolweave.native.states.idle import resident_bytes

__all__ = ["CONFIGS", "bench_serving"]

CONFIGS = ("no_reuse", "llama_cpp_ram", "llama_cpp_disk", "toolweave")
_MB = 1 << 20


def _summary(
    runs: dict[str, list[StepRun]], ideal: list[int], configs: Sequence[ServingConfig]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    base = runs["no_reuse"]
    ideal_mean = statistics.fmean(ideal[1:]) if len(ideal) > 1 else float(ideal[0])
    for cfg in configs:
        rs = runs[cfg.name][1:] or runs[cfg.name]  # step 0 has nothing to reuse anywhere
        new = statistics.fmean(r.new_tokens for r in rs)
        out[cfg.name] = {
            "new_tokens_per_step": new,
            "new_tokens_vs_ideal": new / ideal_mean if ideal_mean else 0.0,
            "step_ms_geomean": geomean([r.ms for r in rs]),
            "step_ms_mean": statistics.fmean(r.ms for r in rs),
            "memory_mb": cfg.memory_bytes() / _MB,
            "disk_mb": cfg.disk_bytes() / _MB,
            "same_output_as_no_reuse": sum(
                a.text == b.text for a, b in zip(runs[cfg.name], base, strict=True)
            ),
        }
    ref = out["no_reuse"]["step_ms_geomean"]
    for m in out.values():
        m["speedup_vs_no_reuse"] = ref / m["step_ms_geomean"] if m["step_ms_geomean"] else 0.0
    return out


def _plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    per = report["per_step"]
    xs = range(len(per["ideal_new_tokens"]))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for name in CONFIGS:
        ax1.plot(xs, per[name]["new_tokens"], marker=".", label=name)
        ax2.plot(xs, per[name]["ms"], marker=".", label=name)
    ax1.plot(xs, per["ideal_new_tokens"], "k:", linewidth=2, label="ideal prefix cache")
    ax1.set_ylabel("new prompt tokens")
    ax2.set_ylabel("step latency (ms)")
    ax2.set_yscale("log")
    ax2.set_xlabel("request")
    ax1.legend(fontsize=8)
    s = report["summary"]
    ax1.set_title(f"{report['model']}: {len(xs)} agent requests", fontsize=10)
    ax2.set_title(
        "speedup vs no_reuse (geomean): "
        + ", ".join(f"{n} x{s[n]['speedup_vs_no_reuse']:.2f}" for n in CONFIGS[1:]),
        fontsize=9,
    )
    ax2.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def bench_serving(
    json_out: Annotated[Path, typer.Option("--json", help="Where to write the results.")],
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG of the per-step curves.")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help=f"GGUF path or {', '.join(MODELS)}.")
    ] = None,
    steps: Annotated[int, typer.Option("--steps", min=2, help="Requests replayed.")] = 24,
    interleave: Annotated[
        int, typer.Option("--interleave", min=1, help="Agents taking turns on the slot.")
    ] = 2,
    window: Annotated[int, typer.Option("--window", min=0, help="Actions shown.")] = 3,
    decode: Annotated[int, typer.Option("--decode", min=1, help="Tokens per reply.")] = 16,
    n_ctx: Annotated[int, typer.Option("--n-ctx", min=256)] = 2048,
    restart_steps: Annotated[int, typer.Option("--restart-steps", min=1)] = 4,
    idle_probes: Annotated[int, typer.Option("--idle-probes", min=1)] = 3,
    state_dir: Annotated[
        Path | None, typer.Option("--state-dir", help="Cache directories (default: a temp dir).")
    ] = None,
) -> None:
    """Agent requests replayed with no reuse, llama-cpp-python's caches and toolweave's store."""
    console = Console(highlight=False, stderr=True)
    path = resolve_model(model)
    cases = load_multi_turn("multi_turn_base")
    total = steps + restart_steps + idle_probes  # unseen requests for the two probes
    trace = replay_trace(cases, steps=total, interleave=interleave, window=window)
    root = Path(tempfile.mkdtemp(prefix="toolweave-serving-")) if state_dir is None else state_dir
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("toolweave", "llama_disk"):
        shutil.rmtree(root / sub, ignore_errors=True)
    load_before = os.getloadavg()
    try:
        report = _run(console, path, trace, root, decode, n_ctx, restart_steps, idle_probes)
    finally:
        if state_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    report.update(
        {
            "benchmark": "serving",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "steps": steps,
            "interleave": interleave,
            "window": window,
            "decode": decode,
            "n_ctx": n_ctx,
            "load_average": {"before": load_before, "after": os.getloadavg()},
            "sessions": sorted({s.session for s in trace}),
        }
    )
    json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if plot is not None:
        _plot(report, plot)
    _print(report, Console(highlight=False))


def _run(
    console: Console,
    path: Path,
    trace: Sequence[TraceStep],
    root: Path,
    decode: int,
    n_ctx: int,
    restart_steps: int,
    idle_probes: int,
) -> dict[str, Any]:
    tw = ToolweaveConfig(path, n_ctx, decode, root / "toolweave")
    # Message text is tokenized as plain text: only the template's own markers are control.
    all_prompts = [chat_tokens(tw.engine, step.messages) for step in trace]
    too_long = [i for i, p in enumerate(all_prompts) if len(p) + decode > n_ctx]
    if too_long:
        raise ToolweaveError(f"{len(too_long)} requests do not fit --n-ctx {n_ctx}; raise it")
    n_main = len(trace) - restart_steps - idle_probes
    n_restart = n_main + restart_steps
    prompts, main = all_prompts[:n_main], trace[:n_main]
    configs: list[ServingConfig] = [
        NoReuse(path, n_ctx, decode),
        LlamaCppCached("llama_cpp_ram", path, n_ctx, decode, None),
        LlamaCppCached("llama_cpp_disk", path, n_ctx, decode, root / "llama_disk"),
        tw,
    ]
    warm = tw.engine.tokenize("Warm-up: the quick brown fox jumps over the lazy dog.")
    for cfg in configs:
        cfg.step(warm, "warm-up")
    runs: dict[str, list[StepRun]] = {c.name: [] for c in configs}
    with console.status("") as status:
        for i, (prompt, step) in enumerate(zip(prompts, main, strict=True)):
            status.update(f"request {i + 1}/{len(prompts)} ({len(prompt)} tokens)")
            k = i % len(configs)
            for cfg in configs[k:] + configs[:k]:
                runs[cfg.name].append(cfg.step(prompt, step.session))
    ideal_all = ideal_new(all_prompts)
    ideal = ideal_all[:n_main]
    summary = _summary(runs, ideal, configs)
    records = tw.records[1:]  # after the warm-up
    summary["toolweave"].update(
        {
            "peak_memory_mb": tw.peak_memory / _MB,
            "checkpoints_saved": sum(r["saved_at"] is not None for r in records),
            "passes_per_step": statistics.fmean(r["passes"] for r in records),
            "sources": {
                s: sum(r["source"] == s for r in records)
                for s in ("live", "memory", "disk", "none")
            },
        }
    )
    previous = previous_new(prompts)
    rss_all = resident_bytes()
    for cfg in configs[:-1]:
        cfg.close()
    del configs
    gc.collect()
    with console.status("restart"):
        tw.close()
        restart = restart_probe(
            path,
            n_ctx,
            decode,
            root / "toolweave",
            trace[n_main:n_restart],
            all_prompts[n_main:n_restart],
            ideal_all[n_main:n_restart],
        )
    with console.status("idle release"):
        tw = ToolweaveConfig(path, n_ctx, decode, root / "toolweave")
        try:
            idle = idle_probe(tw, trace, all_prompts, range(n_restart, len(trace)))
        finally:
            tw.close()
    return {
        "model": path.stem,
        "prompt_tokens_mean": statistics.fmean(len(p) for p in prompts),
        "ideal_new_tokens_per_step": statistics.fmean(ideal[1:]),
        "previous_prefix_new_tokens_per_step": statistics.fmean(previous[1:]),
        "rss_all_configs_mb": rss_all / _MB,
        "summary": summary,
        "idle_release": idle,
        "restart": restart,
        "per_step": {
            "session": [s.session for s in main],
            "prompt_tokens": [len(p) for p in prompts],
            "ideal_new_tokens": ideal,
            "previous_prefix_new_tokens": previous,
            **{
                name: {"new_tokens": [r.new_tokens for r in rs], "ms": [r.ms for r in rs]}
                for name, rs in runs.items()
            },
            "toolweave_records": records,
        },
    }


def _print(report: dict[str, Any], console: Console) -> None:
    s = report["summary"]
    table = Table(
        title=f"{len(report['per_step']['prompt_tokens'])} agent requests, "
        f"{report['prompt_tokens_mean']:.0f} prompt tokens on average; ideal prefix cache "
        f"{report['ideal_new_tokens_per_step']:.0f} new tokens/step"
    )
    for col in ("config", "new tok/step", "x ideal", "step ms", "speedup", "mem MB", "disk MB"):
        table.add_column(col, justify="right")
    for name, m in s.items():
        table.add_row(
            name,
            f"{m['new_tokens_per_step']:.0f}",
            f"{m['new_tokens_vs_ideal']:.2f}",
            f"{m['step_ms_geomean']:.0f}",
            f"x{m['speedup_vs_no_reuse']:.2f}",
            f"{m['memory_mb']:.0f}",
            f"{m['disk_mb']:.0f}",
        )
    console.print(table)
    r = report["restart"]
    console.print(
        f"restart: {r['checkpoints_found']} checkpoints found; new tokens {r['new_tokens']} "
        f"(ideal {r['ideal_new_tokens']}) of {r['prompt_tokens']}, sources {r['sources']}"
    )
    idle = report["idle_release"]
    if idle["probes"]:
        console.print(
            f"idle release: RSS {idle['rss_loaded_mb']:.0f} MB loaded -> "
            f"{idle['rss_released_mb']:.0f} MB released; first request after release "
            f"+{idle['penalty_ms']:.1f} ms ({idle['penalty_vs_step']:.1%} of a step; "
            f"recreating the context {idle.get('acquire_ms', 0.0):.1f} ms, huge pages "
            f"{'on' if idle.get('huge_pages') else 'off'})"
        )
