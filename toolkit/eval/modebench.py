"""Decoding modes side by side: run every mode on the same requests, interleaved in one
process, and reduce the `CallResult`s to per-mode costs (latencies as geometric means).

The runner is a callable, so this pure module never sees the engine or the caller.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from toolweave.results import CallResult

__all__ = ["ModeComparison", "ModeCost", "compare_modes", "geomean"]

R = TypeVar("R")


def geomean(values: Sequence[float]) -> float:
    positive = [v for v in values if v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in positive)) if positive else 0.0


@dataclass(frozen=True)
class ModeCost:
    """What one decoding mode cost over a set of calls (latencies as geometric means)."""

    mode: str
    calls: int
    ms_per_token: float
    ms_per_call: float
    output_tokens: float
    forward_passes: float
    valid_rate: float

    @classmethod
    def from_results(cls, mode: str, results: Sequence[CallResult]) -> ModeCost:
        """Reduce `results`; calls without output tokens count in every mean but ms/token."""
        n = max(1, len(results))
        return cls(
            mode=mode,
            calls=len(results),
            ms_per_token=geomean(
                [r.stats.total_ms / r.stats.output_tokens for r in results if r.stats.output_tokens]
            ),
            ms_per_call=geomean([r.stats.total_ms for r in results]),
            output_tokens=sum(r.stats.output_tokens for r in results) / n,
            forward_passes=sum(r.stats.forward_passes for r in results) / n,
            valid_rate=sum(1 for r in results if r.calls and not r.invalid) / n,
        )

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ModeComparison:
    """Per-mode costs over the same requests, plus how often the modes agreed."""

    costs: Mapping[str, ModeCost]
    agreement: float

    def ratio(self, slow: str, fast: str) -> float:
        """ms per output token of `slow` over that of `fast` (> 1: `fast` is faster)."""
        denominator = self.costs[fast].ms_per_token
        return self.costs[slow].ms_per_token / denominator if denominator else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "modes": {name: cost.to_dict() for name, cost in self.costs.items()},
            "agreement": self.agreement,
        }


def compare_modes(
    requests: Sequence[R],
    modes: Sequence[str],
    run: Callable[[R, str], CallResult],
    *,
    warmup: bool = True,
    on_result: Callable[[int, str, CallResult], None] | None = None,
) -> ModeComparison:
    """Run every mode on every request, interleaved per request in one process.

    The order of the modes alternates from one request to the next so slow drift in
    machine load does not favour one mode; with `warmup` the first request is run once
    in every mode untimed. `on_result(index, mode, result)` sees each timed call.
    """
    if not modes:
        raise ValueError("at least one mode is needed")
    if warmup and requests:
        for mode in modes:
            run(requests[0], mode)
    results: dict[str, list[CallResult]] = {mode: [] for mode in modes}
    agreed = 0
    for index, request in enumerate(requests):
        order = list(modes) if index % 2 == 0 else list(reversed(modes))
        calls: list[list[dict[str, Any]]] = []
        for mode in order:
            result = run(request, mode)
            results[mode].append(result)
            calls.append([c.to_dict() for c in result.calls])
            if on_result is not None:
                on_result(index, mode, result)
        agreed += all(c == calls[0] for c in calls)
    return ModeComparison(
        costs={mode: ModeCost.from_results(mode, results[mode]) for mode in modes},
        agreement=agreed / len(requests) if requests else 0.0,
    )
