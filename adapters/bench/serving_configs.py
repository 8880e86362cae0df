"""The configurations `toolweave bench serving` replays its trace under (llama.cpp's
own prompt caches are `toolweave.native.baselines.llama_cpp_cache`)."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from toolweave.native.baselines.llama_cpp_cache import StepRun
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states.prefill import prefill_prompt
from toolweave.native.states.store import StateStore

__all__ = ["NoReuse", "ServingConfig", "ToolweaveConfig", "greedy_tokens"]


class ServingConfig(Protocol):
    """One way of serving the trace's requests on one slot."""

    name: str

    def step(self, prompt: list[int], session: str) -> StepRun: ...
    def memory_bytes(self) -> int: ...
    def disk_bytes(self) -> int: ...
    def close(self) -> None: ...


def greedy_tokens(engine: Engine, seq: int, logits: np.ndarray, pos: int, n: int) -> list[int]:
    """Greedy decoding of up to `n` tokens, stopping before an end-of-generation token
    (as `Llama.create_completion` does); the last one is chosen, not evaluated."""
    out: list[int] = []
    for i in range(n):
        tok = int(np.argmax(logits))
        if engine.is_eog(tok):
            break
        out.append(tok)
        if i == n - 1:
            break
        logits = engine.forward([BatchToken(tok, pos + i, (seq,), True)])[0]
    return out


class NoReuse:
    """Every prompt prefilled from scratch."""

    name = "no_reuse"

    def __init__(self, path: Path, n_ctx: int, decode: int) -> None:
        self.engine = Engine(path, n_ctx=n_ctx, n_seq_max=1)
        self.decode = decode

    def step(self, prompt: list[int], session: str) -> StepRun:
        t0 = time.perf_counter()
        self.engine.clear()
        pre = prefill_prompt(self.engine, 0, prompt)
        out = greedy_tokens(self.engine, 0, pre.logits, len(prompt), self.decode)
        ms = (time.perf_counter() - t0) * 1000
        return StepRun(len(prompt) - pre.reused, ms, self.engine.detokenize(out))

    def memory_bytes(self) -> int:
        return 0

    def disk_bytes(self) -> int:
        return 0

    def close(self) -> None:
        self.engine.close()


class ToolweaveConfig:
    """toolweave's `StateStore`: each prompt starts from the longest saved prefix."""

    name = "toolweave"

    def __init__(self, path: Path, n_ctx: int, decode: int, directory: Path) -> None:
        self.engine = Engine(path, n_ctx=n_ctx, n_seq_max=1)  # one slot, like the others
        self.store = StateStore(directory)
        self.decode = decode
        self.peak_memory = 0
        self.records: list[dict[str, Any]] = []

    def step(self, prompt: list[int], session: str) -> StepRun:
        t0 = time.perf_counter()
        pre = self.store.prefill(self.engine, 0, prompt, self.decode, session=session)
        out = greedy_tokens(self.engine, 0, pre.logits, len(prompt), self.decode)
        ms = (time.perf_counter() - t0) * 1000
        rec = self.store.last
        if rec is not None:
            self.records.append(asdict(rec))
        self.peak_memory = max(self.peak_memory, self.store.memory_bytes())
        return StepRun(len(prompt) - pre.reused, ms, self.engine.detokenize(out))

    def memory_bytes(self) -> int:
        return self.store.memory_bytes()

    def disk_bytes(self) -> int:
        self.store.flush()
        return self.store.disk_bytes()

    def close(self) -> None:
        self.store.close()
        self.engine.close()
