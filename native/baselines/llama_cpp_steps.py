"""llama-cpp-python's own greedy decoding step, timed at a chosen thread count and context.

This is what a user of `llama_cpp.Llama` gets per generated token: `Llama.generate` at
temperature 0 (its sampler chain included), after the prompt is in the KV cache. The
thread count is set on the live context (`llama_set_n_threads`), so one loaded model is
timed at every count, interleaved with whatever it is compared against.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from types import TracebackType

import llama_cpp

from toolweave.errors import ModelError
from toolweave.native.compute import route_llama

__all__ = ["LlamaCppSteps"]


class LlamaCppSteps(AbstractContextManager["LlamaCppSteps"]):
    """One `llama_cpp.Llama` on `model_path`; `step_ms` times its greedy steps."""

    def __init__(self, model_path: str | os.PathLike[str], *, n_ctx: int, n_threads_batch: int):
        try:
            self.llm = llama_cpp.Llama(
                str(model_path),
                n_ctx=n_ctx,
                n_batch=512,
                n_threads=1,
                n_threads_batch=n_threads_batch,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama-cpp-python could not load {model_path}: {exc}") from None
        route_llama(self.llm)  # its passes on toolweave's compute thread
        self.n_threads_batch = n_threads_batch

    def tokenize(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def step_ms(self, prompt: Sequence[int], n_threads: int, steps: int) -> float:
        """Median ms between consecutive greedy tokens after `prompt` on `n_threads`.

        The prompt's KV is reused from the previous call when it is the same (llama-cpp-
        python's prefix match), so only the first call per prompt pays its prefill.
        """
        if steps < 2:
            raise ValueError("steps must be >= 2")
        llama_cpp.llama_set_n_threads(self.llm.ctx, n_threads, self.n_threads_batch)
        times: list[float] = []
        last = 0.0
        for i, _token in enumerate(self.llm.generate(prompt, temp=0.0, top_k=1, reset=True)):
            now = time.perf_counter()
            if i > 0:
                times.append(now - last)
            last = now
            if i >= steps:
                break
        return statistics.median(times) * 1000

    def close(self) -> None:
        self.llm.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
