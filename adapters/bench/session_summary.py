"""What `toolweave bench session` reports from its turn records: per phase and
configuration, the medians and means of the turns (`summarize`), the ratios of
ChatToolweave against `ChatLlamaCpp` and of the session drafts (`ratios`), the tables
(`print_report`) and the plot (`plot_report`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from toolweave.adapters.bench.plotting import pyplot

__all__ = ["by_source", "plot_report", "print_report", "ratios", "summarize"]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per phase and configuration: medians of the latencies, means of the counts, on
    how many turns the calls equal those of ``constrained`` in the same phase, the
    session drafts' acceptance, and the same latencies and passes on later turns (the
    second turn on, where a session has a past to draft from)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    ref = {
        (r["phase"], r["conversation"], r["turn"]): r["calls"]
        for r in records
        if r["config"] == "constrained"
    }
    for phase in dict.fromkeys(r["phase"] for r in records):
        rows = [r for r in records if r["phase"] == phase]
        out[phase] = {}
        for name in dict.fromkeys(r["config"] for r in rows):
            mine = [r for r in rows if r["config"] == name]
            later = [r for r in mine if r["turn"] > 0]
            keys = [(phase, r["conversation"], r["turn"]) for r in mine]
            same = [r["calls"] == ref[k] for r, k in zip(mine, keys, strict=True) if k in ref]
            firsts = [r["first_tool_ms"] for r in mine if r["first_tool_ms"] is not None]
            drafted = sum(r.get("session_drafted", 0) for r in mine)
            accepted = sum(r.get("session_accepted", 0) for r in mine)
            out[phase][name] = {
                "turns": len(mine),
                "turn_ms_median": _median([r["turn_ms"] for r in mine]),
                # Background work a turn left (state saves), waited for untimed.
                "settle_ms_median": _median([r.get("settle_ms", 0.0) for r in mine]),
                "first_tool_ms_median": _median(firsts),
                "turns_with_tool": len(firsts),
                "prefilled_tokens_mean": statistics.fmean(r["prefilled_tokens"] for r in mine),
                "decode_passes_mean": statistics.fmean(r["decode_passes"] for r in mine),
                "errors": sum(1 for r in mine if r["error"]),
                "same_calls_as_constrained": sum(same) if same else None,
                "session_drafted": drafted,
                "session_accepted": accepted,
                "session_acceptance": accepted / drafted if drafted else None,
                "later_turns": len(later),
                "later_first_tool_ms_median": _median(
                    [r["first_tool_ms"] for r in later if r["first_tool_ms"] is not None]
                ),
                "later_decode_passes_mean": statistics.fmean(r["decode_passes"] for r in later)
                if later
                else None,
                "breakdown": _breakdown(mine),
                "later_breakdown": _breakdown(later),
            }
    return out


#: The parts of the time to the first tool start, then of the turn, a record carries.
_PARTS = (
    "first_tool_prefill_ms",
    "first_tool_decode_ms",
    "first_tool_other_ms",
    "turn_prefill_ms",
    "turn_decode_ms",
    "turn_tools_ms",
    "turn_other_ms",
)


def _breakdown(rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """Medians of where the time went (records of runs before the breakdown have none)."""
    return {part: _median([r[part] for r in rows if r.get(part) is not None]) for part in _PARTS}


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def ratios(summary: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """Per phase: ChatToolweave as shipped against `ChatLlamaCpp` in time to the first
    tool start and turn latency (how many times faster), and what the session drafts
    add on later turns (``no_session_drafts`` over ``toolweave``); the same for tools
    started early (``early_tools``: against `ChatLlamaCpp`, and over ``toolweave`` on
    later turns)."""
    out: dict[str, dict[str, float | None]] = {}
    for phase, rows in summary.items():
        tw = rows.get("toolweave", {})
        base = rows.get("chat_llama_cpp", {})
        bare = rows.get("no_session_drafts", {})
        early = rows.get("early_tools", {})
        out[phase] = {
            "first_tool_vs_chat_llama_cpp": _ratio(
                base.get("first_tool_ms_median"), tw.get("first_tool_ms_median")
            ),
            "turn_vs_chat_llama_cpp": _ratio(base.get("turn_ms_median"), tw.get("turn_ms_median")),
            "session_drafts_later_first_tool": _ratio(
                bare.get("later_first_tool_ms_median"), tw.get("later_first_tool_ms_median")
            ),
            "session_drafts_later_decode_passes": _ratio(
                bare.get("later_decode_passes_mean"), tw.get("later_decode_passes_mean")
            ),
            "early_tools_first_tool_vs_chat_llama_cpp": _ratio(
                base.get("first_tool_ms_median"), early.get("first_tool_ms_median")
            ),
            "early_tools_later_first_tool": _ratio(
                tw.get("later_first_tool_ms_median"), early.get("later_first_tool_ms_median")
            ),
        }
    return out


def by_source(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The summary and ratios of each source of conversations ("bfcl": BFCL's, each with
    its own tools; "mcp": the demo servers', one tool set for all) when a run has both:
    how a session fares depends on whether its tool prompt was seen before."""
    sources = list(dict.fromkeys(str(r["source"]) for r in records if r.get("source")))
    if len(sources) < 2:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for source in sources:
        summary = summarize([r for r in records if r.get("source") == source])
        out[source] = {"summary": summary, "ratios": ratios(summary)}
    return out


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}{unit}"
    return f"{value}{unit}"


def print_report(report: dict[str, Any], console: Console) -> None:
    """One table per phase (medians; means of counts), its ratios below it."""
    for phase, rows in report["summary"].items():
        table = Table(title=f"session turns, {phase.replace('_', ' ')} (medians; means of counts)")
        for col in ("config", "turns", "1st tool", "turn", "prefilled", "decode passes"):
            table.add_column(col, justify="left" if col == "config" else "right")
        table.add_column("same calls as constrained", justify="right")
        table.add_column("session drafts accepted", justify="right")
        table.add_column("errors", justify="right")
        for name, m in rows.items():
            same = m["same_calls_as_constrained"]
            drafted = m.get("session_drafted", 0)
            table.add_row(
                name,
                str(m["turns"]),
                _fmt(m["first_tool_ms_median"], " ms"),
                _fmt(m["turn_ms_median"], " ms"),
                _fmt(m["prefilled_tokens_mean"]),
                _fmt(m["decode_passes_mean"]),
                "-" if same is None else f"{same}/{m['turns']}",
                f"{m['session_accepted']}/{drafted}" if drafted else "-",
                str(m["errors"]),
            )
        console.print(table)
        console.print(_breakdown_table(phase, rows))
        _print_ratios("", report.get("ratios", {}).get(phase, {}), console)
        for source, part in report.get("by_source", {}).items():
            _print_ratios(f"{source}: ", part["ratios"].get(phase, {}), console)


def _print_ratios(label: str, r: dict[str, float | None], console: Console) -> None:
    shown = {k: f"x{v:.2f}" for k, v in r.items() if v is not None}
    if shown:
        console.print(f"  {label}" + ", ".join(f"{k} {v}" for k, v in shown.items()))


def _breakdown_table(phase: str, rows: dict[str, dict[str, Any]]) -> Table:
    """Where the time to the first tool start goes, over all turns and over later turns
    (prefill; decoding, the rest of the model calls; the rest: agent and LangChain)."""
    table = Table(title=f"where the time to the first tool goes, {phase.replace('_', ' ')}")
    table.add_column("config")
    for col in ("prefill", "decode", "other", "later: prefill", "decode", "other", "tools/turn"):
        table.add_column(col, justify="right")
    for name, m in rows.items():
        b, later = m.get("breakdown", {}), m.get("later_breakdown", {})
        table.add_row(
            name,
            *(_fmt(b.get(f"first_tool_{p}_ms")) for p in ("prefill", "decode", "other")),
            *(_fmt(later.get(f"first_tool_{p}_ms")) for p in ("prefill", "decode", "other")),
            _fmt(b.get("turn_tools_ms")),
        )
    return table


def plot_report(report: dict[str, Any], path: Path) -> None:
    """Bars per configuration and phase: time to the first tool start, turn latency."""
    plt = pyplot()
    summary = report["summary"]
    names = list(dict.fromkeys(n for rows in summary.values() for n in rows))
    phases = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(phases))
    for ax, key, title in (
        (axes[0], "first_tool_ms_median", "time to first tool start (median, ms)"),
        (axes[1], "turn_ms_median", "turn latency (median, ms)"),
    ):
        for j, phase in enumerate(phases):
            values = [summary[phase].get(n, {}).get(key) or 0.0 for n in names]
            xs = [i + (j - (len(phases) - 1) / 2) * width for i in range(len(names))]
            ax.bar(xs, values, width=width, label=phase.replace("_", " "))
        ax.set_xticks(range(len(names)), names, rotation=15)
        ax.set_title(title)
        ax.legend()
    template = report.get("chat_template")
    on = f" with the {template} template" if template else ""
    fig.suptitle(f"LangChain agent sessions on {report['model']['name']}{on}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
