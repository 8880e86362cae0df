"""Verifying a draft under the real prefix in one pass (the `lossless` rule).

The draft is forwarded once; the longest prefix the `jump` decoder would itself have
written is accepted (a run the grammar forces must match whole, a token the model
chooses must be its constrained greedy choice), and at the first mismatch the decoder's
own tokens are taken instead. Logits are asked only for the rows that decide something.

A batched row's logits differ slightly from those of the pass `jump` makes for the same
token (`toolweave.native.numerics`). A choice is taken from a batched row only when its
best token leads the runner-up by more than twice the engine's logit bound; at a closer
position the verdict stops and leaves the tokens since the previous choice pending, so
the decoder forwards them in one pass, exactly the pass `jump` makes there, and decides
the position from that.

Under sampling (a `Sampler`) the same walk takes each choice by the speculative-sampling
rule instead (`Sampler.verify`: the draft token with probability p(d) under the row's
distribution, else a draw from p without it), the first choice being the caller's, and
the margin rule does not apply: the row is the target distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from toolweave.native.constraints import TokenMatcher
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.numerics import LogitBound
from toolweave.native.sampling import Sampler

__all__ = ["Verdict", "grammar_prefix", "verify_draft"]


def grammar_prefix(matcher: TokenMatcher, tokens: Sequence[int]) -> tuple[list[int], list[int]]:
    """The prefix of `tokens` the grammar accepts from `matcher`'s state (forced runs
    whole), with the indices of the tokens the model chooses in it."""
    probe = matcher.copy()
    out: list[int] = []
    choices: list[int] = []
    j = 0
    while j < len(tokens) and not probe.stopped:
        forced = probe.forced()
        if forced:
            if list(tokens[j : j + len(forced)]) != forced:
                break
            probe.consume_many(forced)
            out.extend(forced)
            j += len(forced)
            continue
        if not probe.accepts_prefix([tokens[j]]):
            break
        probe.consume(tokens[j])
        choices.append(len(out))
        out.append(tokens[j])
        j += 1
    return out, choices


@dataclass(frozen=True)
class Verdict:
    """What one verification pass decided.

    `accepted` draft tokens are kept; `correction` is written after them instead of the
    rest (a forced run, or the model's own token when `correction_chosen`). `chosen`
    counts the accepted tokens the model chose rather than the grammar forced. The KV now
    holds the first `kept` accepted tokens and `logits` predict the token after them.
    `stalled`: the walk stopped with neither a mismatch nor the end of the draft.
    `near_tie`: the gap of the choice the batched row could not decide (the walk stopped
    before it), or None. `end`: under sampling, the end-of-generation token drawn for
    the position after the accepted tokens (the decoder must take it there), or None.
    """

    drafted: int
    accepted: tuple[int, ...]
    correction: tuple[int, ...]
    correction_chosen: bool
    chosen: int
    kept: int
    logits: NDArray[np.float32]
    stalled: bool
    near_tie: float | None = None
    end: int | None = None


def verify_draft(
    engine: Engine,
    matcher: TokenMatcher,
    draft: Sequence[int],
    *,
    seq: int,
    pos: int,
    logits: NDArray[np.float32],
    max_rows: int,
    bound: LogitBound | None = None,
    sampler: Sampler | None = None,
) -> Verdict:
    """Forward `draft` at position `pos` of `seq` in one pass and judge it.

    `logits` predict the draft's first token, which must be the model's greedy choice
    (checked by the caller for free); `matcher` is left where it was. At most `max_rows`
    logits rows are asked (the draft is cut before the choice that would need more).
    The KV cells of every token not kept are removed. With a `bound`, a choice whose
    batched row does not decide it (`LogitBound.decides`) ends the walk (`near_tie`).
    With a `sampler` (then `bound` must be None) the first choice is the caller's draw,
    equal to the draft's first token, and every later one follows `Sampler.verify`.
    """
    if sampler is not None and bound is not None:
        raise ValueError("verify_draft: sampling verification takes no logit bound")
    draft, choices = grammar_prefix(matcher, draft)
    if len(choices) > max_rows:  # bound the logits buffer (vocabulary x rows)
        draft, choices = draft[: choices[max_rows]], choices[:max_rows]
    # The row before each token the model chooses, and the last.
    wanted = {i - 1 for i in choices if i > 0} | {len(draft) - 1}
    out = engine.forward([BatchToken(t, pos + i, (seq,), i in wanted) for i, t in enumerate(draft)])
    rows = dict(zip(sorted(wanted), out, strict=True))
    probe = matcher.copy()
    accepted: list[int] = []
    correction: list[int] = []
    correction_chosen = False
    chosen = 0
    prev = logits
    fresh = True  # prev predicts the token after the last accepted one
    last_choice = 0  # index in `accepted` of the latest token the model chose
    near_tie: float | None = None
    end: int | None = None
    j = 0
    while j < len(draft) and not probe.stopped:
        forced = probe.forced()
        if forced:
            if list(draft[j : j + len(forced)]) != forced:
                correction = forced
                break
            probe.consume_many(forced)
            accepted.extend(forced)
            j += len(forced)
        else:
            if not fresh:  # cannot happen with the rows asked above; stop safely
                break
            # The runner-up gap matters only under a bound (it costs a vocabulary sort).
            if sampler is not None:  # the first choice was drawn by the caller
                tok = draft[j] if prev is logits else sampler.verify(prev, probe.mask(), draft[j])
                gap = 0.0
            elif bound is not None:
                tok, gap = probe.best_with_gap(prev)
            else:
                tok, gap = probe.best(prev), 0.0
            if prev is not logits and bound is not None and not bound.decides(gap):
                near_tie = gap
                break
            if engine.is_eog(tok):
                end = tok if sampler is not None else None
                break
            if tok != draft[j]:
                correction = [tok]
                correction_chosen = True
                break
            probe.consume(tok)
            last_choice = len(accepted)
            accepted.append(tok)
            chosen += 1
            j += 1
        row = rows.get(j - 1)
        fresh = row is not None
        if row is not None:
            prev = row
    # Without fresh logits the last accepted token is forwarded again later.
    # The last row predicts the next token: if that is a choice the row cannot decide,
    # the decoder must not take it from this row either.
    ends_on_row = fresh and prev is not logits and j == len(draft) and not correction
    if near_tie is None and bound is not None and ends_on_row and not probe.stopped:
        _, gap = probe.best_with_gap(prev) if not probe.forced() else (0, float("inf"))
        if not bound.decides(gap):
            near_tie = gap
    if near_tie is not None:
        # `jump` forwards the latest choice and the forced run after it in one pass, and
        # decides the next choice from that pass: leave exactly those tokens pending.
        kept = last_choice
    else:
        kept = len(accepted) if fresh or correction else len(accepted) - 1
    engine.seq_remove(seq, pos + kept)
    return Verdict(
        drafted=len(draft),
        accepted=tuple(accepted),
        correction=tuple(correction),
        correction_chosen=correction_chosen,
        chosen=chosen,
        kept=kept,
        logits=prev,
        stalled=not correction and j < len(draft) and not probe.stopped,
        near_tie=near_tie,
        end=end,
    )
