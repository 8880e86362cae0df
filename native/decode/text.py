"""Free text and schema-constrained text: greedy decoding until end of turn.

The chat model uses it for answers that are not tool calls (plain text, or JSON text
under a grammar for structured output). It shares `prefill_prompt`, so its prompt
reuses whatever the tool-call decoders left cached, and it reports `CallEvent`s and a
`CallResult` like every other decoder. A finished answer stays cached after its prompt
(`engine.seq_tokens` records it): the next prompt of a chat repeats it, and only what
follows it is prefilled.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Iterator, Sequence

import numpy as np

from toolweave.events import CallEvent
from toolweave.native.constraints import TokenMatcher, vocabulary_for
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.sampling import Sampler, choose
from toolweave.native.states.prefill import PromptPrefill, prefill_prompt
from toolweave.results import CallResult, CallStats, NearTie

__all__ = ["first_token", "generate_text"]


def first_token(engine: Engine, prompt: Sequence[int], *, seq: int = 0) -> int:
    """The greedy first token of the response to `prompt` (prefill reuses the cache)."""
    with engine.lock:
        pre = prefill_prompt(engine, seq, prompt)
        return int(np.argmax(pre.logits))


def generate_text(
    engine: Engine,
    prompt: Sequence[int],
    *,
    max_tokens: int = 512,
    grammar: str | None = None,
    seq: int = 0,
    mode: str = "text",
    stop: Sequence[str] = (),
    not_first: Sequence[int] = (),
    sampler: Sampler | None = None,
) -> Iterator[CallEvent]:
    """Decode greedily (or draw each token with `sampler`) after `prompt` until an
    end-of-generation token, the end of `grammar` (llguidance Lark, optional), a `stop`
    string or `max_tokens`; the last event is 'done'. A stop string ends the text and is
    not part of it (tokens that started it may already have been streamed). Tokens in
    `not_first` cannot open the text (a text answer that must not start a tool call).

    The engine lock is held from the prefill to the last token: finish or close the
    iterator (a paused one makes other callers fail with `EngineBusyError` instead of
    waiting forever). Under a `cancel_scope` it stops between two passes."""
    with engine.lock:
        passes0 = engine.counters.forward_passes
        pre = prefill_prompt(engine, seq, prompt, max_tokens=max_tokens)
        prefill_passes = engine.counters.forward_passes - passes0 - 1
        matcher = TokenMatcher(vocabulary_for(engine), grammar) if grammar else None
        logits = pre.logits
        tokens: list[int] = []
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = ""
        reason = "length"
        t_first: float | None = None
        in_cache = 0  # output tokens whose KV state the sequence holds
        try:
            while len(tokens) < max_tokens:
                if matcher is not None and matcher.stopped:
                    reason = "stop"
                    break
                if not tokens and not_first:
                    logits = logits.copy()
                    logits[list(not_first)] = -np.inf
                token = choose(sampler, matcher, logits)
                if engine.is_eog(token):
                    reason = "stop"
                    break
                if matcher is not None:
                    matcher.consume(token)
                tokens.append(token)
                text += utf8.decode(engine.token_bytes(token))
                now = (time.perf_counter() - pre.t0) * 1000
                if t_first is None:
                    t_first = now
                yield CallEvent("tokens", now, (token,), True)
                cut = _stop_at(text, stop)
                if cut is not None:
                    text = text[:cut]
                    reason = "stop"
                    break
                if matcher is not None and matcher.stopped:
                    reason = "stop"
                    break
                pos = len(prompt) + len(tokens) - 1
                logits = engine.forward([BatchToken(token, pos, (seq,), True)])[0]
                in_cache = len(tokens)
        except BaseException:
            in_cache = 0  # cancelled or failed: keep the prompt only
            raise
        finally:
            # The answer stays cached after its prompt: the next prompt of a chat holds it.
            engine.seq_remove(seq, len(prompt) + in_cache)
            engine.seq_tokens[seq] = [*prompt, *tokens[:in_cache]]
        total_ms = (time.perf_counter() - pre.t0) * 1000
        passes = engine.counters.forward_passes - passes0
    if reason != "stop" or not stop:
        text += utf8.decode(b"", final=True)
    yield text_done(
        pre, prompt, tokens, text, reason, passes, prefill_passes, total_ms, t_first, mode
    )


def text_done(
    pre: PromptPrefill,
    prompt: Sequence[int],
    tokens: Sequence[int],
    text: str,
    reason: str,
    passes: int,
    prefill_passes: int,
    total_ms: float,
    t_first: float | None,
    mode: str,
    *,
    drafted: int = 0,
    accepted: int = 0,
    forced: int = 0,
    logit_bound: float | None = None,
    near_ties: Sequence[NearTie] = (),
) -> CallEvent:
    """The 'done' event of a text decoder, with its stats (shared by ExSpec); `forced`
    output tokens were prefilled (jump-forward), not decoded."""
    stats = CallStats(
        forward_passes=passes,
        decode_passes=passes - 1 - prefill_passes,
        prefill_tokens=len(prompt) + forced,
        decoded_tokens=len(tokens) - forced,
        output_tokens=len(tokens),
        prompt_tokens=len(prompt),
        prompt_ms=pre.prompt_ms,
        cached_tokens=pre.reused,
        time_to_tool_ms=None,
        total_ms=total_ms,
        phases_ms={"first_token": t_first} if t_first is not None else {},
        drafted_tokens=drafted,
        accepted_tokens=accepted,
        logit_bound=logit_bound,
        near_ties=tuple(near_ties),
    )
    result = CallResult(
        mode=mode, calls=(), text=text, tokens=tuple(tokens), stats=stats, finish_reason=reason
    )
    return CallEvent("done", total_ms, result=result)


def _stop_at(text: str, stop: Sequence[str]) -> int | None:
    """Where the first stop string in `text` begins, if any."""
    hits = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return min(hits) if hits else None
