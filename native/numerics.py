"""How far a batched pass's logits can sit from serial steps: the bound `lossless` decides by.

llama.cpp computes a token's logits differently in a multi-token pass than in a
single-token step: flash attention splits a single query over many KV cells into
per-thread partial sums, batches take tiled kernels, and K-quant weights use different
matrix-vector and matrix-matrix kernels. On most models, quantizations and thread counts
no setting makes the two bit-identical. So the engine measures the largest |difference|
between the rows of k-token passes and serial steps of the same tokens, over a few
context lengths and pass sizes, and multiplies it by a safety factor. A verified draft
token is committed from a batched row only when it leads the runner-up by more than
twice that bound (each of the two logits may be off by the bound); any closer position
is decided on the reference path.

The measurement prefills about a thousand tokens, so it is kept on disk per model file,
llama.cpp build and thread counts (``<cache root>/numerics``, see `toolweave.disk_cache`;
a few hundred bytes each) and repeated only when one of them changes. A stored file
that is damaged, of another format or written for another model, build or thread count
is ignored with one warning and measured again.
"""

from __future__ import annotations

import json
import logging
import math
import time
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import llama_cpp
import numpy as np

from toolweave.disk_cache import atomic_write, cache_root
from toolweave.errors import SequenceError
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states.state_file import model_fingerprint

__all__ = ["DEFAULT_SAFETY", "LogitBound", "engine_bound", "engine_cache_key", "measure_bound"]

#: Factor on the largest measured difference: a few contexts and pass sizes do not see
#: every kernel path a long response takes.
DEFAULT_SAFETY = 1.5
#: Context lengths and pass sizes measured (clamped to the free KV cells).
CONTEXTS = (300, 1000)
PASS_SIZES = (2, 4, 8)
_FORMAT = "toolweave-logit-bound-v3"
log = logging.getLogger("toolweave.numerics")


class _Default:
    """`engine_bound`'s default cache directory: ``<cache root>/numerics`` at call time."""


_CACHE_DIR = _Default()
_TEXT = (
    "A user asks an assistant to book a table, check the weather in three cities, move a "
    "meeting to Thursday and send the notes to the team. The assistant picks the tools, "
    "writes each call with its arguments, reads the results and answers in a sentence. "
    "Numbers, names, dates such as 2026-12-01 and places like Zürich or São Paulo appear. "
)


@dataclass(frozen=True)
class LogitBound:
    """How far a batched row may sit from the serial step of the same token.

    `max_delta` is the largest |logit difference| measured (0.0 where the engine is
    batch-invariant); `bound` is that times `safety`. `decides(gap)` says whether a row
    whose best token leads the runner-up by `gap` picks the same token as a serial step.
    """

    max_delta: float
    safety: float
    contexts: tuple[int, ...]
    pass_sizes: tuple[int, ...]
    n_threads: int
    n_threads_batch: int
    measure_ms: float

    @property
    def bound(self) -> float:
        return self.max_delta * self.safety

    def decides(self, gap: float) -> bool:
        # Each of the two logits may be off by `bound`; with no difference at all even an
        # exact tie is decided the same way (argmax takes the lowest id on both paths).
        return self.max_delta == 0.0 or gap > 2 * self.bound

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "bound": self.bound}


def measure_bound(
    engine: Engine,
    seq: int,
    *,
    contexts: Sequence[int] = CONTEXTS,
    pass_sizes: Sequence[int] = PASS_SIZES,
    safety: float = DEFAULT_SAFETY,
) -> LogitBound:
    """Measure the bound in the empty sequence `seq` (left empty again): for each context
    length, k + 1 serial steps against one k-token pass over the same tokens followed by
    the same last step (which then reads KV cells the pass wrote)."""
    if safety < 1:
        raise ValueError("safety must be >= 1")
    with engine.lock:
        if engine.seq_len(seq) > 0:
            raise SequenceError(f"the bound is measured in an empty sequence; {seq} is not")
        used = sum(engine.seq_len(s) for s in range(engine.n_seq_max))
        room = engine.n_ctx - used - 2 * max(pass_sizes)
        sizes = sorted({min(c, room) for c in contexts if min(c, room) >= 16})
        unit = engine.tokenize(_TEXT, parse_special=False)
        tokens = unit * ((max(sizes, default=0) + max(pass_sizes)) // len(unit) + 1)
        t0 = time.perf_counter()
        worst = 0.0
        try:
            done = 0
            for ctx in sizes:
                engine.prefill(seq, tokens[done:ctx], start=done, logits_last=False)
                done = ctx
                for k in pass_sizes:
                    # k serial steps and one more, against a k-token pass and the same
                    # step after it: the rows, and a step reading KV a pass wrote.
                    draft = tokens[ctx : ctx + k + 1]
                    serial = [
                        engine.forward([BatchToken(t, ctx + i, (seq,), True)])[0].copy()
                        for i, t in enumerate(draft)
                    ]
                    engine.seq_remove(seq, ctx)
                    rows = engine.forward(
                        [BatchToken(t, ctx + i, (seq,), True) for i, t in enumerate(draft[:k])]
                    )
                    after = engine.forward([BatchToken(draft[k], ctx + k, (seq,), True)])[0]
                    engine.seq_remove(seq, ctx)
                    for a, b in zip(serial, [*rows, after], strict=True):
                        worst = max(worst, float(np.max(np.abs(a - b))))
        finally:
            engine.seq_remove(seq)
    return LogitBound(
        max_delta=worst,
        safety=safety,
        contexts=tuple(sizes),
        pass_sizes=tuple(pass_sizes),
        n_threads=engine.n_threads,
        n_threads_batch=engine.n_threads_batch,
        measure_ms=(time.perf_counter() - t0) * 1000,
    )


#: A bound no gap exceeds: batched rows decide nothing.
_UNMEASURED = LogitBound(float("inf"), 1.0, (), (), 0, 0, 0.0)

_ENGINE_BOUNDS: weakref.WeakKeyDictionary[Engine, LogitBound] = weakref.WeakKeyDictionary()


def engine_bound(engine: Engine, cache_dir: Path | _Default | None = _CACHE_DIR) -> LogitBound:
    """The engine's bound, measured once per model file, llama.cpp build and thread
    counts (kept in `cache_dir`; None keeps nothing on disk) in the highest empty
    sequence. With no sequence empty it is an unmeasured bound that decides nothing, so
    every verified choice takes the reference path.

    The differences depend on what else the KV cache holds (measured on SmolLM2: none
    beside a 3,000-token prompt, 0.76 with the cache empty), so a measurement is stored
    only when every sequence was empty; `ToolCaller` asks for the bound when it is built.
    """
    with engine.lock:
        known = _ENGINE_BOUNDS.get(engine)
        if known is not None:
            return known
        directory = cache_root() / "numerics" if isinstance(cache_dir, _Default) else cache_dir
        key = engine_cache_key(engine)
        path = None if directory is None else directory / f"{key}.json"
        bound = _read(path, key) if path is not None else None
        if bound is None:
            empty = [s for s in range(engine.n_seq_max) if engine.seq_len(s) == 0]
            if not empty:
                return _UNMEASURED
            alone = len(empty) == engine.n_seq_max
            log.info(
                "measuring how far batched logits sit from serial steps on %s "
                "(once per model and thread counts; a few seconds)",
                Path(engine.model_path).name,
            )
            bound = measure_bound(engine, empty[-1])
            if path is not None and alone:
                _write(path, key, bound)
        _ENGINE_BOUNDS[engine] = bound
        return bound


def engine_cache_key(engine: Engine) -> str:
    """What a measurement of `engine` holds for: model file, llama.cpp build, thread
    counts, flash attention, exact or free engine."""
    parts = (
        model_fingerprint(engine.model_path),
        llama_cpp.__version__,
        f"t{engine.n_threads}-{engine.n_threads_batch}",
        {"auto": "fa-auto", True: "fa-on", False: "fa-off"}[engine.flash_attn],
        "invariant" if engine.batch_invariant else "free",
    )
    return "-".join(parts)


def _read(path: Path, key: str) -> LogitBound | None:
    """A stored bound, or None when there is none or it cannot be trusted (then re-measured,
    with one warning unless the file is simply missing)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("ignoring %s: %s; measuring the bound again", path, exc)
        return None
    try:
        return _parse(raw, key)
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring %s: %s; measuring the bound again", path, exc)
        return None


def _parse(raw: bytes, key: str) -> LogitBound:
    data = json.loads(raw)
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise ValueError(f"not a {_FORMAT} file")
    if data.get("key") != key:
        raise ValueError("written for another model, build or thread count")
    numbers = {name: data[name] for name in ("max_delta", "safety", "measure_ms")}
    counts = {name: data[name] for name in ("n_threads", "n_threads_batch")}
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers.values()):
        raise ValueError("malformed numbers")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in counts.values()):
        raise ValueError("malformed thread counts")
    lists = (data["contexts"], data["pass_sizes"])
    if not all(isinstance(x, list) and all(type(v) is int for v in x) for x in lists):
        raise ValueError("malformed contexts or pass sizes")
    bound = LogitBound(
        max_delta=float(numbers["max_delta"]),
        safety=float(numbers["safety"]),
        contexts=tuple(lists[0]),
        pass_sizes=tuple(lists[1]),
        n_threads=counts["n_threads"],
        n_threads_batch=counts["n_threads_batch"],
        measure_ms=float(numbers["measure_ms"]),
    )
    if not (math.isfinite(bound.max_delta) and bound.max_delta >= 0 and bound.safety >= 1):
        raise ValueError("bound out of range")
    return bound


def _write(path: Path, key: str, bound: LogitBound) -> None:
    """Store `bound` atomically; a cache that cannot be written only costs a re-measure."""
    body = json.dumps({"format": _FORMAT, "key": key, **bound.to_dict()}).encode()
    try:
        atomic_write(path, body)
    except OSError as exc:
        log.warning("could not store the logit bound in %s: %s", path, exc)
