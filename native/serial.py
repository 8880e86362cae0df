"""Serial greedy decoding under a token constraint: the `constrained` and `jump` baselines.

`constrained` decodes every token, one forward pass each. `jump` prefills the tokens the
grammar forces (jump-forward) in one pass and decodes only where the model has a choice.
Both are generators of `Emitted` steps so callers can time and display each one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from toolweave.native.constraints import TokenMatcher
from toolweave.native.engine import BatchToken, Engine

__all__ = ["Emitted", "serial_decode"]


@dataclass(frozen=True)
class Emitted:
    """Tokens appended to the response in one step; `decoded` is False when prefilled."""

    tokens: tuple[int, ...]
    decoded: bool


@dataclass
class SerialEnd:
    """How a serial decode ended: 'stop' (grammar complete or EOS) or 'length'."""

    reason: str = "stop"


def serial_decode(
    engine: Engine,
    matcher: TokenMatcher,
    logits: NDArray[np.float32],
    *,
    seq: int,
    pos: int,
    jump: bool,
    max_tokens: int,
    end: SerialEnd | None = None,
) -> Iterator[Emitted]:
    """Decode greedily from `logits` (those of position `pos - 1` of `seq`).

    Stops when the grammar is complete, the model picks end-of-generation where the
    grammar allows it, or `max_tokens` tokens were written (`end.reason = "length"`).
    """
    end = end if end is not None else SerialEnd()
    written = 0
    while not matcher.stopped:
        if written >= max_tokens:
            end.reason = "length"
            return
        if jump:
            forced = matcher.forced()[: max_tokens - written]
            if forced:
                matcher.consume_many(forced)
                yield Emitted(tuple(forced), False)
                written += len(forced)
                if matcher.stopped:
                    return
                rows = engine.forward(
                    [
                        BatchToken(t, pos + k, (seq,), k == len(forced) - 1)
                        for k, t in enumerate(forced)
                    ]
                )
                logits = rows[0]
                pos += len(forced)
                continue
        token = matcher.best(logits)
        if engine.is_eog(token):
            return
        matcher.consume(token)
        yield Emitted((token,), True)
        written += 1
        if matcher.stopped:
            return
        logits = engine.forward([BatchToken(token, pos, (seq,), True)])[0]
        pos += 1
