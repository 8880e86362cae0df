"""`toolweave bench pipeline`: the plan-out pipeline on BFCL multi-turn requests, five ways.

    toolweave bench pipeline --json OUT --plot OUT.png [--requests N] [--budget B]

On the workload's test split (`toolweave.eval.workload`), each request runs one Planner ->
executor -> Arbiter round under every configuration, interleaved (the order rotates per
request), in one process on one model:

- ``baseline``: ToolRAG's prompt (only the selected tools, K examples), no cache, plain
  greedy decoding;
- ``promptweaver``: PromptWeaver's prompt (all catalogue tools, cluster examples,
  single-tool examples, K' dynamic examples) from stored prefix states; the Arbiter's
  static prefix stored too;
- ``exspec``: the baseline prompt, decoded with ExSpec (identical output);
- ``both``: PromptWeaver and ExSpec;
- ``all``: both, plus grammar-forced tokens prefilled (jump-forward) in plan lines and
  the Arbiter decision.

All decode under the same plan and Arbiter grammars. Tools run with BFCL's own
implementations (`toolweave.adapters.bench.bfcl_tools`). Prefix states are built once into
``--state-dir`` (kept between runs). Reported: Planner and Arbiter prefill time and
uncached tokens, decode time (the fastest of ``--decode-repeats`` decodes of the same
prompt, 5 by default: the output is deterministic and the minimum drops scheduler
noise, equally for every configuration) and tokens per pass, end-to-end latency
(geometric means),
Planner accuracy (plan DAG equals the ground truth's), n-gram table build time and size,
and PromptWeaver's coverage and storage for several budgets.

Two engines on the same model file: the baseline decodes with serial steps on all
cores, as a plain llama.cpp user does; the four toolweave configurations run on a
batch-invariant engine (serial steps on one thread), which is what makes a verification
row equal a serial step bit for bit, so ExSpec's output equals plain greedy decoding. On
this CPU that mode costs 10% per serial step at 300 tokens of context and 50% at 2,000:
toolweave pays it, the baseline does not. `identical` checks the equality on real
prompts: ``both`` (PromptWeaver + ExSpec) must decode exactly what ``promptweaver``
(plain greedy on the same engine and prompt) decodes.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from toolweave.adapters.bench.bfcl_tools import bfcl_environment
from toolweave.adapters.bench.pipeline_stages import (
    StageConfig,
    StageTimes,
    execute,
    observations,
    render_tokens,
    run_stage,
)
from toolweave.adapters.bench.plotting import pyplot
from toolweave.eval.plan_scoring import plan_matches
from toolweave.eval.workload import PlanRequest, load_workload, tool_themes
from toolweave.models import MODELS, resolve_model
from toolweave.native.calibration import engine_costs
from toolweave.native.engine import Engine
from toolweave.native.states.prefixes import PrefixStates
from toolweave.plan.format import PlanError, parse_plan
from toolweave.plan.grammar import arbiter_grammar, plan_grammar
from toolweave.plan.prompts import ARBITER_EXAMPLES, arbiter_messages, planner_messages
from toolweave.prompting.promptweaver import (
    PromptWeaver,
    coverage_fraction,
    fit_weavers,
    select_combinations,
    training_sequences,
)
from toolweave.prompting.toolrag import ToolRAG, ToolRAGResult

__all__ = ["CONFIGS", "bench_pipeline", "selected_tools"]

CONFIGS = (
    StageConfig("baseline", invariant=False),
    StageConfig("promptweaver", weave=True),
    StageConfig("exspec", exspec=True),
    StageConfig("both", weave=True, exspec=True),
    StageConfig("all", weave=True, exspec=True, jump=True),
)
BUDGETS = (0, 5, 10, 15, 20, 40, 80, 120, 160)
DEFAULT_STATE_DIR = Path.home() / ".cache" / "toolweave" / "prefix-states"
N_CTX = 8192
#: Metrics averaged as geometric means (times), and as arithmetic means (the rest).
TIME_METRICS = (
    "planner_prefill_ms",
    "planner_decode_ms",
    "arbiter_prefill_ms",
    "arbiter_decode_ms",
    "execute_ms",
    "e2e_ms",
)
MEAN_METRICS = (
    "planner_prompt_tokens",
    "planner_uncached_tokens",
    "planner_tokens_per_pass",
    "planner_output_tokens",
    "arbiter_prompt_tokens",
    "arbiter_uncached_tokens",
    "arbiter_tokens_per_pass",
    "arbiter_output_tokens",
    "load_ms",
    "accuracy",
    "table_ms",
    "table_entries",
)


def bench_pipeline(
    json_out: Annotated[Path, typer.Option("--json", help="Where to write the results.")],
    plot: Annotated[Path | None, typer.Option("--plot", help="PNG of the comparison.")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help=f"GGUF path or {', '.join(MODELS)}.")
    ] = None,
    requests: Annotated[int, typer.Option("--requests", min=1, help="Test requests run.")] = 24,
    budget: Annotated[
        int,
        typer.Option("--budget", min=0, help="Stored combinations (example-block prefixes) used."),
    ] = 160,
    k_baseline: Annotated[int, typer.Option("--k-baseline", min=0)] = 3,
    k_weave: Annotated[int, typer.Option("--k-weave", min=0)] = 1,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=8)] = 160,
    decode_repeats: Annotated[
        int,
        typer.Option("--decode-repeats", min=1, help="Decodes per stage; the fastest is reported."),
    ] = 5,
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Where prefix states are kept.")
    ] = DEFAULT_STATE_DIR,
) -> None:
    """Plan-out pipeline: baseline vs PromptWeaver, ExSpec, both, and both + jump."""
    console = Console(highlight=False, stderr=True)
    load_before = os.getloadavg()
    report = run_pipeline_bench(
        console,
        model=model,
        n_requests=requests,
        budget=budget,
        k_baseline=k_baseline,
        k_weave=k_weave,
        max_tokens=max_tokens,
        state_dir=state_dir,
        decode_repeats=decode_repeats,
    )
    report["load_average"] = {"before": load_before, "after": os.getloadavg()}
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if plot is not None:
        _plot(report, plot)
    _print(report, Console(highlight=False))


def run_pipeline_bench(
    console: Console,
    *,
    model: str | None,
    n_requests: int,
    budget: int,
    k_baseline: int,
    k_weave: int,
    max_tokens: int,
    state_dir: Path,
    decode_repeats: int = 1,
) -> dict[str, Any]:
    """Set everything up, run every request under every configuration, summarise."""
    console.print("[dim]loading the workload, fitting ToolRAG and PromptWeaver...[/dim]")
    train = load_workload(split="train")
    test = load_workload(split="test")
    themes = tool_themes()
    rag = ToolRAG.fit(train, k=max(k_baseline, k_weave))
    weavers = fit_weavers(train, themes=themes)
    # Laid out for the tools ToolRAG selects, as the run-time prompts are.
    train_seqs = training_sequences(weavers, train, lambda r: selected_tools(rag, r))
    test_seqs = training_sequences(
        weavers, [r for r in test if r.theme in weavers], lambda r: selected_tools(rag, r)
    )
    chosen = select_combinations(train_seqs, max(max(BUDGETS), budget))
    sample = pick_requests([r for r in test if r.theme in weavers], n_requests)

    path = resolve_model(model)
    with (
        Engine(path, n_ctx=N_CTX) as engine,
        Engine(path, n_ctx=N_CTX, n_seq_max=2, batch_invariant=False) as plain,
    ):
        costs = engine_costs(engine)
        states = PrefixStates(state_dir, engine)
        static, combos, arbiter = _build_states(console, engine, states, weavers, chosen)
        coverage = _coverage(states, static, combos, arbiter, train_seqs, test_seqs, chosen)
        states.select(set(static.values()) | set(combos[:budget]) | {arbiter})
        rows = _run_requests(
            console,
            {True: engine, False: plain},
            states,
            costs,
            rag,
            weavers,
            sample,
            k_baseline,
            k_weave,
            max_tokens,
            decode_repeats,
        )
        model_name = engine.model_name
    summary = _summary(rows)
    return {
        "suite": "pipeline",
        "benchmark": "pipeline",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "model": model_name,
        "configs": [c.name for c in CONFIGS],
        "requests": len(sample),
        "budget": budget,
        "k_baseline": k_baseline,
        "k_weave": k_weave,
        "decode_repeats": decode_repeats,
        "summary": summary,
        "ratios": _ratios(summary),
        "by_class": _by_class(rows),
        "identical": _identical(rows),
        "coverage": coverage,
        "ngram": {
            "build_ms": summary["both"]["table_ms"],
            "entries": summary["both"]["table_entries"],
        },
        "rows": rows,
    }


def selected_tools(rag: ToolRAG, request: PlanRequest) -> list[str]:
    """ToolRAG's tools for ``request`` among its catalogue; its likeliest if none passes."""
    return _selection(_retrieve(rag, request))


def _retrieve(rag: ToolRAG, request: PlanRequest) -> ToolRAGResult:
    return rag.retrieve(request.request_text, candidates=[t.name for t in request.tools])


def _selection(found: ToolRAGResult) -> list[str]:
    return list(found.tools) or [max(found.probabilities, key=found.probabilities.__getitem__)]


def pick_requests(requests: Sequence[PlanRequest], n: int) -> list[PlanRequest]:
    """`n` requests spread over the catalogues: round-robin over themes, each theme's
    requests in a fixed pseudo-random order (by a hash of the id)."""
    by_theme: dict[tuple[str, ...], list[PlanRequest]] = defaultdict(list)
    for r in sorted(requests, key=lambda r: zlib.crc32(r.id.encode())):
        by_theme[r.theme].append(r)
    queues = [by_theme[k] for k in sorted(by_theme)]
    out: list[PlanRequest] = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


# ---------------------------------------------------------------- prefix states
def _build_states(
    console: Console,
    engine: Engine,
    states: PrefixStates,
    weavers: dict[tuple[str, ...], PromptWeaver],
    chosen: Sequence[tuple[Any, tuple[int, ...]]],
) -> tuple[dict[tuple[str, ...], str], list[str], str]:
    """Compute (or find) the static prefix of every catalogue, the chosen combinations and
    the Arbiter's static prefix; return their digests."""
    items: list[tuple[str, list[int]]] = []
    for key, weaver in sorted(weavers.items()):
        items.append(("static " + "+".join(key), _prefix(engine, weaver.static_messages())))
    for key, combo in chosen:
        label = f"combo {'+'.join(key)} {list(combo)}"
        items.append((label, _prefix(engine, weavers[key].prefix_messages(combo))))
    arbiter = arbiter_messages("", "", "")[:-1]
    items.append(("arbiter static", _prefix(engine, arbiter)))
    with _progress(console, "prefix states") as bar:
        task = bar.add_task("build", total=len(items))
        entries = states.build(items, progress=lambda done, total: bar.update(task, completed=done))
    n_static = len(weavers)
    static = {key: e.digest for key, e in zip(sorted(weavers), entries[:n_static], strict=True)}
    combos = [e.digest for e in entries[n_static:-1]]
    return static, combos, entries[-1].digest


def _progress(console: Console, label: str) -> Progress:
    """A bar with the count done and an estimate of the time left."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


def _prefix(engine: Engine, messages: Sequence[tuple[str, str]]) -> list[int]:
    return render_tokens(engine, messages, generation=False)


def _coverage(
    states: PrefixStates,
    static: dict[tuple[str, ...], str],
    combos: list[str],
    arbiter: str,
    train_seqs: Sequence[tuple[Any, tuple[int, ...]]],
    test_seqs: Sequence[tuple[Any, tuple[int, ...]]],
    chosen: Sequence[tuple[Any, tuple[int, ...]]],
) -> list[dict[str, Any]]:
    base = states.disk_bytes([*static.values(), arbiter])
    out = []
    for b in BUDGETS:
        stored = list(chosen[:b])
        out.append(
            {
                "budget": b,
                "coverage": coverage_fraction(test_seqs, stored),
                "coverage_train": coverage_fraction(train_seqs, stored),
                "storage_mb": (base + states.disk_bytes(combos[:b])) / 2**20,
            }
        )
    return out


# ---------------------------------------------------------------- the runs
def _run_requests(
    console: Console,
    engines: dict[bool, Engine],
    states: PrefixStates,
    costs: Any,
    rag: ToolRAG,
    weavers: dict[tuple[str, ...], PromptWeaver],
    sample: Sequence[PlanRequest],
    k_baseline: int,
    k_weave: int,
    max_tokens: int,
    decode_repeats: int,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    arbiter_examples = [text for pair in ARBITER_EXAMPLES for text in pair]
    with _progress(console, "pipeline") as bar:
        task = bar.add_task("run", total=len(sample) * len(CONFIGS))
        for i, req in enumerate(sample):
            weaver = weavers[req.theme]
            found = _retrieve(rag, req)
            selected = _selection(found)
            dynamic = [(m.example.query, m.example.plan) for m in found.examples]
            shown = [t for t in req.tools if t.name in selected]
            prompts = {
                False: planner_messages(shown, req.request_text, examples=dynamic[:k_baseline]),
                True: weaver.messages(req.request_text, selected, dynamic=dynamic[:k_weave]),
            }
            tokens = {w: render_tokens(engines[True], m) for w, m in prompts.items()}
            grammars = {False: plan_grammar(shown), True: plan_grammar(list(weaver.catalogue))}
            order = CONFIGS[i % len(CONFIGS) :] + CONFIGS[: i % len(CONFIGS)]
            for config in order:
                msgs = prompts[config.weave]
                engine = engines[config.invariant]
                planner = run_stage(
                    engine,
                    tokens[config.weave],
                    config=config,
                    grammar=grammars[config.weave],
                    examples=[text for _, text in msgs[1:-1]],
                    query=req.request_text,
                    states=states,
                    costs=costs,
                    max_tokens=max_tokens,
                    learn="planner",
                    decode_repeats=decode_repeats,
                )
                plan_text = planner.result.text
                tools = {t.name: t for t in bfcl_environment(req)}
                t0 = time.perf_counter()
                run = execute(plan_text, tools)
                execute_ms = (time.perf_counter() - t0) * 1000
                arb_msgs = arbiter_messages(req.request_text, plan_text, observations(run))
                arbiter = run_stage(
                    engine,
                    render_tokens(engine, arb_msgs),
                    config=config,
                    grammar=arbiter_grammar(),
                    examples=arbiter_examples,
                    query=arb_msgs[-1][1],
                    states=states,
                    costs=costs,
                    max_tokens=max_tokens,
                    learn="arbiter",
                    decode_repeats=decode_repeats,
                )
                rows.append(_row(req, config, planner, arbiter, execute_ms, plan_text))
                bar.advance(task)
    return rows


def _row(
    req: PlanRequest,
    config: StageConfig,
    planner: StageTimes,
    arbiter: StageTimes,
    execute_ms: float,
    plan_text: str,
) -> dict[str, Any]:
    try:
        correct = bool(plan_matches(parse_plan(plan_text, req.tool_map), req.plan, req.tool_map))
    except PlanError:
        correct = False
    e2e = (
        planner.prefill_ms + planner.decode_ms + execute_ms + arbiter.prefill_ms + arbiter.decode_ms
    )
    return {
        "request": req.id,
        "theme": "+".join(req.theme),
        "category": req.category,
        "config": config.name,
        "planner_prompt_tokens": planner.prompt_tokens,
        "planner_uncached_tokens": planner.uncached_tokens,
        "planner_prefill_ms": planner.prefill_ms,
        "planner_decode_ms": planner.decode_ms,
        "planner_output_tokens": len(planner.result.tokens),
        "planner_passes": planner.result.stats.forward_passes,
        "planner_tokens_per_pass": planner.tokens_per_pass,
        "arbiter_prompt_tokens": arbiter.prompt_tokens,
        "arbiter_uncached_tokens": arbiter.uncached_tokens,
        "arbiter_prefill_ms": arbiter.prefill_ms,
        "arbiter_decode_ms": arbiter.decode_ms,
        "arbiter_output_tokens": len(arbiter.result.tokens),
        "arbiter_passes": arbiter.result.stats.forward_passes,
        "arbiter_tokens_per_pass": arbiter.tokens_per_pass,
        "load_ms": planner.load_ms + arbiter.load_ms,
        "execute_ms": execute_ms,
        "e2e_ms": e2e,
        "accuracy": float(correct),
        "table_ms": planner.table_ms,
        "table_entries": planner.table_entries,
        "plan_tokens": list(planner.result.tokens),
        "arbiter_tokens": list(arbiter.result.tokens),
        "plan": plan_text,
        "arbiter": arbiter.result.text,
    }


# ---------------------------------------------------------------- summaries
def _gmean(values: Sequence[float]) -> float:
    vals = [max(v, 1e-6) for v in values]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")


def _summary(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for config in CONFIGS:
        mine = [r for r in rows if r["config"] == config.name]
        stats = {m: _gmean([r[m] for r in mine]) for m in TIME_METRICS}
        stats.update({m: sum(r[m] for r in mine) / len(mine) for m in MEAN_METRICS})
        out[config.name] = stats
    return out


def _ratios(summary: dict[str, dict[str, float]]) -> dict[str, float]:
    base = summary["baseline"]

    def speedup(metric: str, config: str) -> float:
        return base[metric] / summary[config][metric]

    def points(config: str) -> float:
        return 100 * (summary[config]["accuracy"] - base["accuracy"])

    return {
        "planner_prefill_promptweaver": speedup("planner_prefill_ms", "promptweaver"),
        "arbiter_prefill_promptweaver": speedup("arbiter_prefill_ms", "promptweaver"),
        "planner_decode_exspec": speedup("planner_decode_ms", "exspec"),
        "arbiter_decode_exspec": speedup("arbiter_decode_ms", "exspec"),
        "planner_decode_exspec_same_engine": summary["promptweaver"]["planner_decode_ms"]
        / summary["both"]["planner_decode_ms"],
        "arbiter_decode_exspec_same_engine": summary["promptweaver"]["arbiter_decode_ms"]
        / summary["both"]["arbiter_decode_ms"],
        "planner_decode_all": speedup("planner_decode_ms", "all"),
        "e2e_both": speedup("e2e_ms", "both"),
        "e2e_all": speedup("e2e_ms", "all"),
        "accuracy_points_promptweaver": 100
        * (summary["promptweaver"]["accuracy"] - base["accuracy"]),
        "accuracy_points_all": 100 * (summary["all"]["accuracy"] - base["accuracy"]),
    }


def _by_class(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """ExSpec's decode speedup per class of request (theme, category): ``both`` over
    ``promptweaver`` (same engine and prompt: ExSpec alone), and ``exspec`` over
    ``baseline`` (ExSpec on the batch-invariant engine against plain decoding on all
    cores). The requirement is never slower than plain decoding on any class."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    pairs = {"same_engine": ("promptweaver", "both"), "vs_baseline": ("baseline", "exspec")}
    for field in ("theme", "category"):
        groups: dict[str, dict[str, float]] = {}
        for value in sorted({r[field] for r in rows}):
            stats: dict[str, float] = {}
            for label, (plain, fast) in pairs.items():
                a = [r for r in rows if r[field] == value and r["config"] == plain]
                b = [r for r in rows if r[field] == value and r["config"] == fast]
                stats["n"] = len(a)
                for stage in ("planner", "arbiter"):
                    key = f"{stage}_decode_ms"
                    stats[f"{stage}_{label}"] = _gmean([r[key] for r in a]) / _gmean(
                        [r[key] for r in b]
                    )
            groups[value] = stats
        out[field] = groups
    return out


def _identical(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Outputs that must be equal: ExSpec against plain greedy on the same engine and
    prompt (both vs promptweaver); and how often jump-forward changes them (all vs both)."""
    by = {(r["request"], r["config"]): r for r in rows}
    requests = sorted({r["request"] for r in rows})
    out: dict[str, Any] = {}
    for a, b in (("both", "promptweaver"), ("all", "both")):
        same = [
            by[(q, a)]["plan_tokens"] == by[(q, b)]["plan_tokens"]
            and by[(q, a)]["arbiter_tokens"] == by[(q, b)]["arbiter_tokens"]
            for q in requests
        ]
        out[f"{a}=={b}"] = {"same": sum(same), "of": len(same)}
    return out


def _plot(report: dict[str, Any], path: Path) -> None:
    plt = pyplot()

    s = report["summary"]
    names = report["configs"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ax = axes[0][0]
    xs = range(len(names))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [s[n]["planner_prefill_ms"] for n in names], w, label="Planner")
    ax.bar([x + w / 2 for x in xs], [s[n]["arbiter_prefill_ms"] for n in names], w, label="Arbiter")
    ax.set_xticks(list(xs), names, fontsize=8)
    ax.set_ylabel("prefill (ms, geomean)")
    ax.legend(fontsize=8)
    ax = axes[0][1]
    ax.bar([x - w / 2 for x in xs], [s[n]["planner_decode_ms"] for n in names], w, label="Planner")
    ax.bar([x + w / 2 for x in xs], [s[n]["arbiter_decode_ms"] for n in names], w, label="Arbiter")
    ax.set_xticks(list(xs), names, fontsize=8)
    ax.set_ylabel("decode (ms, geomean)")
    ax.legend(fontsize=8)
    ax = axes[1][0]
    parts = (
        "planner_prefill_ms",
        "planner_decode_ms",
        "execute_ms",
        "arbiter_prefill_ms",
        "arbiter_decode_ms",
    )
    bottom = [0.0] * len(names)
    for part in parts:
        vals = [s[n][part] for n in names]
        ax.bar(list(xs), vals, 0.6, bottom=bottom, label=part.replace("_ms", ""))
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(list(xs), names, fontsize=8)
    ax.set_ylabel("end to end (ms, stacked geomeans)")
    ax.legend(fontsize=7)
    ax = axes[1][1]
    cov = report["coverage"]
    budgets = [c["budget"] for c in cov]
    ax.plot(budgets, [100 * c["coverage"] for c in cov], "o-", label="coverage (test)")
    ax.set_xlabel("stored combinations of example blocks (budget)")
    ax.set_ylabel("coverage of example blocks (%)")
    ax2 = ax.twinx()
    ax2.plot(budgets, [c["storage_mb"] for c in cov], "s--", color="gray")
    ax2.set_ylabel("storage (MB)", color="gray")
    r = report["ratios"]
    fig.suptitle(
        f"{report['model']}: {report['requests']} BFCL multi-turn requests; Planner prefill "
        f"x{r['planner_prefill_promptweaver']:.2f}, "
        f"Arbiter prefill x{r['arbiter_prefill_promptweaver']:.2f}, "
        f"Planner decode x{r['planner_decode_exspec']:.2f}, end to end x{r['e2e_all']:.2f}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _print(report: dict[str, Any], console: Console) -> None:
    s = report["summary"]
    table = Table(title=f"pipeline on {report['model']} ({report['requests']} requests)")
    table.add_column("metric")
    for name in report["configs"]:
        table.add_column(name, justify="right")
    for metric in (*TIME_METRICS, *MEAN_METRICS):
        table.add_row(metric, *[f"{s[n][metric]:.2f}" for n in report["configs"]])
    console.print(table)
    for key, value in report["ratios"].items():
        console.print(f"{key}: {value:.2f}")
    for c in report["coverage"]:
        console.print(
            f"budget {c['budget']:>2}: coverage {100 * c['coverage']:.1f}% (train "
            f"{100 * c['coverage_train']:.1f}%), storage {c['storage_mb']:.0f} MB"
        )
    console.print(f"identical outputs: {report['identical']}")
