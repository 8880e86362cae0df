"""The records of one response decode: where it starts (`ResponseStart`), what drafting
works with (`Speculation`), what the loop did (`DecodeTotals`), the bookkeeping of the
call being written (`CallState`), and the clock its events are stamped with."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from toolweave.drafting.forecast import CallForecast
from toolweave.native.calibration import CostTable
from toolweave.native.learning import EngineLearning
from toolweave.native.numerics import LogitBound
from toolweave.results import NearTie
from toolweave.toolspec import ToolSpec

__all__ = ["CallState", "DecodeTotals", "ResponseStart", "Speculation", "now_ms"]


def now_ms() -> float:
    return time.perf_counter() * 1000


@dataclass
class DecodeTotals:
    """What the loop did, for CallStats."""

    decoded: int = 0
    prefilled: int = 0
    drafted: int = 0
    accepted: int = 0
    forecast_drafted: int = 0
    forecast_accepted: int = 0
    session_drafted: int = 0
    session_accepted: int = 0
    finish_reason: str = "stop"
    fallbacks: list[str] = field(default_factory=list)
    value_lengths: list[int] = field(default_factory=list)
    phases_ms: dict[str, float] = field(default_factory=dict)
    near_ties: list[NearTie] = field(default_factory=list)

    def add_phase(self, name: str, ms: float) -> None:
        self.phases_ms[name] = self.phases_ms.get(name, 0.0) + ms


@dataclass
class CallState:
    """Per-call bookkeeping: where it starts in the text, its tool and its draft."""

    start: int
    spec: ToolSpec | None = None
    drafted: bool = False
    draft_text: str | None = None  # the whole call text as drafted (lossless)
    failed_at: set[int] = field(default_factory=set)
    required_done: bool = False


def _batch_pays(k: int) -> bool:
    return k > 1


def _parallel_pays(spec: ToolSpec, n: int) -> bool:
    return n > 1


@dataclass(frozen=True)
class ResponseStart:
    """Where a response begins: sequence `seq` holds the `prompt_len`-token prompt and
    `logits` predict the first token; `request_text` is the user's words (forecasts
    copy values from them) and `session_texts` the session's earlier messages, oldest
    first (session drafts copy from them)."""

    seq: int
    prompt_len: int
    logits: NDArray[np.float32]
    request_text: str = ""
    session_texts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Speculation:
    """What drafting works with (`constrained` and `jump` use none of it).

    `value_grammar(spec, key, suffixes)` is the grammar of one drafted value; values are
    drafted in `branch_seqs`, `batch_pays(k)` says whether one k-token pass beats k serial
    ones and `parallel_pays(spec, n)` whether drafting n values pays. Forecasts need the
    `forecast` ranking and the engine's `costs`; their acceptance is kept in `learning`.
    `bound` is the engine's logit bound: a verified choice is taken from a batched row only
    where that row decides it.
    """

    costs: CostTable | None = None
    value_grammar: Callable[[ToolSpec, str, Sequence[str]], str] | None = None
    branch_seqs: tuple[int, ...] = ()
    batch_pays: Callable[[int], bool] = _batch_pays
    parallel_pays: Callable[[ToolSpec, int], bool] = _parallel_pays
    forecast: CallForecast | None = None
    learning: EngineLearning = field(default_factory=EngineLearning)
    bound: LogitBound | None = None
