"""What a forward pass costs on this engine: the cost table the fast-path decoders plan with.

`measure_costs(engine)` times, on the loaded model and thread count:

- a serial step (one token, one logits row, after a `context_tokens` prefix);
- a k-sequence pass: k sequences sharing the prefix, one new token each, logits for all;
- a k-token verification pass in one sequence, logits for every row or the last only;
- prefill per token, and KV state get/set/save/load of one sequence.

A pass of k=1 is the serial step in all three pass tables (measured once, reused).
`CostTable.pass_ms(k_tokens, logit_rows)` interpolates between the measured points, so a
decoder can compare "serial", "batched" and "padded" plans without a hard-coded policy.

Scratch sequences: the measurement runs in the highest sequence ids of the engine,
`n_seq_max - n .. n_seq_max - 1` with n = min(8, n_seq_max - 1) (ids 8..15 for the
default 16 sequences). They must be empty on entry and are empty again on return;
every other sequence and the engine counters are left exactly as they were.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from toolweave.errors import ContextFullError, SequenceError
from toolweave.native.engine import BatchToken, Engine

__all__ = [
    "MAX_K",
    "QUICK_CONTEXT_TOKENS",
    "STATE_TOKENS",
    "CostTable",
    "engine_costs",
    "measure_costs",
    "scratch_sequences",
]

#: Largest pass size measured (and the number of scratch sequences wanted).
MAX_K = 8
#: Prefix length of the quick measurement: short, so start-up stays well under a second.
QUICK_CONTEXT_TOKENS = 64
#: Sequence length whose KV state is saved and restored in the thorough measurement.
STATE_TOKENS = 600

_QUICK_KS = (1, 2, 4, 8)
_FILLER = (
    "Tool calls are short and formulaic, prompts are long. The agent reads the request, "
    "picks a tool, and writes its arguments as compact JSON for the executor to run. "
)


def _frozen(points: Mapping[int, float]) -> Mapping[int, float]:
    return MappingProxyType({int(k): float(v) for k, v in sorted(points.items())})


def _interp(points: Mapping[int, float], k: float) -> float:
    """Linear interpolation over sorted integer keys; clamped to the end points."""
    keys = sorted(points)
    if k <= keys[0]:
        return points[keys[0]]
    for lo, hi in itertools.pairwise(keys):
        if k <= hi:
            w = (k - lo) / (hi - lo)
            return points[lo] * (1 - w) + points[hi] * w
    return points[keys[-1]]


@dataclass(frozen=True)
class CostTable:
    """Measured milliseconds of the engine's passes; pass maps are keyed by k (tokens).

    `sequences_ms[k]`: k sequences sharing a prefix, one token each, logits for all.
    `verify_all_ms[k]` / `verify_last_ms[k]`: k tokens in one sequence, logits for every
    row / for the last row only. Key 1 of each map is `serial_step_ms`. State figures are
    for one sequence of `state_tokens` tokens (600 in a thorough run, the prefix in a
    quick one); `state_restore_ms` scales them to other lengths.
    """

    model: str
    n_threads: int
    context_tokens: int
    serial_step_ms: float
    sequences_ms: Mapping[int, float]
    verify_all_ms: Mapping[int, float]
    verify_last_ms: Mapping[int, float]
    prefill_ms_per_token: float
    state_tokens: int
    state_bytes: int
    state_get_ms: float
    state_set_ms: float
    state_save_ms: float
    state_load_ms: float
    repeats: int
    quick: bool
    measure_ms: float = 0.0

    def __post_init__(self) -> None:
        for name in ("sequences_ms", "verify_all_ms", "verify_last_ms"):
            points = getattr(self, name)
            if not points or 1 not in points:
                raise ValueError(f"{name} needs at least the k=1 point")
            object.__setattr__(self, name, _frozen(points))
        if self.serial_step_ms <= 0:
            raise ValueError("serial_step_ms must be positive")

    # ------------------------------------------------------------------ ratios
    def sequences_ratio(self, k: int) -> float:
        """Cost of a k-sequence pass relative to one serial step."""
        return self.pass_ms(k, k, sequences=True) / self.serial_step_ms

    def verify_ratio(self, k: int, *, last_only: bool = False) -> float:
        """Cost of a k-token verification pass relative to one serial step."""
        return self.pass_ms(k, 1 if last_only else k) / self.serial_step_ms

    def prefill_ratio(self) -> float:
        """Cost of prefilling one token relative to one serial step."""
        return self.prefill_ms_per_token / self.serial_step_ms

    # ------------------------------------------------------------------ planning
    def pass_ms(self, k_tokens: int, logit_rows: int, *, sequences: bool = False) -> float:
        """Estimated ms of one pass of `k_tokens` tokens asking `logit_rows` logits rows.

        One sequence by default; `sequences=True` puts each token in its own sequence
        over a shared prefix (parallel values). Between measured k the estimate is linear;
        past the largest measured k each extra token costs `prefill_ms_per_token`.
        """
        if k_tokens < 1 or not 0 <= logit_rows <= k_tokens:
            raise ValueError(
                f"need k_tokens >= 1 and 0 <= logit_rows <= k_tokens, got {k_tokens}, {logit_rows}"
            )
        k_max = max(self.verify_last_ms)
        k = min(k_tokens, k_max)
        last = _interp(self.verify_last_ms, k) + (k_tokens - k) * self.prefill_ms_per_token
        ms = last + (logit_rows - 1) * self._row_ms(k)
        if sequences:
            ms += self._sequence_overhead_ms(k_tokens)
        # A pass never costs less than half its logits-for-the-last-row price here.
        return max(ms, 0.5 * last)

    def state_restore_ms(self, n_tokens: int, *, from_file: bool = False) -> float:
        """Estimated ms to restore a saved KV state of `n_tokens` tokens (linear in size)."""
        ms = self.state_load_ms if from_file else self.state_set_ms
        return ms * n_tokens / max(1, self.state_tokens)

    def _row_ms(self, k: float) -> float:
        """Extra ms of one more logits row in a pass of about k tokens."""
        rows = {
            n: max(0.0, (self.verify_all_ms[n] - self.verify_last_ms[n]) / (n - 1))
            for n in self.verify_all_ms
            if n > 1 and n in self.verify_last_ms
        }
        return _interp(rows, k) if rows else 0.0

    def _sequence_overhead_ms(self, k_tokens: int) -> float:
        """Extra ms of spreading k tokens over k sequences instead of one."""
        over = {
            n: self.sequences_ms[n] - self.verify_all_ms[n]
            for n in self.sequences_ms
            if n in self.verify_all_ms
        }
        k_max = max(over)
        if k_tokens <= k_max:
            return _interp(over, k_tokens)
        return over[k_max] * k_tokens / k_max

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every field (pass maps keyed by str(k)) plus the ratios."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else value
            )
        ks = range(1, max(self.verify_last_ms) + 1)
        out["ratios"] = {
            "sequences": {str(k): self.sequences_ratio(k) for k in ks},
            "verify_all": {str(k): self.verify_ratio(k) for k in ks},
            "verify_last": {str(k): self.verify_ratio(k, last_only=True) for k in ks},
            "prefill_per_token": self.prefill_ratio(),
        }
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostTable:
        """Rebuild a table from `to_dict` output (the ratios are recomputed, not read)."""
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if isinstance(value, Mapping):
                value = {int(k): float(v) for k, v in value.items()}
            kwargs[f.name] = value
        return cls(**kwargs)


# ---------------------------------------------------------------------- measurement
def scratch_sequences(engine: Engine) -> list[int]:
    """The sequence ids `measure_costs` uses: the highest min(8, n_seq_max - 1) ids."""
    n = min(MAX_K, engine.n_seq_max - 1)
    if n < 1:
        raise SequenceError("calibration needs an engine with n_seq_max >= 2")
    return list(range(engine.n_seq_max - n, engine.n_seq_max))


def measure_costs(
    engine: Engine, *, context_tokens: int = 256, repeats: int = 5, quick: bool = False
) -> CostTable:
    """Measure the engine's cost table (lower median of `repeats` timings per point).

    `quick` (for start-up): 2 repeats, k in {1, 2, 4, 8} with the rest interpolated, a
    prefix of at most 64 tokens and state figures on that prefix. The scratch sequences
    (`scratch_sequences`) must be empty; the engine counters are restored on return.
    """
    if repeats < 1 or context_tokens < 1:
        raise ValueError("repeats and context_tokens must be >= 1")
    if quick:
        repeats = min(repeats, 2)
        context_tokens = min(context_tokens, QUICK_CONTEXT_TOKENS)
    scratch = scratch_sequences(engine)
    t_start = time.perf_counter()
    with engine.lock:
        for s in scratch:
            if engine.seq_len(s) > 0:
                raise SequenceError(
                    f"calibration uses sequences {scratch[0]}..{scratch[-1]} as scratch, "
                    f"but sequence {s} holds {engine.seq_len(s)} tokens"
                )
        state_tokens = _plan_cells(engine, scratch, context_tokens, quick)
        saved = engine.counters
        engine.reset_counters()
        try:
            run = _Run(engine, scratch, _filler_tokens(engine, state_tokens + MAX_K))
            measured = run.measure(context_tokens, state_tokens, repeats, quick)
        finally:
            for s in scratch:
                engine.seq_remove(s)
            engine.counters = saved
    measure_ms = (time.perf_counter() - t_start) * 1000
    return CostTable(**measured, measure_ms=measure_ms)


def _plan_cells(engine: Engine, scratch: Sequence[int], context_tokens: int, quick: bool) -> int:
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


#: Each engine's quick cost table, measured on first use (`engine_costs`).
_ENGINE_COSTS: weakref.WeakKeyDictionary[Engine, CostTable] = weakref.WeakKeyDictionary()


def engine_costs(engine: Engine, *, cache_dir: Path | Literal[True] | None = True) -> CostTable:
    """The engine's quick cost table, measured once per engine on first use and shared by
    every decoder on it. The measurement borrows the scratch sequences, which must be
    empty; pass a table explicitly when decoding in those sequences.

    `cache_dir`: where a table measured within the last day is read from and a new one
    kept (`toolweave.native.cost_cache`; True: ``<cache root>/costs``; None: measured
    in every process)."""
    from toolweave.native import cost_cache

    with engine.lock:
        table = _ENGINE_COSTS.get(engine)
        if table is not None:
            return table
        path = None
        if cache_dir is not None:
            path = cost_cache.cost_file(engine, None if cache_dir is True else cache_dir)
            table = cost_cache.read_costs(path, engine)
        if table is None:
            table = measure_costs(engine, quick=True)
            if path is not None:
                cost_cache.write_costs(path, engine, table)
        _ENGINE_COSTS[engine] = table
        return table
