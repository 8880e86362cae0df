"""ExSpec: greedy decoding with drafts from a per-query n-gram table (Agent-X).

Each step the pending token (greedy, not yet in the KV cache) is forwarded. When the
table (`toolweave.ngram.NgramTable`, built from the few-shot examples and the query) has
a certain entry for the last n-1 tokens (one the texts never continued differently) and
the engine cost table says a draft of that length pays at the running acceptance rate,
the pending token and the draft go through ONE pass with logits for every row. Row i
holds the model's greedy choice after draft token i-1, so the longest draft prefix equal
to those choices is accepted, plus the model's own next token; the KV cells of the
rejected draft tokens are removed. Without an entry (or when a draft would not pay) the
step is a plain single-token pass: nothing is paid. Drafts stop before uncertain keys:
they mark the slots the examples fill differently (argument values), where the table is
right far less often.

Output is token-for-token that of `generate_text` (plain greedy, no grammar): the engine
is batch-invariant by default, so a verification row equals the serial step's logits.
Grammar-constrained decoding is not supported here.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Iterator, Sequence

import numpy as np

from toolweave.native.calibration import CostTable, engine_costs
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.prompt_cache import prefill_prompt
from toolweave.native.textgen import _stop_at, text_done  # one stop rule, one result
from toolweave.ngram import AcceptanceRate, NgramTable, draft_length
from toolweave.results import CallEvent

__all__ = ["engine_costs", "exspec_table", "generate_with_exspec"]  # engine_costs: re-export


def exspec_table(
    engine: Engine, example_texts: Sequence[str], query: str, *, n: int = 3
) -> NgramTable:
    """The per-query table: the examples' and the query's tokens, in that order (so the
    query wins ties)."""
    streams = [engine.tokenize(text) for text in [*example_texts, query]]
    return NgramTable.build(streams, n=n)


def generate_with_exspec(
    engine: Engine,
    prompt: Sequence[int],
    *,
    table: NgramTable,
    max_tokens: int = 512,
    stop: Sequence[str] = (),
    costs: CostTable | None = None,
    seq: int = 0,
    mode: str = "text",
    acceptance: AcceptanceRate | None = None,
) -> Iterator[CallEvent]:
    """Greedy decoding after `prompt`, with n-gram drafts verified in one pass each.

    Same events, result and stop rules as `generate_text` (a 'tokens' event may carry
    several tokens: the ones a verification pass accepted); `result.tokens` equals
    `generate_text`'s. Stats add `drafted_tokens` (tokens sent for verification) and
    `accepted_tokens` (those matching the greedy choice). `costs` defaults to the
    engine's quick cost table (`engine_costs`); `acceptance` is the starting acceptance
    estimate. After the call only `prompt` stays cached in `seq`.
    """
    with engine.lock:
        costs = costs or engine_costs(engine)
        max_draft = min(max(costs.verify_all_ms) - 1, engine.n_batch - 1)
        pass_ms = {k: costs.pass_ms(k, k) for k in range(1, max_draft + 2)}
        rate = acceptance or AcceptanceRate()
        passes0 = engine.counters.forward_passes
        pre = prefill_prompt(engine, seq, prompt, max_tokens=max_tokens)
        prefill_passes = engine.counters.forward_passes - passes0 - 1
        history = list(prompt[max(0, len(prompt) - table.context_len) :])  # lookup context only
        tokens: list[int] = []
        new = [int(np.argmax(pre.logits))]
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = ""
        reason = "length"
        t_first: float | None = None
        drafted = accepted = 0
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
                    tokens.append(token)
                    emitted.append(token)
                    text += utf8.decode(engine.token_bytes(token))
                    cut = _stop_at(text, stop)
                    if cut is not None:
                        text = text[:cut]
                        reason, done = "stop", True
                        break
                if emitted:
                    now = (time.perf_counter() - pre.t0) * 1000
                    if t_first is None:
                        t_first = now
                    yield CallEvent("tokens", now, tuple(emitted), True)
                    history = [*history, *emitted][-table.context_len :]
                if done or len(tokens) >= max_tokens:
                    break
                # The pending token is tokens[-1]; a draft continues it within the budget.
                budget = min(max_draft, max_tokens - len(tokens) - 1)
                draft = table.draft(history, budget, certain_only=True)
                k = draft_length(pass_ms, rate.rate, max_len=len(draft))
                pos = len(prompt) + len(tokens) - 1
                if k == 0:
                    logits = engine.forward([BatchToken(tokens[-1], pos, (seq,), True)])[0]
                    new = [int(np.argmax(logits))]
                    if draft:  # a free observation: would the draft's first token have passed?
                        hit = draft[0] == new[0]
                        rate = rate.observe(int(hit), not hit)
                    continue
                new = _verify(engine, seq, pos, tokens[-1], draft[:k])
                drafted += k
                accepted += len(new) - 1
                rate = rate.observe(len(new) - 1, len(new) <= k)
        finally:
            engine.seq_remove(seq, len(prompt))  # keep the prompt cached, drop the answer
        total_ms = (time.perf_counter() - pre.t0) * 1000
        passes = engine.counters.forward_passes - passes0
    if reason != "stop" or not stop:
        text += utf8.decode(b"", final=True)
    yield text_done(
        pre, prompt, tokens, text, reason, passes, prefill_passes, total_ms, t_first, mode,
        drafted=drafted, accepted=accepted,
    )  # fmt: skip


def _verify(engine: Engine, seq: int, pos: int, pending: int, draft: list[int]) -> list[int]:
    """Forward `pending` (at `pos`) and `draft` in one pass; return the model's greedy
    tokens: the accepted draft prefix plus the model's own next token. The KV cells of
    the rejected draft tokens are removed, those of the accepted ones kept."""
    items = [BatchToken(t, pos + i, (seq,), True) for i, t in enumerate([pending, *draft])]
    greedy = [int(t) for t in np.argmax(engine.forward(items), axis=1)]
    j = 0
    while j < len(draft) and greedy[j] == draft[j]:
        j += 1
    if j < len(draft):
        engine.seq_remove(seq, pos + 1 + j)
    return greedy[: j + 1]
