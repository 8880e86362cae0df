"""The measuring run behind `toolweave.native.calibration.measure_costs`.

`plan_cells` checks that the scratch sequences fit in the free KV cells and picks the
length of the state-measurement sequence; `run_measurement` prefills a prefix of
ordinary text in the first scratch sequence, times the serial step and the k-sequence
and k-token passes (interleaved over the repeats), then KV state get/set/save/load, and
returns the `CostTable` fields. Each point is the lower median of its timings. The
caller holds the engine lock and empties the scratch sequences afterwards.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from toolweave.errors import ContextFullError
from toolweave.native.engine import BatchToken, Engine

__all__ = ["MAX_K", "STATE_TOKENS", "plan_cells", "run_measurement"]

#: Largest pass size measured (and the number of scratch sequences wanted).
MAX_K = 8
#: Sequence length whose KV state is saved and restored in the thorough measurement.
STATE_TOKENS = 600

_QUICK_KS = (1, 2, 4, 8)
_FILLER = (
    "Tool calls are short and formulaic, prompts are long. The agent reads the request, "
    "picks a tool, and writes its arguments as compact JSON for the executor to run. "
)


def plan_cells(engine: Engine, scratch: Sequence[int], context_tokens: int, quick: bool) -> int:
    """How long the state-measurement sequence can be, given the KV cells in use."""
    used = sum(engine.seq_len(s) for s in range(engine.n_seq_max) if s not in scratch)
    free = engine.n_ctx - used - 2 * MAX_K  # 2*MAX_K: pass tokens, plus slack
    if context_tokens > free:
        raise ContextFullError(
            f"calibration needs {context_tokens + 2 * MAX_K} free KV cells; "
            f"{max(0, engine.n_ctx - used)} of {engine.n_ctx} are free"
        )
    if quick:
        return context_tokens
    return max(context_tokens, min(STATE_TOKENS, free))


def run_measurement(
    engine: Engine,
    scratch: Sequence[int],
    context: int,
    state_tokens: int,
    repeats: int,
    quick: bool,
) -> dict[str, Any]:
    """Time every point on `scratch` (empty on entry) and return the `CostTable` fields
    other than `measure_ms`; the scratch sequences are left holding tokens."""
    run = _Run(engine, scratch, _filler_tokens(engine, state_tokens + MAX_K))
    return run.measure(context, state_tokens, repeats, quick)


def _filler_tokens(engine: Engine, n: int) -> list[int]:
    """At least `n` tokens of ordinary text (what a prompt looks like to the engine)."""
    unit = engine.tokenize(_FILLER)
    return (unit * (n // max(1, len(unit)) + 1))[:n]


def _median_ms(samples: Sequence[float]) -> float:
    # The lower median: with an even count (2 quick repeats) a timing disturbed by another
    # process on a shared CPU is dropped instead of averaged in.
    return float(statistics.median_low(samples))


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


class _Run:
    """One measurement: the prefix sits in `scratch[0]`, copies in the other scratch ids."""

    def __init__(self, engine: Engine, scratch: Sequence[int], tokens: Sequence[int]) -> None:
        self.engine = engine
        self.scratch = list(scratch)
        self.tokens = list(tokens)
        self.base = self.scratch[0]

    def measure(self, context: int, state_tokens: int, repeats: int, quick: bool) -> dict[str, Any]:
        eng = self.engine
        prefill = [self._prefill_prefix(context)]
        if not quick:
            prefill += [self._reprefill(context) for _ in range(repeats - 1)]
        for s in self.scratch[1:]:
            eng.seq_copy(self.base, s, 0, context)
        self._serial(context)  # warm-up: the first pass after a shape change is slower
        points = self._pass_points(context, repeats, quick)
        for s in self.scratch[1:]:
            eng.seq_remove(s)
        if state_tokens > context:
            eng.prefill(self.base, self.tokens[context:state_tokens], logits_last=False)
        state = self._state(state_tokens, repeats)
        return {
            "model": eng.model_name,
            "n_threads": eng.n_threads,
            "context_tokens": context,
            "serial_step_ms": points["serial"][1],
            "sequences_ms": points["sequences"],
            "verify_all_ms": points["verify_all"],
            "verify_last_ms": points["verify_last"],
            "prefill_ms_per_token": _median_ms(prefill),
            "state_tokens": state_tokens,
            "repeats": repeats,
            "quick": quick,
            **state,
        }

    # -------------------------------------------------------------- prefill
    def _prefill_prefix(self, context: int) -> float:
        ms = _timed(
            lambda: self.engine.prefill(self.base, self.tokens[:context], logits_last=False)
        )
        return ms / context

    def _reprefill(self, context: int) -> float:
        """Drop the second half of the prefix and prefill it again; ms per token."""
        half = context // 2
        n = context - half
        self.engine.seq_remove(self.base, half)
        ms = _timed(
            lambda: self.engine.prefill(
                self.base, self.tokens[half:context], start=half, logits_last=False
            )
        )
        return ms / n

    # -------------------------------------------------------------- passes
    def _pass_points(self, context: int, repeats: int, quick: bool) -> dict[str, dict[int, float]]:
        ks = [
            k for k in (_QUICK_KS if quick else range(1, MAX_K + 1)) if 1 < k <= self.engine.n_batch
        ]
        jobs: list[tuple[str, int, Callable[[], float]]] = [
            ("serial", 1, partial(self._serial, context))
        ]
        for k in ks:
            if k <= len(self.scratch):
                jobs.append(("sequences", k, partial(self._sequences, context, k)))
            jobs.append(("verify_all", k, partial(self._verify, context, k, True)))
            jobs.append(("verify_last", k, partial(self._verify, context, k, False)))
        samples: dict[tuple[str, int], list[float]] = {(name, k): [] for name, k, _ in jobs}
        for _ in range(repeats):  # interleaved, so drift in machine load hits every point alike
            for name, k, job in jobs:
                samples[(name, k)].append(job())
        serial = _median_ms(samples[("serial", 1)])
        points: dict[str, dict[int, float]] = {
            name: {1: serial} for name in ("serial", "sequences", "verify_all", "verify_last")
        }
        for (name, k), ms in samples.items():
            if name != "serial":
                points[name][k] = _median_ms(ms)
        return points

    def _serial(self, pos: int) -> float:
        ms = _timed(
            lambda: self.engine.forward([BatchToken(self.tokens[pos], pos, (self.base,), True)])
        )
        self.engine.seq_remove(self.base, pos)
        return ms

    def _sequences(self, pos: int, k: int) -> float:
        seqs = self.scratch[:k]
        items = [BatchToken(self.tokens[pos + i], pos, (s,), True) for i, s in enumerate(seqs)]
        ms = _timed(lambda: self.engine.forward(items))
        for s in seqs:
            self.engine.seq_remove(s, pos)
        return ms

    def _verify(self, pos: int, k: int, all_logits: bool) -> float:
        items = [
            BatchToken(self.tokens[pos + i], pos + i, (self.base,), all_logits or i == k - 1)
            for i in range(k)
        ]
        ms = _timed(lambda: self.engine.forward(items))
        self.engine.seq_remove(self.base, pos)
        return ms

    # -------------------------------------------------------------- states
    def _state(self, n_tokens: int, repeats: int) -> dict[str, Any]:
        """Get/set in memory and save/load through a file, restoring into the same sequence
        (set and load drop its cells first, so no extra KV cells are needed)."""
        eng, seq = self.engine, self.base
        tokens = self.tokens[:n_tokens]
        get_ms: list[float] = []
        set_ms: list[float] = []
        save_ms: list[float] = []
        load_ms: list[float] = []
        data = bytearray()
        with tempfile.TemporaryDirectory(prefix="toolweave-cal-") as tmp:
            path = Path(tmp) / "state.bin"
            for _ in range(repeats):
                t0 = time.perf_counter()
                data = eng.state_get(seq)
                get_ms.append((time.perf_counter() - t0) * 1000)
                set_ms.append(_timed(partial(eng.state_set, seq, data)))
                save_ms.append(_timed(lambda: eng.state_save_file(seq, path, tokens)))
                load_ms.append(_timed(lambda: eng.state_load_file(seq, path)))
        return {
            "state_bytes": len(data),
            "state_get_ms": _median_ms(get_ms),
            "state_set_ms": _median_ms(set_ms),
            "state_save_ms": _median_ms(save_ms),
            "state_load_ms": _median_ms(load_ms),
        }
