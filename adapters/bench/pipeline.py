"""`toolweave bench pipeline`: the plan-out pipeline on BFCL multi-turn requests, five ways.

    toolweave bench pipeline --json OUT --plot OUT.png [--requests N] [--budget B]
                             [--cache-limit SIZE]

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
``--state-dir`` (kept between runs): the first ``--budget`` combinations, fewer when
they would not fit the cache limit (``--cache-limit``, else ``$TOOLWEAVE_CACHE_LIMIT``,
else 4 GiB; the report gives both budgets). Reported: Planner and Arbiter prefill time and
uncached tokens, decode time (the fastest of ``--decode-repeats`` decodes of the same
prompt, 5 by default: the output is deterministic and the minimum drops scheduler
noise, equally for every configuration) and tokens per pass, end-to-end latency
(geometric means),
Planner accuracy (plan DAG equals the ground truth's), n-gram table build time and size,
and PromptWeaver's coverage and storage for several budgets.

Two engines on the same model file, both with the engine's defaults (every pass on all
cores, flash attention off, as a plain llama-cpp-python user runs): the baseline's and
the four toolweave configurations'. ExSpec decides a verified token from a batched row
only past twice the engine's logit bound and otherwise by the serial step, so its output
equals plain greedy decoding; `identical` checks that on real prompts: ``both``
(PromptWeaver + ExSpec) must decode exactly what ``promptweaver`` (plain greedy on the
same engine and prompt) decodes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from toolweave.adapters.bench.bfcl_tools import bfcl_environment
from toolweave.adapters.bench.pipeline_stages import (
    StageConfig,
    StageTimes,
    execute,
    observations,
    render_tokens,
    run_stage,
)
from toolweave.adapters.bench.pipeline_states import (
    BUDGETS,
    budget_coverage,
    build_states,
    progress_bar,
)
from toolweave.adapters.bench.pipeline_summary import (
    by_class,
    identical,
    plot_report,
    print_report,
    ratios,
    summarize,
)
from toolweave.disk_cache import cache_root, parse_size
from toolweave.eval.plan_scoring import plan_matches
from toolweave.eval.workload import PlanRequest, load_workload, tool_themes
from toolweave.models import MODELS, resolve_model
from toolweave.native.calibration import engine_costs
from toolweave.native.engine import Engine
from toolweave.native.states.prefixes import PrefixStates
from toolweave.plan.format import PlanError
from toolweave.plan.grammar import arbiter_grammar, plan_grammar
from toolweave.plan.parse import parse_plan
from toolweave.plan.prompts import ARBITER_EXAMPLES, arbiter_messages, planner_messages
from toolweave.prompting.combinations import select_combinations
from toolweave.prompting.promptweaver import PromptWeaver, fit_weavers, training_sequences
from toolweave.prompting.toolrag import ToolRAG, ToolRAGResult

__all__ = ["CONFIGS", "bench_pipeline", "selected_tools"]

CONFIGS = (
    StageConfig("baseline", invariant=False),
    StageConfig("promptweaver", weave=True),
    StageConfig("exspec", exspec=True),
    StageConfig("both", weave=True, exspec=True),
    StageConfig("all", weave=True, exspec=True, jump=True),
)
N_CTX = 8192


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
        Path | None,
        typer.Option(
            "--state-dir", help="Where prefix states are kept (default: <cache>/prefix-states)."
        ),
    ] = None,
    cache_limit: Annotated[
        str | None,
        typer.Option(
            "--cache-limit",
            help="Bytes toolweave's state directories may hold, e.g. 2GiB or none "
            "(default: $TOOLWEAVE_CACHE_LIMIT, else 4GiB).",
        ),
    ] = None,
) -> None:
    """Plan-out pipeline: baseline vs PromptWeaver, ExSpec, both, and both + jump."""
    if cache_limit is not None:
        try:
            parse_size(cache_limit)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--cache-limit") from None
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
        state_dir=state_dir if state_dir is not None else cache_root() / "prefix-states",
        decode_repeats=decode_repeats,
        cache_limit=cache_limit,
    )
    report["load_average"] = {"before": load_before, "after": os.getloadavg()}
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if plot is not None:
        plot_report(report, plot)
    print_report(report, Console(highlight=False))


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
    cache_limit: int | str | None = None,
) -> dict[str, Any]:
    """Set everything up, run every request under every configuration, summarise."""
    path = resolve_model(model)  # a bad --model fails before the slow set-up
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

    with (
        Engine(path, n_ctx=N_CTX) as engine,
        Engine(path, n_ctx=N_CTX, n_seq_max=2) as plain,
    ):
        costs = engine_costs(engine)
        states = PrefixStates(state_dir, engine, disk_limit=cache_limit)
        built = build_states(console, engine, states, weavers, chosen, budget)
        coverage = budget_coverage(states, built, train_seqs, test_seqs, chosen)
        states.select(set(built.static.values()) | set(built.combos) | {built.arbiter})
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
    summary = summarize(rows, [c.name for c in CONFIGS])
    return {
        "suite": "pipeline",
        "benchmark": "pipeline",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "model": model_name,
        "configs": [c.name for c in CONFIGS],
        "requests": len(sample),
        "budget": built.budget,
        "budget_requested": budget,
        "k_baseline": k_baseline,
        "k_weave": k_weave,
        "decode_repeats": decode_repeats,
        "summary": summary,
        "ratios": ratios(summary),
        "by_class": by_class(rows),
        "identical": identical(rows),
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
    with progress_bar(console, "pipeline") as bar:
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
