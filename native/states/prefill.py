"""Prompt prefill that reuses the longest prefix already in a sequence's KV cache.

Every decoder on an engine (tool calls, free text, structured output) starts the same
way: put the prompt in sequence `seq`, keeping whatever prefix of it the sequence already
holds (`Engine.seq_tokens`), then run the last prompt token alone so its logits are
computed the same way whether or not anything was cached.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from toolweave.errors import ContextFullError
from toolweave.native.engine import BatchToken, Engine

__all__ = ["PromptPrefill", "prefill_prompt"]


@dataclass(frozen=True)
class PromptPrefill:
    """The outcome of `prefill_prompt`: logits of the last prompt token and the timings.

    ``t0`` (a `time.perf_counter` value) is the start of the last prompt pass, the first
    pass every decoding mode pays; ``prompt_ms`` is the time spent before it; ``reused``
    counts the prompt tokens whose KV state was already cached.
    """

    logits: NDArray[np.float32]
    t0: float
    prompt_ms: float
    reused: int


def prefill_prompt(
    engine: Engine, seq: int, prompt: Sequence[int], *, max_tokens: int = 0
) -> PromptPrefill:
    """Leave exactly `prompt` in `seq` and return the logits of its last token.

    Raises `ContextFullError` when the prompt plus `max_tokens` output tokens cannot fit.
    Call it with `engine.lock` held when other threads share the engine.
    """
    if not prompt:
        raise ContextFullError("empty prompt")
    if len(prompt) + max_tokens > engine.n_ctx:
        raise ContextFullError(
            f"prompt of {len(prompt)} tokens plus {max_tokens} output tokens exceeds "
            f"the context window of {engine.n_ctx}"
        )
    t_start = time.perf_counter()
    cached = engine.seq_tokens.get(seq, [])
    keep = 0
    limit = min(len(cached), len(prompt) - 1)
    while keep < limit and cached[keep] == prompt[keep]:
        keep += 1
    engine.seq_remove(seq, keep)
    engine.seq_tokens[seq] = list(prompt[:keep])
    if keep < len(prompt) - 1:
        engine.prefill(seq, prompt[keep:-1], start=keep, logits_last=False)
    engine.seq_tokens[seq] = list(prompt[:-1])
    t0 = time.perf_counter()
    logits = engine.forward([BatchToken(prompt[-1], len(prompt) - 1, (seq,), True)])[0]
    engine.seq_tokens[seq] = list(prompt)
    return PromptPrefill(logits=logits, t0=t0, prompt_ms=(t0 - t_start) * 1000, reused=keep)
