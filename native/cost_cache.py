"""The engine's quick cost table kept on disk for a day, so a new process does not spend
about a second measuring it again before its first `fast` or `lossless` call.

A table is timings of this machine: it is keyed like the logit bound (model file,
llama.cpp build, thread counts, flash attention, exact or free engine) plus the engine's
sequence and batch sizes, and measured again once it is a day old. The file is
untrusted: anything that is not a well-formed table for this key is ignored (one
warning) and the table measured again.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

from toolweave.disk_cache import atomic_write, cache_root
from toolweave.native.calibration import CostTable
from toolweave.native.engine import Engine
from toolweave.native.numerics import engine_cache_key

__all__ = ["MAX_AGE_S", "cost_file", "read_costs", "write_costs"]

#: A stored table older than this is measured again (load and power settings change).
MAX_AGE_S = 24 * 3600.0
#: Largest cost file read (a table is about 2 KB).
MAX_BYTES = 64 << 10
_FORMAT = "toolweave-cost-table-v1"
log = logging.getLogger("toolweave.costs")

_FLOATS = (
    "serial_step_ms",
    "prefill_ms_per_token",
    "state_get_ms",
    "state_set_ms",
    "state_save_ms",
    "state_load_ms",
    "measure_ms",
)
_INTS = ("n_threads", "context_tokens", "state_tokens", "state_bytes", "repeats")
_MAPS = ("sequences_ms", "verify_all_ms", "verify_last_ms")


def cost_key(engine: Engine) -> str:
    return f"{engine_cache_key(engine)}-s{engine.n_seq_max}-b{engine.n_batch}"


def cost_file(engine: Engine, directory: Path | None = None) -> Path:
    """Where `engine`'s table is kept (``<cache root>/costs`` unless `directory`)."""
    folder = cache_root() / "costs" if directory is None else directory
    return folder / f"{cost_key(engine)}.json"


def read_costs(path: Path, engine: Engine, *, now: float | None = None) -> CostTable | None:
    """The table stored at `path` for `engine`, or None (missing, stale or untrusted)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("ignoring %s: %s; measuring the engine's costs again", path, exc)
        return None
    try:
        if len(raw) > MAX_BYTES:
            raise ValueError(f"over {MAX_BYTES} bytes")
        return _parse(json.loads(raw), cost_key(engine), time.time() if now is None else now)
    except _Stale:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring %s: %s; measuring the engine's costs again", path, exc)
        return None


def write_costs(path: Path, engine: Engine, table: CostTable) -> None:
    """Store `table` atomically; a cache that cannot be written only costs a re-measure."""
    body = {"format": _FORMAT, "key": cost_key(engine), "saved": time.time(), **table.to_dict()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(body).encode("utf-8"))
    except OSError as exc:
        log.warning("could not store the engine's costs in %s: %s", path, exc)


class _Stale(Exception):
    """A well-formed table older than `MAX_AGE_S` (or from the future)."""


def _parse(data: Any, key: str, now: float) -> CostTable:
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise ValueError(f"not a {_FORMAT} file")
    if data.get("key") != key:
        raise ValueError("written for another model, build, thread count or engine size")
    saved = _number(data, "saved")
    if not 0 <= now - saved <= MAX_AGE_S:
        raise _Stale
    for name in _FLOATS:
        _number(data, name)
    for name in _INTS:
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} is not a count")
    for name in _MAPS:
        points = data[name]
        if not isinstance(points, dict) or not points or len(points) > 64:
            raise ValueError(f"{name} is not a table of pass sizes")
        for k in points:
            if not (isinstance(k, str) and k.isdigit() and 0 < int(k) <= 4096):
                raise ValueError(f"{name} has a bad pass size {k!r}")
            _number(points, k)
    if not isinstance(data["model"], str) or not isinstance(data["quick"], bool):
        raise ValueError("model or quick is malformed")
    return CostTable.from_dict({k: v for k, v in data.items() if k != "ratios"})


def _number(data: dict[str, Any], name: str) -> float:
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} is not a number")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} is not a finite, non-negative number")
    return float(value)
