"""Divergence-point checkpoints: when to save a state, which to restore, which to evict,
and where to cut the prefill passes. Pure policy; `toolweave.native.states.store` acts on it.

Consecutive agent requests keep their rules and task and rewrite the recent history, so
the point where a new prompt departs from everything processed before (the divergence
point L) predicts the prefix the next requests will share (Tandem, section 4.2). The
store restores the best saved state covering R <= L tokens, prefills the rest, and saves
a state at L when advancing the saved coverage from R to L repays its cost: the state
copy now, one extra pass if the cut adds one, and a restore at each later hit.

All costs are milliseconds measured on the engine (`StoreCosts`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

__all__ = [
    "CheckpointInfo",
    "CheckpointPolicy",
    "CostEstimator",
    "RestoreOption",
    "StoreCosts",
    "choose_restore",
    "common_prefix",
    "plan_passes",
    "session_name",
]


def common_prefix(a: Sequence[int] | np.ndarray, b: Sequence[int] | np.ndarray) -> int:
    """Length of the longest common prefix of two token sequences."""
    m = min(len(a), len(b))
    if m == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:m]) != np.asarray(b[:m]))
    return int(diff[0]) if diff.size else m


@dataclass(frozen=True)
class StoreCosts:
    """What prefill and states cost on one engine, in milliseconds.

    ``pass_ms`` is the fixed cost of one more forward pass (what a 1-token pass costs
    beyond one token of prefill); state costs are per token of the saved sequence.
    The defaults are SmolLM2-135M on a 2-core CPU (docs/architecture.md); measure your own.
    """

    prefill_ms_per_token: float = 2.5
    pass_ms: float = 6.0
    save_ms_per_token: float = 0.03
    restore_ms_per_token: float = 0.015
    load_ms_per_token: float = 0.03

    def __post_init__(self) -> None:
        if self.prefill_ms_per_token <= 0:
            raise ValueError("prefill_ms_per_token must be positive")
        for name in ("pass_ms", "save_ms_per_token", "restore_ms_per_token", "load_ms_per_token"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")

    def restore_ms(self, n_tokens: int, *, from_disk: bool = False) -> float:
        per = self.load_ms_per_token if from_disk else self.restore_ms_per_token
        return per * n_tokens

    def save_ms(self, n_tokens: int) -> float:
        return self.save_ms_per_token * n_tokens

    def prefill_ms(self, n_tokens: int, passes: int) -> float:
        return self.prefill_ms_per_token * n_tokens + self.pass_ms * passes


class CostEstimator:
    """`StoreCosts` refined from the store's own timings (exponentially weighted).

    Passes of at most `small` tokens update the per-pass cost, passes of at least `large`
    tokens the per-token cost, each net of the other's current estimate; state timings
    update their per-token costs. Starts from `prior`. Not thread-safe.
    """

    def __init__(
        self,
        prior: StoreCosts | None = None,
        *,
        weight: float = 0.2,
        small: int = 8,
        large: int = 32,
    ) -> None:
        if not 0 < weight <= 1:
            raise ValueError("weight must be in (0, 1]")
        self._c = prior or StoreCosts()
        self.weight = weight
        self.small = small
        self.large = large

    def costs(self) -> StoreCosts:
        return self._c

    def _mix(self, old: float, new: float) -> float:
        return old + self.weight * (max(0.0, new) - old)

    def observe_pass(self, tokens: int, ms: float) -> None:
        c = self._c
        if tokens <= self.small:
            pass_ms = self._mix(c.pass_ms, ms - tokens * c.prefill_ms_per_token)
            self._c = replace(c, pass_ms=pass_ms)
        elif tokens >= self.large:
            per = self._mix(c.prefill_ms_per_token, (ms - c.pass_ms) / tokens)
            self._c = replace(c, prefill_ms_per_token=max(per, 1e-3))

    def observe_save(self, tokens: int, ms: float) -> None:
        if tokens > 0:
            per = self._mix(self._c.save_ms_per_token, ms / tokens)
            self._c = replace(self._c, save_ms_per_token=per)

    def observe_restore(self, tokens: int, ms: float, *, from_disk: bool) -> None:
        if tokens <= 0:
            return
        if from_disk:
            per = self._mix(self._c.load_ms_per_token, ms / tokens)
            self._c = replace(self._c, load_ms_per_token=per)
        else:
            per = self._mix(self._c.restore_ms_per_token, ms / tokens)
            self._c = replace(self._c, restore_ms_per_token=per)


@dataclass(frozen=True)
class RestoreOption:
    """A way to start the prompt: the live sequence (key ``None``) or a saved state."""

    key: str | None
    reuse: int
    restore_ms: float = 0.0


def choose_restore(options: Sequence[RestoreOption], costs: StoreCosts) -> RestoreOption:
    """The option that leaves the least work: prefill of the rest plus the restore.

    Ties go to the earlier option (put the live sequence first: it costs nothing).
    """
    if not options:
        raise ValueError("no restore option")
    best = options[0]
    best_ms = best.restore_ms - best.reuse * costs.prefill_ms_per_token
    for opt in options[1:]:
        ms = opt.restore_ms - opt.reuse * costs.prefill_ms_per_token
        if ms < best_ms:
            best, best_ms = opt, ms
    return best


def plan_passes(
    start: int, end: int, n_batch: int, *, cut: int | None = None, last_alone: bool = False
) -> list[tuple[int, int]]:
    """Pass boundaries ``[(lo, hi), ...]`` prefilling positions ``start..end-1``.

    A checkpoint ``cut`` strictly inside ends a pass; ``last_alone`` runs the last token in
    a pass of its own. Each stretch between forced boundaries takes the fewest passes of
    at most ``n_batch`` tokens, of near-equal size (batch consolidation: no pass carries a
    handful of tokens that fit in a neighbour, 515 tokens go as 258 + 257, not 512 + 3).
    """
    if n_batch < 1:
        raise ValueError("n_batch must be >= 1")
    if end <= start:
        return []
    marks = [start]
    if cut is not None and start < cut < end:
        marks.append(cut)
    if last_alone and end - 1 > marks[-1]:
        marks.append(end - 1)
    marks.append(end)
    passes: list[tuple[int, int]] = []
    for lo, hi in itertools.pairwise(marks):
        n = hi - lo
        k = math.ceil(n / n_batch)
        base, extra = divmod(n, k)
        pos = lo
        for i in range(k):
            size = base + (1 if i < extra else 0)
            passes.append((pos, pos + size))
            pos += size
    return passes


@dataclass(frozen=True)
class CheckpointInfo:
    """What eviction needs to know about one saved state."""

    key: str
    session: str
    n_tokens: int
    n_bytes: int
    last_used: float


@dataclass(frozen=True)
class CheckpointPolicy:
    """Divergence-point placement and eviction.

    - Save at the divergence point L (at most the prompt's end) when the saved coverage R
      is at least `threshold_tokens` behind it; at most one state per request.
    - Keep at most `max_per_session` states per session; evict the lowest
      ``recency_weight * recency + value_weight * value``, both scaled to [0, 1] over the
      candidates: recency by rank of last use, value by prefill time saved per byte.
    - `expected_hits`: how many later requests a new state is assumed to serve;
      `min_gap_tokens` a floor that keeps states from being packed closely.
    """

    max_per_session: int = 8
    expected_hits: float = 2.0
    min_gap_tokens: int = 16
    recency_weight: float = 1.0
    value_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.max_per_session < 1:
            raise ValueError("max_per_session must be >= 1")
        if self.expected_hits <= 0:
            raise ValueError("expected_hits must be positive")
        if self.min_gap_tokens < 1:
            raise ValueError("min_gap_tokens must be >= 1")

    def threshold_tokens(self, costs: StoreCosts, at: int, *, extra_passes: int = 0) -> int:
        """Smallest advance L - R that repays a state saved at position `at`.

        Each later hit saves (L - R) tokens of prefill but pays a restore; the state copy
        and any extra pass are paid now and spread over `expected_hits` hits.
        """
        now = costs.save_ms(at) + extra_passes * costs.pass_ms
        per_hit = costs.restore_ms(at)
        tokens = (now / self.expected_hits + per_hit) / costs.prefill_ms_per_token
        return max(self.min_gap_tokens, math.ceil(tokens))

    def should_checkpoint(
        self,
        *,
        divergence: int,
        covered: int,
        prompt_len: int,
        costs: StoreCosts,
        extra_passes: int = 0,
    ) -> bool:
        """Save at `divergence` when saved states cover only `covered` tokens of it."""
        if not 0 < divergence <= prompt_len:
            return False
        gap = divergence - covered
        return gap >= self.threshold_tokens(costs, divergence, extra_passes=extra_passes)

    def eviction_order(
        self, entries: Sequence[CheckpointInfo], costs: StoreCosts
    ) -> list[CheckpointInfo]:
        """`entries` from the first to evict to the last."""
        if not entries:
            return []
        order = sorted(entries, key=lambda e: (e.last_used, e.key))
        n = len(order)
        recency = {e.key: (i / (n - 1) if n > 1 else 1.0) for i, e in enumerate(order)}
        value = {
            e.key: max(
                0.0,
                costs.prefill_ms_per_token * e.n_tokens - costs.restore_ms(e.n_tokens),
            )
            / max(1, e.n_bytes)
            for e in entries
        }
        top = max(value.values()) or 1.0

        def score(e: CheckpointInfo) -> float:
            return self.recency_weight * recency[e.key] + self.value_weight * value[e.key] / top

        return sorted(entries, key=lambda e: (score(e), e.last_used, e.key))


def session_name(kind: str, head: Any) -> str:
    """A store session's name: `kind`, a colon and a digest of `head` (what all requests
    of the session share, as JSON), the same in every process. Sessions have budgets of
    their own (`CheckpointPolicy.max_per_session`), so one never evicts another's states."""
    text = json.dumps(head, sort_keys=True, default=str, ensure_ascii=False)
    return f"{kind}:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
