"""The per-suite sections of REPORT.md: each suite's JSON turned into Markdown lines.

`render_engine`, `render_fastpath`, `render_serving`, `render_pipeline` and
`render_session` read the layouts written by `toolweave bench engine`, `fastpath`,
`serving`, `pipeline` and `session`; a missing key raises (KeyError, TypeError and the
like), which `toolweave.adapters.bench.report` reports in the suite's section. `md_table`
writes a Markdown table with numbers rounded to about 3 significant figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "Doc",
    "md_table",
    "render_engine",
    "render_fastpath",
    "render_pipeline",
    "render_serving",
    "render_session",
]

Doc = Mapping[str, Any]


# ---------------------------------------------------------------------- Markdown
def _num(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        size = abs(value)
        return f"{value:.0f}" if size >= 100 else f"{value:.1f}" if size >= 10 else f"{value:.2f}"
    return "-" if value is None else str(value).replace("|", "\\|")


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table; numbers get 3 significant figures or so."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_num(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _model(doc: Doc) -> str:
    model = doc.get("model")
    return str(model.get("name", "?")) if isinstance(model, Mapping) else str(model or "?")


# ---------------------------------------------------------------------- per-suite figures
def render_engine(doc: Doc) -> list[str]:
    table = doc["cost_table"]
    ratios = table["ratios"]
    costs = md_table(
        ["k", "k sequences", "verify, all logits", "verify, last logit"],
        [
            [
                k,
                f"x{ratios['sequences'][k]:.2f}",
                f"x{ratios['verify_all'][k]:.2f}",
                f"x{ratios['verify_last'][k]:.2f}",
            ]
            for k in table["sequences_ms"]
        ],
    )
    calls = doc["calls"]
    n_calls = next(iter(calls["modes"].values()))["calls"]
    modes = md_table(
        ["mode", "ms/token", "ms/call", "tokens/call", "passes/call", "valid"],
        [
            [
                m,
                c["ms_per_token"],
                c["ms_per_call"],
                c["output_tokens"],
                c["forward_passes"],
                f"{c['valid_rate']:.0%}",
            ]
            for m, c in calls["modes"].items()
        ],
    )
    return [
        f"Pass costs as multiples of one serial step ({table['serial_step_ms']:.2f} ms, "
        f"threads: {table['n_threads']}, {table['context_tokens']}-token prefix):",
        costs,
        f"Prefill {table['prefill_ms_per_token']:.2f} ms/token "
        f"(x{ratios['prefill_per_token']:.2f} of a step); a state of {table['state_tokens']} "
        f"tokens ({table['state_bytes'] / 1e6:.1f} MB): get {table['state_get_ms']:.1f} ms, "
        f"set {table['state_set_ms']:.1f} ms, save {table['state_save_ms']:.1f} ms, load "
        f"{table['state_load_ms']:.1f} ms.",
        f"Tool calls on the assistant tools ({n_calls} queries per mode, geometric means):",
        modes,
        f"grammar / constrained ms per token: x{calls['grammar_over_constrained']:.2f}; same "
        f"calls in {calls['agreement']:.0%} of queries.",
    ]


def render_fastpath(doc: Doc) -> list[str]:
    rows = [
        [
            mode,
            m["time_to_tool_ms"],
            m["total_ms"],
            f"x{m['speedup_time_to_tool_vs_constrained']:.2f}",
            f"x{m['speedup_total_vs_constrained']:.2f}",
            m["decode_passes"],
            f"{m['correct']:.0%}",
            f"{m['agree_with_constrained']:.0%}",
        ]
        for mode, m in doc["modes"].items()
    ]
    headers = ["mode", "time to tool ms", "total ms", "x to tool", "x total", "decode passes"]
    memory = doc.get("memory") or {}
    if memory:
        for row, mode in zip(rows, doc["modes"], strict=True):
            m = memory[mode]
            row.append(f"{m['peak_mb']:.0f} ({m['peak_vs_constrained_mb']:+.1f})")
    out = [
        f"{doc['calls']} BFCL v4 calls ({', '.join(doc['categories'])}); geometric means, "
        "speedups against `constrained`"
        + (
            "; peak resident memory per call, and its difference to `constrained`:"
            if memory
            else ":"
        ),
        md_table(
            [*headers, "correct", "same as constrained", *(["peak MB"] if memory else [])], rows
        ),
        f"`lossless` equals `jump` token for token on {doc['lossless_equals_jump']}/"
        f"{doc['calls']} calls.",
    ]
    for d in doc.get("lossless_differs") or ():
        why = "after a logged drift tie" if d["explained_by_drift_tie"] else "**unexplained**"
        out.append(f"- {d['case']}: parts from `jump` at token {d['first_difference']}, {why}.")
    phases = {
        k: v
        for k, v in doc["modes"].get("fast", {}).get("mean_phases_ms", {}).items()
        if k != "time_to_final_call"
    }
    if phases:
        out.append(
            "Where `fast` spends a call (mean ms; a pass's time is split over the tokens it "
            "carries): " + ", ".join(f"{k} {v:.0f}" for k, v in phases.items()) + "."
        )
    cap = doc.get("ceiling")
    if cap:
        out.append(
            f"Cost model (engine cost table and `jump`'s tokens): {cap['chosen_share']:.0%} of "
            f"the output tokens are chosen by the model, the rest forced; a prefilled token "
            f"costs {cap['prefill_ratio']:.2f} serial step and a value token decoded in "
            f"{cap['parallel_width']:.0f} parallel sequences then written back "
            f"{cap['parallel_token_cost']:.2f}. Ceilings over `constrained` for any decoder "
            f"writing the same tokens: x{cap['bound_no_drafts']:.2f} without drafts, "
            f"x{cap['bound_parallel_values']:.2f} with every chosen token decoded in parallel, "
            f"x{cap['bound_all_drafted']:.2f} if every token were drafted and accepted."
        )
    forecast = doc.get("forecast") or {}
    if forecast:
        out.append(
            "SchemaFill forecasts (`lossless` with and without them, same calls, interleaved):"
        )
        out.append(
            md_table(
                ["calls", "n", "x total", "x to tool", "passes", "passes without", "accepted"],
                [
                    [
                        group,
                        f["calls"],
                        f"x{f['speedup_total']:.2f}",
                        f"x{f['speedup_time_to_tool']:.2f}",
                        f["passes"],
                        f["passes_without"],
                        f"{f['acceptance']:.0%} of {f['forecast_tokens']:.1f}",
                    ]
                    for group, f in forecast.items()
                ],
            )
        )
    return out


def render_serving(doc: Doc) -> list[str]:
    steps = doc["steps"]
    rows = [
        [
            name,
            m["new_tokens_per_step"],
            f"{m['new_tokens_vs_ideal']:.2f}",
            m["step_ms_geomean"],
            f"x{m['speedup_vs_no_reuse']:.2f}",
            m["memory_mb"],
            m["disk_mb"],
            f"{m['same_output_as_no_reuse']}/{steps}",
        ]
        for name, m in doc["summary"].items()
    ]
    headers = ["prompt reuse", "new tokens/step", "x ideal", "ms/step", "speedup", "memory MB"]
    out = [
        f"{steps} agent requests, {doc['prompt_tokens_mean']:.0f} prompt tokens on average; "
        f"an ideal prefix cache prefills {doc['ideal_new_tokens_per_step']:.0f} new tokens "
        "per step (geometric means of the step time):",
        md_table([*headers, "disk MB", "same output as no_reuse"], rows),
    ]
    r = doc["restart"]
    out.append(
        f"Restart: a new engine and store found {r['checkpoints_found']} checkpoints on disk "
        f"and prefilled {sum(r['new_tokens'])} new tokens for {r['steps']} unseen requests "
        f"(ideal {sum(r['ideal_new_tokens'])}, prompts {sum(r['prompt_tokens'])}); sources: "
        f"{', '.join(r['sources'])}."
    )
    idle = doc["idle_release"]
    if idle.get("probes"):
        out.append(
            f"Idle release: resident memory {idle['rss_loaded_mb']:.0f} MB loaded, "
            f"{idle['rss_released_mb']:.0f} MB released; the first request after a release "
            f"pays {idle['penalty_ms']:.0f} ms ({idle['penalty_vs_step']:.1%} of a step), of "
            f"which recreating the context takes {idle.get('acquire_ms', 0.0):.0f} ms "
            f"(huge pages {'on' if idle.get('huge_pages') else 'off'})."
        )
    return out


def render_pipeline(doc: Doc) -> list[str]:
    summary = doc["summary"]
    metrics = list(dict.fromkeys(k for config in summary.values() for k in config))
    out = [
        "Summary per configuration:",
        md_table(
            ["config", *metrics],
            [[name, *(values.get(k) for k in metrics)] for name, values in summary.items()],
        ),
    ]
    if doc.get("ratios"):
        out += ["Ratios:", md_table(["metric", "ratio"], list(doc["ratios"].items()))]
    if doc.get("coverage"):
        keys = list(dict.fromkeys(k for row in doc["coverage"] for k in row))
        rows = [
            [f"{row.get(k, 0):.0%}" if "coverage" in k else row.get(k) for k in keys]
            for row in doc["coverage"]
        ]
        out += ["Coverage of the saved prompt states per storage budget:", md_table(keys, rows)]
    ngram = doc.get("ngram")
    if ngram:
        out.append(
            f"n-gram table: built in {ngram['build_ms']:.2f} ms, {ngram['entries']:.0f} entries."
        )
    return out


def _session_breakdown(phase: str, rows: dict[str, Any]) -> list[str]:
    """Where the time to the first tool goes on later turns (runs before the breakdown
    was recorded have none: then nothing)."""
    parts = ("first_tool_prefill_ms", "first_tool_decode_ms", "first_tool_other_ms")
    table = [
        [name, *(m["later_breakdown"][p] for p in parts), m["breakdown"]["turn_tools_ms"]]
        for name, m in rows.items()
        if m.get("later_breakdown", {}).get(parts[0]) is not None
    ]
    if not table:
        return []
    headers = ["config", "prefill ms", "decode ms", "rest ms", "tools ms a turn"]
    return [
        f"{phase.replace('_', ' ')}, where the time to the first tool goes on later turns "
        "(medians):",
        md_table(headers, table),
    ]


def render_session(doc: Doc) -> list[str]:
    convs = doc["conversations"]
    out = [
        f"{len(convs)} sessions of {doc['turns']} turns on {_model(doc)} "
        f"(llama-cpp-python on {doc['llama_threads']} threads); medians of the latencies, "
        "means of the counts; session drafts accepted/verified tokens:"
    ]
    headers = ["config", "turns", "1st tool ms", "turn ms", "prefilled", "decode passes"]
    headers += ["same calls as constrained", "session drafts", "errors"]
    for phase, rows in doc["summary"].items():
        table = [
            [
                name,
                m["turns"],
                m["first_tool_ms_median"],
                m["turn_ms_median"],
                m["prefilled_tokens_mean"],
                m["decode_passes_mean"],
                "-"
                if m["same_calls_as_constrained"] is None
                else f"{m['same_calls_as_constrained']}/{m['turns']}",
                f"{m['session_accepted']}/{m['session_drafted']}" if m["session_drafted"] else "-",
                m["errors"],
            ]
            for name, m in rows.items()
        ]
        out += [f"{phase.replace('_', ' ')}:", md_table(headers, table)]
        out += _session_breakdown(phase, rows)
    # Runs with BFCL and demo-server sessions: each source's ratios beside the run's.
    parts = [("all", doc.get("ratios", {}))]
    parts += [(source, part["ratios"]) for source, part in doc.get("by_source", {}).items()]
    ratio_rows = [
        [phase, key, *([] if len(parts) == 1 else [source]), f"x{value:.2f}"]
        for source, by_phase in parts
        for phase, values in by_phase.items()
        for key, value in values.items()
        if value is not None
    ]
    if ratio_rows:
        headers = ["phase", "metric", *([] if len(parts) == 1 else ["sessions"]), "ratio"]
        out += ["Ratios (how many times faster or fewer):", md_table(headers, ratio_rows)]
    return out
