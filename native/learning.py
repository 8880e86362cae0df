"""What decoding learns on an engine, per kind of output: one store per engine.

A kind is ExSpec's `learn=` name ("planner", "arbiter", a grammar) or "forecast:<source>"
for the fast path's forecasts. For each the store keeps the overall draft acceptance, the
acceptance per draft context and the measured pass times. The model decides how
predictable its output is, so every decoder on the engine reads and updates the same
record; the measured cost table itself lives in `toolweave.native.calibration`.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field

from toolweave.drafting.ngram import AcceptanceRate, ContextRates
from toolweave.native.engine import Engine

__all__ = [
    "EngineLearning",
    "Learned",
    "PassTimes",
    "engine_learning",
    "forget_acceptance",
    "learned",
    "set_learned",
]


class PassTimes:
    """Pass times measured while decoding one kind of output: a running mean per pass
    size, a plain step being size 1.

    The cost table is measured on a short prompt without a grammar; a real output pays
    attention over its whole prompt and the grammar's work on every verified row.
    `ms(n, table)` is the measured time when there is one, else the table's scaled by how
    far the measured plain step is from the table's.
    """

    def __init__(self, weight: float = 0.3) -> None:
        if not 0 < weight <= 1:
            raise ValueError("weight must be in (0, 1]")
        self.weight = weight
        self.mean: dict[int, float] = {}

    def observe(self, n: int, ms: float) -> None:
        old = self.mean.get(n)
        self.mean[n] = ms if old is None else old + self.weight * (ms - old)

    def ms(self, n: int, table: Mapping[int, float]) -> float:
        if n in self.mean:
            return self.mean[n]
        scale = self.mean[1] / table[1] if 1 in self.mean and table[1] > 0 else 1.0
        return table[n] * scale


@dataclass
class Learned:
    """What decoding has learned about one kind of output: the overall acceptance (None
    before the first draft), the acceptance per draft context and the pass times."""

    rate: AcceptanceRate | None = None
    contexts: ContextRates = field(default_factory=ContextRates)
    times: PassTimes = field(default_factory=PassTimes)


class EngineLearning:
    """One engine's learned records, one per kind of output."""

    def __init__(self) -> None:
        self._kinds: dict[str, Learned] = {}

    def of(self, kind: str) -> Learned:
        """The live record of `kind` (created empty on first use); decoders update it."""
        return self._kinds.setdefault(kind, Learned())

    def put(self, kind: str, record: Learned) -> None:
        self._kinds[kind] = record

    def clear(self) -> None:
        self._kinds.clear()


_ENGINE_LEARNING: weakref.WeakKeyDictionary[Engine, EngineLearning] = weakref.WeakKeyDictionary()


def engine_learning(engine: Engine) -> EngineLearning:
    """The learned store of `engine`, shared by every decoder on it."""
    return _ENGINE_LEARNING.setdefault(engine, EngineLearning())


def learned(engine: Engine, kind: str) -> Learned:
    """A copy of what was learned on `engine` for `kind` (to start a measurement again)."""
    return copy.deepcopy(engine_learning(engine).of(kind))


def set_learned(engine: Engine, kind: str, state: Learned) -> None:
    """Put back what `learned` copied (e.g. to repeat a measurement from the same start)."""
    engine_learning(engine).put(kind, copy.deepcopy(state))


def forget_acceptance(engine: Engine) -> None:
    """Start this engine's learned acceptance estimates (overall and per draft context)
    and pass times afresh (e.g. after the prompts or the examples changed)."""
    engine_learning(engine).clear()
