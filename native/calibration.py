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

The table itself is `toolweave.native.cost_table`, the timing run
`toolweave.native.cost_measure`; this module keeps the entry points and the per-engine
table (`engine_costs`), and re-exports `CostTable`, `MAX_K` and `STATE_TOKENS`.
"""

from __future__ import annotations

import time
import weakref
from pathlib import Path
from typing import Literal

from toolweave.errors import SequenceError
from toolweave.native.cost_measure import MAX_K, STATE_TOKENS, plan_cells, run_measurement
from toolweave.native.cost_table import CostTable
from toolweave.native.engine import Engine

__all__ = [
    "MAX_K",
    "QUICK_CONTEXT_TOKENS",
    "STATE_TOKENS",
    "CostTable",
    "engine_costs",
    "measure_costs",
    "scratch_sequences",
]

#: Prefix length of the quick measurement: short, so start-up stays well under a second.
QUICK_CONTEXT_TOKENS = 64


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
        state_tokens = plan_cells(engine, scratch, context_tokens, quick)
        saved = engine.counters
        engine.reset_counters()
        try:
            measured = run_measurement(
                engine, scratch, context_tokens, state_tokens, repeats, quick
            )
        finally:
            for s in scratch:
                engine.seq_remove(s)
            engine.counters = saved
    measure_ms = (time.perf_counter() - t_start) * 1000
    return CostTable(**measured, measure_ms=measure_ms)


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
