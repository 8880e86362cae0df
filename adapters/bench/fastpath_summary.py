"""What `toolweave bench fastpath` reports from its runs (one dict of `CallResult` per
BFCL case, keyed by mode): per mode the geometric means, passes, correctness and
agreement with `constrained` (`summarize`, with what SchemaFill forecasts add, the
speedups per number of arguments and where `lossless` parts from `jump`), the cost-model
ceiling (`ceiling`) and the peak resident memory (`memory_summary`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from toolweave.eval.bfcl import BfclCase
from toolweave.eval.modebench import geomean
from toolweave.eval.scoring import match_calls
from toolweave.modes import MODES
from toolweave.native.calibration import CostTable
from toolweave.results import CallResult

__all__ = ["FORECAST_OFF", "FORECAST_ON", "ceiling", "memory_summary", "summarize"]

#: The keys under which a case's results hold `lossless` with SchemaFill forecasts on
#: and off (one is `lossless` itself, the other the run with them switched).
FORECAST_ON, FORECAST_OFF = "lossless_forecast_on", "lossless_forecast_off"


def memory_summary(
    memory: dict[str, list[tuple[int, int]]], modes: Sequence[str] = MODES
) -> dict[str, Any] | None:
    """Per mode: the highest peak resident memory of any call, and the largest rise a
    call caused above the memory resident when it started (both MB); None if unmeasured."""
    if not {*modes, "constrained"} <= set(memory):
        return None
    mb = 1024 * 1024
    out = {
        mode: {
            "peak_mb": max(p for p, _ in memory[mode]) / mb,
            "max_rise_mb": max(r for _, r in memory[mode]) / mb,
        }
        for mode in modes
    }
    for m in out.values():
        m["peak_vs_constrained_mb"] = m["peak_mb"] - out["constrained"]["peak_mb"]
    return out


def summarize(
    cases: Sequence[BfclCase], runs: Sequence[dict[str, CallResult]], chosen: Sequence[str] = MODES
) -> dict[str, Any]:
    """Per mode of `chosen`: geometric means of time to tool and total time, decode passes
    per call, the share correct and the share agreeing with `constrained`, the mean phase
    times, and speedups over `constrained`; then, when their modes ran, what forecasts
    add, the speedups per number of arguments and how often `lossless` equals `jump`."""
    modes: dict[str, Any] = {}
    for mode in chosen:
        rs = [r[mode] for r in runs]
        correct = [
            bool(match_calls(r.calls, c.expected, specs=c.tools))
            for r, c in zip(rs, cases, strict=True)
        ]
        agree = [
            [x.to_dict() for x in r.calls] == [x.to_dict() for x in run["constrained"].calls]
            for r, run in zip(rs, runs, strict=True)
            if "constrained" in run
        ]
        phases: dict[str, float] = {}
        for r in rs:
            for k, v in r.stats.phases_ms.items():
                phases[k] = phases.get(k, 0.0) + v / len(rs)
        modes[mode] = {
            "time_to_tool_ms": geomean([r.stats.time_to_tool_ms or r.stats.total_ms for r in rs]),
            "total_ms": geomean([r.stats.total_ms for r in rs]),
            "decode_passes": sum(r.stats.decode_passes for r in rs) / len(rs),
            "correct": sum(correct) / len(rs),
            "agree_with_constrained": sum(agree) / len(rs) if agree else None,
            "mean_phases_ms": phases,
        }
    base = modes.get("constrained")
    for m in modes.values():
        m["speedup_time_to_tool_vs_constrained"] = (
            base["time_to_tool_ms"] / m["time_to_tool_ms"] if base else None
        )
        m["speedup_total_vs_constrained"] = base["total_ms"] / m["total_ms"] if base else None
        m["passes_vs_constrained"] = m["decode_passes"] / base["decode_passes"] if base else None
    out: dict[str, Any] = {"modes": modes, "calls": len(runs)}
    if tuple(chosen) == MODES:
        out["forecast"] = _forecast_summary(cases, runs)
    if base:
        out["by_arguments"] = _by_arguments(cases, runs, chosen)
    if {"jump", "lossless"} <= set(chosen):
        out["lossless_equals_jump"] = sum(r["lossless"].tokens == r["jump"].tokens for r in runs)
        out["lossless_differs"] = _differences(cases, runs)
    return out


def ceiling(runs: Sequence[dict[str, CallResult]], costs: CostTable) -> dict[str, float]:
    """The cost model that bounds any decoder writing the same tokens on this engine.

    `constrained` pays a serial step per output token. A token the grammar forces can
    ride in another pass for `r` = prefill/serial step; a token the model chooses costs a
    step unless drafted: in k parallel sequences it costs ``sequences_ratio(k) / k`` plus
    its write-back `r`. With `c` the share of chosen tokens (measured on `jump`):
    no drafts: ``1 / (c + (1 - c) r)``; every chosen token in the best parallel width:
    ``1 / (c min(1, p) + (1 - c) r)``; every token drafted and accepted: ``1 / r``.
    """
    decoded = sum(r["jump"].stats.decoded_tokens for r in runs)
    output = sum(r["jump"].stats.output_tokens for r in runs)
    c = decoded / output if output else 1.0
    r = costs.prefill_ratio()
    widths = sorted(costs.sequences_ms)
    p = min(costs.sequences_ratio(k) / k + r for k in widths)
    best_k = min(widths, key=lambda k: costs.sequences_ratio(k) / k)
    return {
        "chosen_share": c,
        "prefill_ratio": r,
        "parallel_token_cost": p,
        "parallel_width": float(best_k),
        "bound_no_drafts": 1 / (c + (1 - c) * r),
        "bound_parallel_values": 1 / (c * min(1.0, p) + (1 - c) * r),
        "bound_all_drafted": 1 / r,
    }


def _differences(
    cases: Sequence[BfclCase], runs: Sequence[dict[str, CallResult]]
) -> list[dict[str, Any]]:
    """Every call where `lossless` wrote other tokens than `jump`: where they part, and
    the near ties `lossless` logged (a difference is explained by a "drift" tie at or
    before that position)."""
    out = []
    for case, run in zip(cases, runs, strict=True):
        a, b = run["jump"].tokens, run["lossless"].tokens
        if a == b:
            continue
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        at = min(len(a), len(b)) if at is None else at
        ties = [asdict(t) for t in run["lossless"].stats.near_ties]
        explained = any(t["kind"] == "drift" and t["position"] <= at for t in ties)
        out.append({"case": case.id, "first_difference": at, "near_ties": ties,
                    "explained_by_drift_tie": explained})  # fmt: skip
    return out


def _forecast_summary(
    cases: Sequence[BfclCase], runs: Sequence[dict[str, CallResult]]
) -> dict[str, dict[str, float]]:
    """What SchemaFill forecasts add to `lossless`, per group of categories: speedups of
    geometric-mean total time and time to tool over `lossless` without them, decode
    passes per call, and the share of forecast tokens the model accepted."""
    groups = {
        "parallel": [i for i, c in enumerate(cases) if c.category.startswith("parallel")],
        "single": [i for i, c in enumerate(cases) if not c.category.startswith("parallel")],
        "all": list(range(len(cases))),
    }
    out: dict[str, dict[str, float]] = {}
    for name, idx in groups.items():
        if not idx:
            continue
        on = [runs[i][FORECAST_ON] for i in idx]
        off = [runs[i][FORECAST_OFF] for i in idx]
        drafted = sum(r.stats.forecast_drafted_tokens for r in on)
        out[name] = {
            "calls": len(idx),
            "speedup_total": geomean([r.stats.total_ms for r in off])
            / geomean([r.stats.total_ms for r in on]),
            "speedup_time_to_tool": geomean(
                [r.stats.time_to_tool_ms or r.stats.total_ms for r in off]
            )
            / geomean([r.stats.time_to_tool_ms or r.stats.total_ms for r in on]),
            "passes": sum(r.stats.decode_passes for r in on) / len(idx),
            "passes_without": sum(r.stats.decode_passes for r in off) / len(idx),
            "forecast_tokens": drafted / len(idx),
            "acceptance": sum(r.stats.forecast_accepted_tokens for r in on) / drafted
            if drafted
            else 0.0,
            "same_tokens": sum(a.tokens == b.tokens for a, b in zip(on, off, strict=True)),
        }
    return out


def _by_arguments(
    cases: Sequence[BfclCase], runs: Sequence[dict[str, CallResult]], modes: Sequence[str] = MODES
) -> dict[str, dict[str, float]]:
    """Time-to-tool speedup over `constrained` per number of arguments in the expected
    calls (`n_args`, what the sample is spread over; "6+" pools the larger ones)."""
    groups: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        groups.setdefault(str(case.n_args) if case.n_args < 6 else "6+", []).append(i)
    out: dict[str, dict[str, float]] = {}
    for key in sorted(groups):
        rows = [runs[i] for i in groups[key]]

        def ttt(mode: str, rows: list[dict[str, CallResult]] = rows) -> float:
            return geomean([r[mode].stats.time_to_tool_ms or r[mode].stats.total_ms for r in rows])

        base = ttt("constrained")
        out[key] = {"calls": len(rows), **{m: base / ttt(m) for m in modes}}
    return out
