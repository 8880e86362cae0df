"""Serial steps side by side: toolweave's engine against llama-cpp-python at every thread count.

For each context length (about 300, 1,000 and 3,000 tokens of filler prompt) and each
round, in one process on one model file, interleaved:

- llama-cpp-python's greedy step (`Llama.generate` at temperature 0) at every thread
  count from 1 to the physical core count;
- toolweave's default engine (`Engine(path)`, as every mode builds it: every pass on all
  cores, flash attention off): its serial step (one token, logits, argmax) and its
  k-token verification passes;
- the exact engine (`batch_invariant=True`: serial steps on one thread, llama.cpp's
  flash-attention default), whose rows equal its serial steps bit for bit on SmolLM2.

The median over rounds is reported per point, with the calibrated logit bound of the
default engine (the one `lossless` and ExSpec decide by).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from rich.console import Console
from rich.table import Table

from toolweave.native.baselines.llama_cpp_steps import LlamaCppSteps
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.numerics import engine_bound
from toolweave.native.threads import default_threads

__all__ = ["CONTEXTS", "StepSweep", "print_sweep", "sweep_steps"]

CONTEXTS = (300, 1000, 3000)
PASS_SIZES = (4, 8)
_FILLER = (
    "The assistant reads the request, picks the tool whose description fits, copies the "
    "values the user gave and writes the call. Tools return observations; the agent then "
    "answers. "
)


@dataclass
class ContextSteps:
    """Median ms per point at one context length."""

    context_tokens: int
    llama_cpp_ms: dict[int, float] = field(default_factory=dict)
    toolweave_ms: float = 0.0
    toolweave_threads: int = 0
    exact_ms: float = 0.0
    pass_ms: dict[int, float] = field(default_factory=dict)

    @property
    def best_threads(self) -> int:
        return min(self.llama_cpp_ms, key=lambda t: self.llama_cpp_ms[t])

    @property
    def best_llama_cpp_ms(self) -> float:
        return self.llama_cpp_ms[self.best_threads]

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "best_threads": self.best_threads,
            "best_llama_cpp_ms": self.best_llama_cpp_ms,
            "toolweave_over_best": self.toolweave_ms / self.best_llama_cpp_ms,
            "exact_over_best": self.exact_ms / self.best_llama_cpp_ms,
        }


@dataclass(frozen=True)
class StepSweep:
    contexts: tuple[ContextSteps, ...]
    cores: int
    rounds: int
    steps: int
    bound: dict[str, object]
    flash_attn: bool | Literal["auto"] = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "cores": self.cores,
            "rounds": self.rounds,
            "steps_per_point": self.steps,
            "flash_attn": {"auto": "auto", True: "on", False: "off"}[self.flash_attn],
            "logit_bound": self.bound,
            "contexts": [c.to_dict() for c in self.contexts],
        }


class _EngineSteps:
    """Greedy serial steps and k-token passes on sequence 0 of an engine, after a prompt."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def load(self, prompt: Sequence[int]) -> None:
        self.engine.seq_remove(0)
        self.engine.prefill(0, prompt, logits_last=False)

    def step_ms(self, prompt: Sequence[int], steps: int) -> float:
        engine, n = self.engine, len(prompt)
        token, times = prompt[-1], []
        engine.seq_remove(0, n - 1)
        for i in range(steps + 1):
            t0 = time.perf_counter()
            row = engine.forward([BatchToken(token, n - 1 + i, (0,), True)])[0]
            token = int(np.argmax(row))
            times.append(time.perf_counter() - t0)
        engine.seq_remove(0, n)
        return statistics.median(times[1:]) * 1000

    def pass_ms(self, prompt: Sequence[int], k: int, repeats: int) -> float:
        engine, n = self.engine, len(prompt)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            engine.forward([BatchToken(prompt[i % n], n + i, (0,), True) for i in range(k)])
            times.append(time.perf_counter() - t0)
            engine.seq_remove(0, n)
        return statistics.median(times) * 1000


def sweep_steps(
    model_path: Path,
    *,
    contexts: Sequence[int] = CONTEXTS,
    rounds: int = 3,
    steps: int = 16,
    flash_attn: bool | Literal["auto"] | None = None,
    on_point: Callable[[str], None] | None = None,
) -> StepSweep:
    """Time every point `rounds` times, interleaved, and keep the medians. `flash_attn`
    is the default engine's setting (None: its default, off; the exact engine keeps
    llama.cpp's auto); llama-cpp-python's `Llama` runs at its own default (off)."""
    cores = default_threads()
    # Room for the logit bound's own measurement (contexts up to ~750 tokens) as well.
    n_ctx = max(max(contexts) + steps + max(PASS_SIZES) + 64, 1024)
    results = {c: ContextSteps(c) for c in contexts}
    samples: dict[tuple[int, str], list[float]] = {}

    def note(ctx: int, key: str, ms: float) -> None:
        samples.setdefault((ctx, key), []).append(ms)
        if on_point is not None:
            on_point(key)

    with (
        LlamaCppSteps(model_path, n_ctx=n_ctx, n_threads_batch=cores) as lcpp,
        Engine(model_path, n_ctx=n_ctx, n_seq_max=2, flash_attn=flash_attn) as default,
        Engine(model_path, n_ctx=n_ctx, n_seq_max=2, batch_invariant=True) as exact,
    ):
        bound = engine_bound(default, cache_dir=None).to_dict()
        unit = default.tokenize(_FILLER, parse_special=False)
        if unit != lcpp.tokenize(_FILLER):
            raise RuntimeError("llama-cpp-python and the engine tokenize the filler differently")
        engines = {"toolweave": _EngineSteps(default), "exact": _EngineSteps(exact)}
        for ctx in contexts:
            prompt = (unit * (ctx // len(unit) + 1))[:ctx]
            for runner in engines.values():
                runner.load(prompt)
            for _ in range(rounds):
                for threads in range(1, cores + 1):
                    note(ctx, f"llama_cpp_{threads}", lcpp.step_ms(prompt, threads, steps))
                for key, runner in engines.items():
                    note(ctx, key, runner.step_ms(prompt, steps))
                for k in PASS_SIZES:
                    note(ctx, f"pass_{k}", engines["toolweave"].pass_ms(prompt, k, 3))
            for runner in engines.values():
                runner.engine.seq_remove(0)
            res = results[ctx]
            med = {key: statistics.median(v) for (c, key), v in samples.items() if c == ctx}
            res.llama_cpp_ms = {t: med[f"llama_cpp_{t}"] for t in range(1, cores + 1)}
            res.toolweave_ms, res.exact_ms = med["toolweave"], med["exact"]
            res.toolweave_threads = default.n_threads
            res.pass_ms = {k: med[f"pass_{k}"] for k in PASS_SIZES}
    fa = default.flash_attn
    return StepSweep(tuple(results[c] for c in contexts), cores, rounds, steps, bound, fa)


def sweep_points(contexts: Sequence[int], rounds: int, cores: int) -> int:
    """How many `on_point` calls `sweep_steps` makes (for a progress bar)."""
    return len(contexts) * rounds * (cores + 2 + len(PASS_SIZES))


def print_sweep(sweep: StepSweep, console: Console) -> None:
    threads = range(1, sweep.cores + 1)
    fa = {"auto": "auto", True: "on", False: "off"}[sweep.flash_attn]
    view = Table(
        title=f"serial step, ms (median of {sweep.rounds} rounds x {sweep.steps} steps; "
        f"toolweave flash attention {fa})"
    )
    view.add_column("context", justify="right")
    for t in threads:
        view.add_column(f"llama-cpp {t}t", justify="right")
    for header in (
        "toolweave default",
        "exact engine (1t)",
        *(f"pass k={k}" for k in PASS_SIZES),
    ):
        view.add_column(header, justify="right")
    for c in sweep.contexts:
        best = c.best_llama_cpp_ms
        view.add_row(
            str(c.context_tokens),
            *(f"{c.llama_cpp_ms[t]:.1f}" for t in threads),
            f"{c.toolweave_ms:.1f} ({c.toolweave_threads}t) x{c.toolweave_ms / best:.2f}",
            f"{c.exact_ms:.1f} x{c.exact_ms / best:.2f}",
            *(f"{c.pass_ms[k]:.1f}" for k in PASS_SIZES),
        )
    console.print(view)
    console.print(
        "x: against llama-cpp-python at its best thread count · logit bound of the default "
        f"engine: {float(str(sweep.bound['bound'])):.3f}"
    )
