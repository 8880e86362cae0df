"""What `toolweave bench pipeline` reports from its rows (one per request and
configuration): summaries, speedups, per-class speedups, equal outputs, the table and
the plot."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from toolweave.adapters.bench.plotting import pyplot

__all__ = [
    "MEAN_METRICS",
    "TIME_METRICS",
    "by_class",
    "gmean",
    "identical",
    "plot_report",
    "print_report",
    "ratios",
    "summarize",
]

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


def gmean(values: Sequence[float]) -> float:
    """Geometric mean (values floored at 1e-6); NaN when empty."""
    vals = [max(v, 1e-6) for v in values]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")


def summarize(
    rows: Sequence[dict[str, Any]], configs: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Per configuration: geometric means of `TIME_METRICS`, means of `MEAN_METRICS`."""
    out: dict[str, dict[str, float]] = {}
    for config in configs:
        mine = [r for r in rows if r["config"] == config]
        stats = {m: gmean([r[m] for r in mine]) for m in TIME_METRICS}
        stats.update({m: sum(r[m] for r in mine) / len(mine) for m in MEAN_METRICS})
        out[config] = stats
    return out


def ratios(summary: dict[str, dict[str, float]]) -> dict[str, float]:
    """The headline speedups over the baseline (and accuracy changes, in points)."""
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


def by_class(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
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
                    stats[f"{stage}_{label}"] = gmean([r[key] for r in a]) / gmean(
                        [r[key] for r in b]
                    )
            groups[value] = stats
        out[field] = groups
    return out


def identical(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
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


def plot_report(report: dict[str, Any], path: Path) -> None:
    """The PNG: prefill, decode, stacked end-to-end times, and PromptWeaver's coverage."""
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


def print_report(report: dict[str, Any], console: Console) -> None:
    """The summary table, the ratios, the coverage per budget and the equal outputs."""
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
