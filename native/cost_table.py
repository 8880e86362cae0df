"""The cost table: measured milliseconds of the engine's passes and the estimates built on them.

`CostTable` holds what `toolweave.native.calibration.measure_costs` timed: the serial
step, the k-sequence and k-token verification passes keyed by k, prefill per token and
the KV state figures of one sequence. `CostTable.pass_ms(k_tokens, logit_rows)`
interpolates linearly between the measured points, so a decoder can compare plans;
`to_dict` and `from_dict` turn a table into JSON-ready data and back.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

__all__ = ["CostTable"]


def _frozen(points: Mapping[int, float]) -> Mapping[int, float]:
    return MappingProxyType({int(k): float(v) for k, v in sorted(points.items())})


def _interp(points: Mapping[int, float], k: float) -> float:
    """Linear interpolation over sorted integer keys; clamped to the end points."""
    keys = sorted(points)
    if k <= keys[0]:
        return points[keys[0]]
    for lo, hi in itertools.pairwise(keys):
        if k <= hi:
            w = (k - lo) / (hi - lo)
            return points[lo] * (1 - w) + points[hi] * w
    return points[keys[-1]]


@dataclass(frozen=True)
class CostTable:
    """Measured milliseconds of the engine's passes; pass maps are keyed by k (tokens).

    `sequences_ms[k]`: k sequences sharing a prefix, one token each, logits for all.
    `verify_all_ms[k]` / `verify_last_ms[k]`: k tokens in one sequence, logits for every
    row / for the last row only. Key 1 of each map is `serial_step_ms`. State figures are
    for one sequence of `state_tokens` tokens (600 in a thorough run, the prefix in a
    quick one); `state_restore_ms` scales them to other lengths.
    """

    model: str
    n_threads: int
    context_tokens: int
    serial_step_ms: float
    sequences_ms: Mapping[int, float]
    verify_all_ms: Mapping[int, float]
    verify_last_ms: Mapping[int, float]
    prefill_ms_per_token: float
    state_tokens: int
    state_bytes: int
    state_get_ms: float
    state_set_ms: float
    state_save_ms: float
    state_load_ms: float
    repeats: int
    quick: bool
    measure_ms: float = 0.0

    def __post_init__(self) -> None:
        for name in ("sequences_ms", "verify_all_ms", "verify_last_ms"):
            points = getattr(self, name)
            if not points or 1 not in points:
                raise ValueError(f"{name} needs at least the k=1 point")
            object.__setattr__(self, name, _frozen(points))
        if self.serial_step_ms <= 0:
            raise ValueError("serial_step_ms must be positive")

    # ------------------------------------------------------------------ ratios
    def sequences_ratio(self, k: int) -> float:
        """Cost of a k-sequence pass relative to one serial step."""
        return self.pass_ms(k, k, sequences=True) / self.serial_step_ms

    def verify_ratio(self, k: int, *, last_only: bool = False) -> float:
        """Cost of a k-token verification pass relative to one serial step."""
        return self.pass_ms(k, 1 if last_only else k) / self.serial_step_ms

    def prefill_ratio(self) -> float:
        """Cost of prefilling one token relative to one serial step."""
        return self.prefill_ms_per_token / self.serial_step_ms

    # ------------------------------------------------------------------ planning
    def pass_ms(self, k_tokens: int, logit_rows: int, *, sequences: bool = False) -> float:
        """Estimated ms of one pass of `k_tokens` tokens asking `logit_rows` logits rows.

        One sequence by default; `sequences=True` puts each token in its own sequence
        over a shared prefix (parallel values). Between measured k the estimate is linear;
        past the largest measured k each extra token costs `prefill_ms_per_token`.
        """
        if k_tokens < 1 or not 0 <= logit_rows <= k_tokens:
            raise ValueError(
                f"need k_tokens >= 1 and 0 <= logit_rows <= k_tokens, got {k_tokens}, {logit_rows}"
            )
        k_max = max(self.verify_last_ms)
        k = min(k_tokens, k_max)
        last = _interp(self.verify_last_ms, k) + (k_tokens - k) * self.prefill_ms_per_token
        ms = last + (logit_rows - 1) * self._row_ms(k)
        if sequences:
            ms += self._sequence_overhead_ms(k_tokens)
        # A pass never costs less than half its logits-for-the-last-row price here.
        return max(ms, 0.5 * last)

    def state_restore_ms(self, n_tokens: int, *, from_file: bool = False) -> float:
        """Estimated ms to restore a saved KV state of `n_tokens` tokens (linear in size)."""
        ms = self.state_load_ms if from_file else self.state_set_ms
        return ms * n_tokens / max(1, self.state_tokens)

    def _row_ms(self, k: float) -> float:
        """Extra ms of one more logits row in a pass of about k tokens."""
        rows = {
            n: max(0.0, (self.verify_all_ms[n] - self.verify_last_ms[n]) / (n - 1))
            for n in self.verify_all_ms
            if n > 1 and n in self.verify_last_ms
        }
        return _interp(rows, k) if rows else 0.0

    def _sequence_overhead_ms(self, k_tokens: int) -> float:
        """Extra ms of spreading k tokens over k sequences instead of one."""
        over = {
            n: self.sequences_ms[n] - self.verify_all_ms[n]
            for n in self.sequences_ms
            if n in self.verify_all_ms
        }
        k_max = max(over)
        if k_tokens <= k_max:
            return _interp(over, k_tokens)
        return over[k_max] * k_tokens / k_max

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every field (pass maps keyed by str(k)) plus the ratios."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else value
            )
        ks = range(1, max(self.verify_last_ms) + 1)
        out["ratios"] = {
            "sequences": {str(k): self.sequences_ratio(k) for k in ks},
            "verify_all": {str(k): self.verify_ratio(k) for k in ks},
            "verify_last": {str(k): self.verify_ratio(k, last_only=True) for k in ks},
            "prefill_per_token": self.prefill_ratio(),
        }
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostTable:
        """Rebuild a table from `to_dict` output (the ratios are recomputed, not read)."""
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if isinstance(value, Mapping):
                value = {int(k): float(v) for k, v in value.items()}
            kwargs[f.name] = value
        return cls(**kwargs)
