"""llama-cpp-python's own prompt caches, as a baseline for the serving benchmark.

`LlamaCppCached` runs `llama_cpp.Llama.create_completion` with `LlamaRAMCache` or
`LlamaDiskCache` on a GGUF and reports, per request, the prompt tokens it had to
evaluate and the time taken. It lives in `native/` because it is llama.cpp code.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from toolweave.native.compute import route_llama

__all__ = ["LlamaCppCached", "StepRun"]


@dataclass(frozen=True)
class StepRun:
    """One request in one configuration."""

    new_tokens: int
    ms: float
    text: str


class LlamaCppCached:
    """llama-cpp-python's `Llama` with one of its prompt caches."""

    def __init__(
        self, name: str, path: Path, n_ctx: int, decode: int, directory: Path | None
    ) -> None:
        self.name = name
        self.llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_batch=512, verbose=False)
        route_llama(self.llm)  # its passes on toolweave's compute thread
        self.directory = directory
        self.cache: llama_cpp.BaseLlamaCache
        if directory is None:
            self.cache = llama_cpp.LlamaRAMCache()
        else:
            self.cache = llama_cpp.LlamaDiskCache(cache_dir=str(directory))
        self.llm.set_cache(self.cache)
        self.decode = decode

    def _evaluated(self) -> int:
        perf = llama_cpp.llama_perf_context(self.llm._ctx.ctx)
        return int(perf.n_p_eval) + int(perf.n_eval)

    def step(self, prompt: list[int], session: str) -> StepRun:
        before = self._evaluated()
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):  # LlamaDiskCache prints every store
            out = self.llm.create_completion(
                prompt=prompt, max_tokens=self.decode, temperature=0.0, top_k=1
            )
        ms = (time.perf_counter() - t0) * 1000
        choice = out["choices"][0]  # type: ignore[index]
        generated = int(out["usage"]["completion_tokens"])  # type: ignore[index]
        # Each generated token is evaluated after the prompt, except the last one when the
        # length limit (not an end token) stopped generation.
        decoded = generated - 1 if choice["finish_reason"] == "length" else generated
        new = self._evaluated() - before - max(0, decoded)
        return StepRun(max(0, new), ms, str(choice["text"]))

    def memory_bytes(self) -> int:
        if isinstance(self.cache, llama_cpp.LlamaRAMCache):
            # `cache_size` counts the llama.cpp states only; each entry also copies scores.
            return sum(
                s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes
                for s in self.cache.cache_state.values()
            )
        return 0

    def disk_bytes(self) -> int:
        if self.directory is None:
            return 0
        return sum(f.stat().st_size for f in self.directory.rglob("*") if f.is_file())

    def close(self) -> None:
        self.llm.close()
