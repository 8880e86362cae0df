"""llama-cpp-python's own greedy step, timed as its users get it: the baseline of
`toolweave bench engine`.

One `llama_cpp.Llama` per flash-attention setting; for each context length (ascending,
prefilled once) and each thread count (`llama_set_n_threads` on the same context), the
median of a few single-token `Llama.eval` steps plus the argmax of their logits.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np

__all__ = ["StepTiming", "time_greedy_steps"]


@dataclass(frozen=True)
class StepTiming:
    """Median milliseconds of one greedy step at `context` tokens, on `threads` threads."""

    context: int
    threads: int
    flash_attn: bool
    ms: float


def time_greedy_steps(
    model_path: str | Path,
    prompt: Sequence[int],
    *,
    contexts: Sequence[int],
    threads: Sequence[int],
    flash_attn: Sequence[bool] = (False, True),
    steps: int = 8,
) -> list[StepTiming]:
    """Time greedy steps after the first `c` tokens of `prompt` for every c in `contexts`."""
    out: list[StepTiming] = []
    longest = max(contexts)
    if len(prompt) < longest + 1:
        raise ValueError(f"the prompt needs {longest + 1} tokens, it has {len(prompt)}")
    for fa in flash_attn:
        llm = llama_cpp.Llama(
            model_path=str(model_path),
            n_ctx=longest + steps + 16,
            n_batch=512,
            n_threads=max(threads),
            n_threads_batch=max(threads),
            flash_attn=fa,
            verbose=False,
        )
        try:
            n_vocab = llm.n_vocab()
            done = 0
            for ctx in sorted(contexts):
                llm.eval(list(prompt[done:ctx]))
                done = ctx
                for t in threads:
                    llama_cpp.llama_set_n_threads(llm.ctx, t, max(threads))
                    samples = []
                    token = int(prompt[ctx])
                    for _ in range(steps):
                        t0 = time.perf_counter()
                        llm.eval([token])
                        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
                        token = int(np.argmax(logits))
                        samples.append((time.perf_counter() - t0) * 1000)
                    # take the steps back out: the next thread count starts from `ctx` too
                    llm.n_tokens = ctx
                    llm._ctx.kv_cache_seq_rm(-1, ctx, -1)
                    out.append(StepTiming(ctx, t, fa, float(statistics.median(samples))))
        finally:
            llm.close()
    return out
