"""Drawing tokens from the model's distribution (`toolweave.sampling.Sampling`).

The distribution of one position is built in this order:

1. the grammar mask (only allowed tokens; one allowed token is taken as it is),
2. top-k: the k highest logits (0: off; ties at the k-th logit are all kept),
3. top-p: the smallest set of the highest-probability tokens, probabilities taken at
   temperature 1 over what top-k kept, whose total reaches p (1: off),
4. temperature: softmax(logits / temperature) over what is left,

and a token is drawn by inverse CDF from a `numpy.random.Generator` seeded with the
settings' seed, so one seed gives one output.

`Sampler.verify` is the speculative-sampling acceptance rule for a draft token from a
deterministic drafter (its distribution q is one-hot): accept the draft d with
probability min(1, p(d) / q(d)) = p(d), otherwise draw from normalize(max(0, p - q)),
that is p without d. The token it returns is distributed exactly as `draw`'s, which is
why verified drafts leave the output distribution of plain sampling unchanged.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from toolweave.errors import ConstraintError
from toolweave.native.constraints import TokenMatcher
from toolweave.sampling import Sampling

__all__ = ["Sampler", "choose"]


class Sampler:
    """Draws tokens for one request under `sampling` (temperature > 0)."""

    def __init__(self, sampling: Sampling) -> None:
        if sampling.greedy:
            raise ValueError("a Sampler needs temperature > 0: greedy decoding takes the argmax")
        self.sampling = sampling
        self.rng = np.random.default_rng(sampling.seed)

    def distribution(
        self, logits: NDArray[np.float32], allowed: NDArray[np.bool_] | None = None
    ) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
        """The tokens that can be drawn here and their probabilities (summing to 1)."""
        x = np.asarray(logits, dtype=np.float64)
        keep = np.isfinite(x) if allowed is None else allowed & np.isfinite(x)
        ids = np.flatnonzero(keep)
        if ids.size == 0:
            raise ConstraintError("no token can be drawn here (every allowed logit is -inf)")
        if ids.size == 1:
            return ids, np.ones(1)
        vals = x[ids]
        k = self.sampling.top_k
        if 0 < k < ids.size:
            kth = np.partition(vals, -k)[-k]
            ids, vals = ids[vals >= kth], vals[vals >= kth]
        if self.sampling.top_p < 1.0 and ids.size > 1:
            order = np.lexsort((ids, -vals))  # highest logit first, lower id first on ties
            ids, vals = ids[order], vals[order]
            p = np.exp(vals - vals[0])
            cum = np.cumsum(p / p.sum())
            n = int(np.searchsorted(cum, self.sampling.top_p, side="left")) + 1
            ids, vals = ids[:n], vals[:n]
        w = np.exp((vals - vals.max()) / self.sampling.temperature)
        return ids, w / w.sum()

    def _pick(self, ids: NDArray[np.intp], probs: NDArray[np.float64]) -> int:
        if ids.size == 1:
            return int(ids[0])
        cum = np.cumsum(probs)
        i = int(np.searchsorted(cum, self.rng.random() * cum[-1], side="right"))
        return int(ids[min(i, ids.size - 1)])

    def draw(self, logits: NDArray[np.float32], allowed: NDArray[np.bool_] | None = None) -> int:
        """A token drawn from this position's distribution."""
        return self._pick(*self.distribution(logits, allowed))

    def verify(
        self,
        logits: NDArray[np.float32],
        allowed: NDArray[np.bool_] | None,
        draft: int,
    ) -> int:
        """The token taken where a deterministic drafter proposed `draft`: `draft` itself
        with probability p(draft), else a draw from p without it (the module doc)."""
        ids, probs = self.distribution(logits, allowed)
        at = np.flatnonzero(ids == draft)
        p_draft = float(probs[at[0]]) if at.size else 0.0
        if p_draft >= 1.0 or (p_draft > 0.0 and self.rng.random() < p_draft):
            return draft
        residual = probs.copy()
        if at.size:
            residual[at[0]] = 0.0
        return self._pick(ids, residual / residual.sum())


def choose(
    sampler: Sampler | None,
    matcher: TokenMatcher | None,
    logits: NDArray[np.float32],
    draft: int | None = None,
) -> int:
    """The next token: the greedy one without a sampler (exactly `TokenMatcher.best` or
    the argmax), else drawn under the grammar's mask (`Sampler.verify` when a drafter
    proposed `draft` here)."""
    if sampler is None:
        return matcher.best(logits) if matcher is not None else int(np.argmax(logits))
    allowed = matcher.mask() if matcher is not None else None
    if draft is None:
        return sampler.draw(logits, allowed)
    return sampler.verify(logits, allowed, draft)
