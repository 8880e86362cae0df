"""Rewriting KV cells the way the reference decoder writes them.

Where single-token steps and multi-token passes compute slightly different numbers (every
engine but the exact one, `toolweave.native.numerics`), the KV cells a verification pass
writes are not bit-for-bit the cells the reference decoder (`jump`, or plain greedy
decoding) would have written for the same tokens, and a later step reading them can sit
up to the measured bound away from the reference step. A choice that such a step cannot
decide (its best token leads by no more than twice the bound) is decided after those
cells are written again in exactly the reference decoder's passes: that is what `replay`
does, from the first cell a verification pass wrote (`KVDrift`), when that costs at most
`MAX_REWRITE_PASSES` passes. A longer rewrite would cost more than the drafts saved, so
the step decides there as it is, within the kernels' own rounding of the reference (the
plain decoder on another thread count differs as much), and the position is logged as a
near tie of kind "drift".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from toolweave.native.constraints import TokenMatcher
from toolweave.native.engine import BatchToken, Engine

__all__ = ["MAX_REWRITE_PASSES", "KVDrift", "pass_starts", "replay"]

#: Most passes a rewrite of drifted KV cells may take.
MAX_REWRITE_PASSES = 8


@dataclass
class KVDrift:
    """Where a sequence's KV stops being what the reference decoder writes.

    `start` is the index (in the decoder's own token list) of the first token whose cells
    a verification pass wrote, or None while every cell is the reference's. `matcher` is
    the grammar state just after that token (None without a grammar), from which the
    reference decoder's passes over the later tokens are found again.
    """

    start: int | None = None
    matcher: TokenMatcher | None = None
    #: A rewrite was found too long: the region only grows, so later ones are not tried.
    too_long: bool = False

    @property
    def dirty(self) -> bool:
        return self.start is not None

    def mark(self, index: int, matcher: TokenMatcher | None) -> None:
        """Token `index` and every later one were written by a verification pass (a
        start already marked stays: the earliest one counts)."""
        if self.start is None:
            self.start = index
            self.matcher = matcher

    def clear(self) -> None:
        self.start = None
        self.matcher = None
        self.too_long = False


def pass_starts(
    after_first: TokenMatcher | None, tokens: Sequence[int], *, jump: bool
) -> list[int]:
    """Offsets in `tokens` where the reference decoder's passes begin, `tokens[0]` being a
    token it chose (a pass begins there).

    Without `jump` every token is its own pass. With it, a run the grammar forces rides in
    the pass of the chosen token before it, so passes begin at the chosen tokens only;
    `after_first` is the grammar state after `tokens[0]` (copied, not changed)."""
    if not jump or after_first is None:
        return list(range(len(tokens)))
    probe = after_first.copy()
    starts = [0] if tokens else []
    i = 1
    while i < len(tokens) and not probe.stopped:
        forced = probe.forced()
        if forced:
            run = list(tokens[i : i + len(forced)])
            if run != forced[: len(run)]:  # not what the grammar forces: a choice after all
                starts.append(i)
                probe.consume(tokens[i])
                i += 1
                continue
            probe.consume_many(run)
            i += len(run)
            continue
        starts.append(i)
        probe.consume(tokens[i])
        i += 1
    return starts


def replay(
    engine: Engine, seq: int, pos: int, tokens: Sequence[int], starts: Sequence[int]
) -> NDArray[np.float32]:
    """Remove the cells of `seq` from `pos` on and forward `tokens` there again, one pass
    per slice of `starts`, each asking only its last token's logits as the reference
    decoder does; returns the last pass's logits (predicting the token after `tokens`)."""
    if not tokens or not starts or starts[0] != 0:
        raise ValueError("replay needs tokens and pass starts beginning at 0")
    engine.seq_remove(seq, pos)
    bounds = [*starts, len(tokens)]
    logits: NDArray[np.float32] | None = None
    for a, b in pairwise(bounds):
        if b <= a:
            continue
        run = tokens[a:b]
        items = [BatchToken(t, pos + a + i, (seq,), i == len(run) - 1) for i, t in enumerate(run)]
        logits = engine.forward(items)[0]
    assert logits is not None
    return logits
