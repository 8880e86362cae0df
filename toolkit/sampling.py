"""Sampling settings: temperature, top-k, top-p and a seed (greedy by default).

`Sampling()` is greedy decoding (temperature 0), which runs exactly the greedy code
paths. With a temperature above 0 every token the model chooses is drawn from its
distribution after the grammar mask, then top-k, then top-p (nucleus), then the
temperature (`toolweave.native.sampling` applies them in that order), from a
`numpy.random.Generator` seeded with `seed`: the same seed gives the same output on the
same engine. See ``docs/sampling.md`` for what is exact in each mode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Sampling"]


@dataclass(frozen=True)
class Sampling:
    """How tokens are chosen: ``temperature`` >= 0 (0: greedy), ``top_p`` in (0, 1],
    ``top_k`` >= 0 (0: off), ``seed`` an int or None (None: fresh entropy each call)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self) -> None:
        t, p, k, s = self.temperature, self.top_p, self.top_k, self.seed
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {t!r}")
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            raise ValueError(f"top_p must be a number in (0, 1], got {p!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (0: off), got {k!r}")
        if s is not None and (isinstance(s, bool) or not isinstance(s, int)):
            raise ValueError(f"seed must be an integer or None, got {s!r}")
        object.__setattr__(self, "temperature", float(t))
        object.__setattr__(self, "top_p", float(p))

    @property
    def greedy(self) -> bool:
        """Temperature 0: the argmax, whatever top-k, top-p and the seed say."""
        return self.temperature == 0

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Sampling:
        """The settings named in `options` (``temperature``, ``top_p``, ``top_k``,
        ``seed``; a missing or None one keeps its default)."""
        known = ("temperature", "top_p", "top_k", "seed")
        return cls(**{k: options[k] for k in known if options.get(k) is not None})

    def replace(self, **changes: Any) -> Sampling:
        """These settings with `changes` (None values are ignored)."""
        current: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
        }
        current.update({k: v for k, v in changes.items() if v is not None})
        return Sampling(**current)
