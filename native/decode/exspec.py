"""ExSpec: greedy decoding with drafts from a per-query n-gram table (Agent-X).

Each step the pending token (greedy, not yet in the KV cache) is forwarded. When the
table (`toolweave.drafting.ngram.NgramTable`, built from the few-shot examples and the query) has
a certain entry for the last n-1 tokens (one the texts never continued differently) and
the pass costs say a draft of that length pays at the running acceptance rate (the
engine cost table, corrected by the pass times measured on the same kind of output:
`toolweave.native.learning.PassTimes`),
the pending token and the draft go through ONE pass with logits for every row. Row i
holds the model's greedy choice after draft token i-1, so the longest draft prefix equal
to those choices is accepted, plus the model's own next token; the KV cells of the
rejected draft tokens are removed. Without an entry (or when a draft would not pay) the
step is a plain single-token pass: nothing is paid. Drafts stop before uncertain keys:
they mark the slots the examples fill differently (argument values), where the table is
right far less often.

Output is token-for-token that of `generate_text` with the same grammar (or none). A
verification row may sit up to the engine's logit bound away from the serial step
(`toolweave.native.numerics`; exactly zero on the exact engine), so a row decides its
token only where the best token leads by more than twice the bound; a closer position is
left to the serial step, and a serial step that reads KV cells a verification pass wrote
and cannot decide either is repeated after those cells are written again one token per
pass (`toolweave.native.decode.reference`), unless that rewrite would take more than a
few passes: then it decides as it is, within the kernels' rounding, and the position is
logged (`NearTie` of kind "drift"), the one place the output may differ. Under a
grammar each choice is the constrained greedy token. With `jump` the tokens a grammar
forces are prefilled in one pass (as in the `jump` mode).

With a `Sampler` every choice is drawn instead, and row i takes draft token i by the
speculative-sampling rule (`Sampler.verify`): the output is distributed as plain
sampling's (`generate_text` with the same sampler settings); the bound rules are off.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import NDArray

from toolweave.drafting.ngram import AcceptanceRate, NgramTable, draft_length
from toolweave.events import CallEvent
from toolweave.native.calibration import CostTable, engine_costs
from toolweave.native.constraints import TokenMatcher, top_with_gap, vocabulary_for
from toolweave.native.decode.reference import MAX_REWRITE_PASSES, KVDrift, pass_starts, replay
from toolweave.native.decode.text import _stop_at, text_done  # shared rules
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.learning import Learned, engine_learning
from toolweave.native.numerics import LogitBound, engine_bound
from toolweave.native.sampling import Sampler, choose
from toolweave.native.states.prefill import prefill_prompt
from toolweave.results import NearTie

__all__ = ["exspec_table", "generate_with_exspec"]


def exspec_table(
    engine: Engine, example_texts: Sequence[str], query: str, *, n: int = 3
) -> NgramTable:
    """The per-query table: the examples' and the query's tokens, in that order (so the
    query wins ties). Both are tokenized as plain text, as the prompt holds them."""
    streams = [engine.tokenize(text, parse_special=False) for text in [*example_texts, query]]
    return NgramTable.build(streams, n=n)


def generate_with_exspec(
    engine: Engine,
    prompt: Sequence[int],
    *,
    table: NgramTable | None,
    max_tokens: int = 512,
    stop: Sequence[str] = (),
    costs: CostTable | None = None,
    seq: int = 0,
    mode: str = "text",
    acceptance: AcceptanceRate | None = None,
    grammar: str | None = None,
    jump: bool = False,
    learn: str | None = None,
    bound: LogitBound | None = None,
    sampler: Sampler | None = None,
) -> Iterator[CallEvent]:
    """Greedy decoding after `prompt`, with n-gram drafts verified in one pass each
    (with a `sampler`: sampling, drafts verified by the speculative-sampling rule).

    Same events, result and stop rules as `generate_text` (a 'tokens' event may carry
    several tokens: the ones a verification pass accepted); `result.tokens` equals
    `generate_text`'s with the same `grammar` (llguidance Lark, optional): a drafted
    token is accepted only where it is the constrained greedy choice. `table=None`
    drafts nothing. `jump=True` (needs a grammar) also prefills the tokens the grammar
    forces, canonically tokenized, in one pass instead of decoding them (the
    `jump` mode): faster, but no longer token-for-token equal to serial decoding.

    Stats add `drafted_tokens` (tokens sent for verification), `accepted_tokens` (those
    matching the greedy choice) and count forced tokens in `prefill_tokens`. `costs`
    defaults to the engine's quick cost table (`engine_costs`); `acceptance` is the
    starting acceptance estimate. With `learn` (a name for the kind of output: "planner",
    "arbiter", a grammar) the estimate starts where the last call of that kind on this
    engine left it and is kept for the next one, so an output the table predicts badly
    soon stops paying for drafts. So are the estimates per draft context (a context whose
    drafts keep failing stops drafting there: `toolweave.drafting.ngram.ContextRates`) and the
    measured times of plain steps and verification passes, which replace the cost
    table's where known. After the call only `prompt` stays cached in `seq`.
    """
    if jump and grammar is None:
        raise ValueError("jump needs a grammar: it prefills the tokens the grammar forces")
    with engine.lock:
        costs = costs or engine_costs(engine)
        max_draft = min(max(costs.verify_all_ms) - 1, engine.n_batch - 1)
        table_ms = {k: costs.pass_ms(k, k) for k in range(1, max_draft + 2)}
        record = engine_learning(engine).of(learn) if learn else Learned()
        times, contexts = record.times, record.contexts
        rate = acceptance or record.rate or AcceptanceRate()
        passes0 = engine.counters.forward_passes
        pre = prefill_prompt(engine, seq, prompt, max_tokens=max_tokens)
        prefill_passes = engine.counters.forward_passes - passes0 - 1
        matcher = TokenMatcher(vocabulary_for(engine), grammar) if grammar else None
        context_len = table.context_len if table is not None else 0
        history = list(prompt[max(0, len(prompt) - context_len) :])  # lookup context only
        tokens: list[int] = []
        new = [choose(sampler, matcher, pre.logits)]
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = ""
        reason = "length"
        t_first: float | None = None
        drafted = accepted = forced_total = 0
        near_ties: list[NearTie] = []
        if sampler is not None:  # a batched row is the target distribution itself
            bound = None
        elif bound is None and not engine.batch_invariant and table is not None:
            bound = engine_bound(engine)
        inexact = bound is not None and bound.max_delta > 0
        drift = KVDrift()  # cells verification passes wrote since the last rewrite
        serial_next = False  # a verification pass left the next choice to a serial step

        def reference(logits: NDArray[np.float32], run: list[int]) -> NDArray[np.float32]:
            """`logits` of the pass over `run` (the pending token and any forced run after
            it), or, when they read cells a verification pass wrote and do not decide the
            next choice, the same pass's logits after those cells are written again."""
            if not drift.dirty or bound is None:
                return logits
            _, gap = _best(logits, matcher, True)
            if bound.decides(gap):
                return logits
            start = drift.start
            assert start is not None
            at = len(tokens) + len(run) - 1
            region = [*tokens[start:], *run[1:]]  # run[0] is tokens[-1]
            starts = [] if drift.too_long else pass_starts(drift.matcher, region, jump=jump)
            if drift.too_long or len(starts) > MAX_REWRITE_PASSES:  # dearer than it saved
                drift.too_long = True
                near_ties.append(NearTie(at, gap, "drift"))
                return logits
            near_ties.append(NearTie(at, gap, "rewritten"))
            drift.clear()
            return replay(engine, seq, len(prompt) + start, region, starts)

        try:
            while True:
                emitted: list[int] = []
                done = False
                for token in new:
                    if len(tokens) >= max_tokens:
                        done = True
                        break
                    if engine.is_eog(token):
                        reason, done = "stop", True
                        break
                    if matcher is not None:
                        matcher.consume(token)
                    tokens.append(token)
                    emitted.append(token)
                    text += utf8.decode(engine.token_bytes(token))
                    cut = _stop_at(text, stop)
                    if cut is not None:
                        text = text[:cut]
                        reason, done = "stop", True
                        break
                    if matcher is not None and matcher.stopped:
                        reason, done = "stop", True
                        break
                if emitted:
                    now = (time.perf_counter() - pre.t0) * 1000
                    if t_first is None:
                        t_first = now
                    yield CallEvent("tokens", now, tuple(emitted), True)
                    if context_len:
                        history = [*history, *emitted][-context_len:]
                if done or len(tokens) >= max_tokens:
                    break
                # The pending token is tokens[-1] (consumed by the matcher, not in the KV
                # cache yet); what follows it comes from one pass of one kind.
                pos = len(prompt) + len(tokens) - 1
                budget = min(max_draft, max_tokens - len(tokens) - 1)
                forced = matcher.forced()[: max_tokens - len(tokens)] if jump and matcher else []
                if forced and matcher is not None:
                    logits = _jump_pass(engine, seq, pos, tokens[-1], forced)
                    matcher.consume_many(forced)  # the grammar state the logits predict in
                    try:
                        logits = reference(logits, [tokens[-1], *forced])
                        new = [*forced, choose(sampler, matcher, logits)]
                    finally:
                        matcher.rollback(len(forced))
                    forced_total += len(forced)
                    continue
                draft = table.draft(history, budget, certain_only=True) if table else []
                if serial_next:  # the pass that left this choice open is the serial step
                    draft, serial_next = [], False
                if draft and matcher is not None:
                    draft = draft[: matcher.accepts_prefix(draft)]
                at = tuple(history)  # the context the draft starts from
                expect = contexts.rate(at, rate) if draft else rate.rate
                k = draft_length(lambda n: times.ms(n, table_ms), expect, max_len=len(draft))
                t_pass = time.perf_counter()
                if k == 0:
                    logits = engine.forward([BatchToken(tokens[-1], pos, (seq,), True)])[0]
                    logits = reference(logits, [tokens[-1]])
                    new = [choose(sampler, matcher, logits)]
                    times.observe(1, (time.perf_counter() - t_pass) * 1000)
                    if draft:  # a free observation: would the draft's first token have passed?
                        hit = draft[0] == new[0]
                        contexts.observe(at, rate, int(hit), not hit)
                        rate = rate.observe(int(hit), not hit)
                    continue
                after_pending = matcher.copy() if matcher is not None and jump else None
                new, tie = _verify(engine, seq, pos, tokens[-1], draft[:k], matcher, bound, sampler)
                if inexact and (tie is None or new):  # it wrote the cells of the kept tokens
                    drift.mark(len(tokens) - 1, after_pending)
                taken = len(new) if tie is not None else len(new) - 1  # draft tokens kept
                if tie is not None:
                    near_ties.append(NearTie(len(tokens) + len(new), tie))
                    serial_next = True
                times.observe(k + 1, (time.perf_counter() - t_pass) * 1000)
                drafted += k
                accepted += taken
                contexts.observe(at, rate, taken, taken < k)
                rate = rate.observe(taken, taken < k)
        finally:
            engine.seq_remove(seq, len(prompt))  # keep the prompt cached, drop the answer
            if learn:
                record.rate = rate
        total_ms = (time.perf_counter() - pre.t0) * 1000
        passes = engine.counters.forward_passes - passes0
    if reason != "stop" or not stop:
        text += utf8.decode(b"", final=True)
    yield text_done(
        pre, prompt, tokens, text, reason, passes, prefill_passes, total_ms, t_first, mode,
        drafted=drafted, accepted=accepted, forced=forced_total,
        logit_bound=None if bound is None else bound.bound, near_ties=near_ties,
    )  # fmt: skip


def _jump_pass(
    engine: Engine, seq: int, pos: int, pending: int, forced: list[int]
) -> NDArray[np.float32]:
    """Forward `pending` and the `forced` tokens in one pass (logits for the last only)."""
    run = [pending, *forced]
    items = [BatchToken(t, pos + i, (seq,), i == len(forced)) for i, t in enumerate(run)]
    return engine.forward(items)[0]


def _verify(
    engine: Engine,
    seq: int,
    pos: int,
    pending: int,
    draft: list[int],
    matcher: TokenMatcher | None,
    bound: LogitBound | None,
    sampler: Sampler | None = None,
) -> tuple[list[int], float | None]:
    """Forward `pending` (at `pos`) and `draft` in one pass; return the model's greedy
    tokens (constrained by `matcher`, which is left where it was): the accepted draft
    prefix plus the model's own next token. The KV cells of the rejected draft tokens are
    removed, those of the accepted ones kept.

    A batched row decides its token only where `bound` (None: every row) says it does; at a
    closer position the walk ends with the tokens accepted so far (their cells kept, the
    last one's not: it becomes the pending token) and that position's gap as the second
    value, and the caller decides it with a single-token step, as plain greedy decoding
    does. Otherwise the second value is None. With a `sampler` (and no bound) row j takes
    draft token j by `Sampler.verify` and the row after the last one draws freely."""
    items = [BatchToken(t, pos + i, (seq,), True) for i, t in enumerate([pending, *draft])]
    rows = engine.forward(items)
    out: list[int] = []
    tie: float | None = None
    consumed = 0
    try:
        for j in range(len(rows)):
            if sampler is not None:
                best = choose(sampler, matcher, rows[j], draft[j] if j < len(draft) else None)
                gap = 0.0
            else:
                best, gap = _best(rows[j], matcher, bound is not None)
            if bound is not None and not bound.decides(gap):
                tie = gap
                engine.seq_remove(seq, pos + j)  # items[j] is pending again
                break
            out.append(best)
            if j >= len(draft) or best != draft[j] or engine.is_eog(best):
                break
            if matcher is not None:
                matcher.consume(best)
                consumed += 1
    finally:
        if matcher is not None:
            matcher.rollback(consumed)
    j = len(out) - 1
    if tie is None and j < len(draft):
        engine.seq_remove(seq, pos + 1 + j)
    return out, tie


def _best(row: NDArray[np.float32], matcher: TokenMatcher | None, gap: bool) -> tuple[int, float]:
    """The greedy token of `row`, and its lead over the runner-up when `gap` is asked
    (0.0 otherwise: the runner-up needs a sort of the vocabulary)."""
    if not gap:
        return (int(np.argmax(row)) if matcher is None else matcher.best(row)), 0.0
    return top_with_gap(row) if matcher is None else matcher.best_with_gap(row)
