"""The cost model of `toolweave bench simulate`: `jump` traces and their predicted decode time.

`trace_call` reads a `jump` output as a `CallTrace`: which tokens the model chose and
which the grammar forced, and per call the token span and lengths of its required
values. `predict_ms` prices a trace on a `CostTable`, as `jump` or as `fast` with
parallel values; `decisions` records what the planner decides on a table, and
`CAVEAT` is the warning every simulation report carries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolweave.native.calibration import CostTable

__all__ = ["CAVEAT", "CallTrace", "batch_pays", "decisions", "predict_ms", "trace_call"]


# ============================================================ the cost model
@dataclass(frozen=True)
class CallTrace:
    """A `jump` output as the cost model sees it: per token, whether the model chose it
    (else the grammar forced it), and per call with required arguments the token span
    ``[start, end)`` from its first required key to the end of its last required value,
    with the tokens of each required value."""

    chosen: tuple[bool, ...]
    regions: tuple[tuple[int, int, tuple[int, ...]], ...] = ()


def _latin1(text: str) -> str:
    return text.encode("utf-8").decode("latin-1")


def trace_call(
    pieces: Sequence[bytes], chosen: Sequence[bool], calls: Sequence[tuple[str, Sequence[str]]]
) -> CallTrace:
    """The trace of an output of token `pieces` (bytes) where `calls` are its valid calls
    in order, each (tool name, its required keys present in the call). The output is read
    as latin-1 so that characters and bytes share offsets."""
    starts = [0]
    for p in pieces:
        starts.append(starts[-1] + len(p))
    text = b"".join(pieces).decode("latin-1")
    decoder = json.JSONDecoder()

    def token_at(byte: int) -> int:  # the token holding `byte`
        return max(i for i in range(len(pieces)) if starts[i] <= byte)

    regions: list[tuple[int, int, tuple[int, ...]]] = []
    cursor = 0
    for name, keys in calls:
        at = text.find(_latin1(json.dumps(name, ensure_ascii=False)), cursor)
        if at < 0:
            break
        spans: list[tuple[int, int, int]] = []
        for key in keys:
            pat = _latin1(json.dumps(key, ensure_ascii=False) + ":")
            i = text.find(pat, at)
            v0 = i + len(pat)
            while v0 < len(text) and text[v0] in " \n":
                v0 += 1
            try:
                _, end = decoder.raw_decode(text, v0) if i >= 0 else (None, -1)
            except ValueError:
                end = -1
            if end < 0:
                break
            spans.append((i, v0, end))
            at = end
        cursor = at
        if spans and len(spans) == len(keys):
            lengths = tuple(token_at(v1 - 1) - token_at(v0) + 1 for _, v0, v1 in spans)
            regions.append((token_at(spans[0][0]), token_at(spans[-1][2] - 1) + 1, lengths))
    return CallTrace(tuple(chosen), tuple(regions))


def batch_pays(costs: CostTable, k: int) -> bool:
    """`ToolCaller`'s rule: one k-sequence pass beats k serial steps."""
    return costs.pass_ms(k, k, sequences=True) < k * costs.serial_step_ms


def predict_ms(trace: CallTrace, costs: CostTable, parallel: Callable[[int], bool] | bool) -> float:
    """The decode time `costs` predicts for the trace's tokens: `jump` (every chosen token
    a pass carrying the forced tokens before it) where `parallel(n)` is false, else for a
    call of n >= 2 required values `fast`'s plan: a flush, a skeleton pass of the keys,
    one pass per value token of the still unfinished values (batched when that pays)
    and a write-back pass of the region. Forecasts and provisional calls are left out."""
    from toolweave.native.decode.values import KEY_TOKENS

    wants = parallel if callable(parallel) else (lambda _n: bool(parallel))
    at = {r[0]: r for r in trace.regions if len(r[2]) >= 2 and wants(len(r[2]))}
    ms, pending, i = 0.0, 0, 0
    while i < len(trace.chosen):
        region = at.get(i)
        if region is not None:
            start, end, lengths = region
            ms += costs.pass_ms(pending, 1) if pending else 0.0
            n = len(lengths)
            ms += costs.pass_ms(n * KEY_TOKENS, n)
            for t in range(1, max(lengths) + 1):
                a = sum(1 for n_tok in lengths if n_tok >= t)
                one = costs.pass_ms(a, a, sequences=True)
                ms += one if batch_pays(costs, a) else a * costs.serial_step_ms
            ms += costs.pass_ms(end - start, 1)
            pending, i = 0, end
            continue
        if trace.chosen[i] and pending:
            ms += costs.pass_ms(pending, 1)
            pending = 0
        pending += 1
        i += 1
    return ms


# ============================================================ the planner on a table
CAVEAT = (
    "SIMULATION: a random-weight model stands in for a 1B Qwen2.5-like model at Q4_K_M. "
    "Its tokens are arbitrary (nonsense values whose lengths the call grammar and "
    "max_tokens bound); only the pass costs are real measurements."
)


def decisions(costs: CostTable, value_tokens: Sequence[float]) -> dict[str, Any]:
    """What the planner decides on `costs`: parallel values for n values of each length,
    batching k sequences, and forecast draft lengths at a few acceptance rates."""
    from toolweave.drafting.ngram import draft_length
    from toolweave.native.decode.values import parallel_pays

    return {
        "parallel_values": {
            f"{v:.1f}": {str(n): parallel_pays(costs, n, v) for n in range(2, 8)}
            for v in value_tokens
        },
        "batch_pays": {str(k): batch_pays(costs, k) for k in range(2, 9)},
        "forecast_draft_length": {
            str(a): draft_length(lambda n: costs.pass_ms(n, n), a, max_len=8)
            for a in (0.5, 0.7, 0.9)
        },
    }


def _predictions(trace: CallTrace, costs: CostTable, value_tokens: float) -> dict[str, Any]:
    from toolweave.native.decode.values import parallel_pays

    def planner(n: int) -> bool:
        return parallel_pays(costs, n, value_tokens)

    jump = predict_ms(trace, costs, False)
    return {
        "jump_ms": jump,
        "fast_ms": predict_ms(trace, costs, planner),
        "fast_parallel_ms": predict_ms(trace, costs, True),
        "parallel": [planner(len(r[2])) for r in trace.regions if len(r[2]) >= 2],
    }
