"""What `toolweave.native.engine.Engine` and its mixins share: one token of a forward pass
(`BatchToken`), the engine's running totals (`EngineCounters`, which keeps at most
`MAX_PASS_SIZES` pass sizes), and `_locked`, which runs an engine method under the
engine's lock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from toolweave.native.concurrency import EngineLock

__all__ = ["MAX_PASS_SIZES", "BatchToken", "EngineCounters"]

#: Pass sizes kept in `EngineCounters.per_pass_sizes` (the oldest are dropped beyond it).
MAX_PASS_SIZES = 100_000

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Lockable(Protocol):
    """An engine, or a mixin of one: whatever holds the engine's lock."""

    lock: EngineLock


_S = TypeVar("_S", bound=_Lockable)


def _locked(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """Run under the engine's lock, so `release()` never frees the context mid-call."""

    @functools.wraps(method)
    def call(self: _S, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self.lock:
            return method(self, *args, **kwargs)

    return call


@dataclass(frozen=True)
class BatchToken:
    """One token of a forward pass: where it goes and whether its logits are wanted."""

    token: int
    pos: int
    seq_ids: tuple[int, ...]
    logits: bool = False


@dataclass
class EngineCounters:
    """Running totals since the engine was created (or `reset_counters`)."""

    forward_passes: int = 0
    tokens_processed: int = 0
    logit_rows: int = 0
    per_pass_sizes: list[int] = field(default_factory=list)

    def snapshot(self) -> EngineCounters:
        return EngineCounters(
            self.forward_passes, self.tokens_processed, self.logit_rows, list(self.per_pass_sizes)
        )

    def record(self, tokens: int, rows: int) -> None:
        """Count one forward pass of `tokens` tokens and `rows` logits rows."""
        self.forward_passes += 1
        self.tokens_processed += tokens
        self.logit_rows += rows
        sizes = self.per_pass_sizes
        sizes.append(tokens)
        if len(sizes) > MAX_PASS_SIZES:
            del sizes[: len(sizes) - MAX_PASS_SIZES]
