"""The decoding modes: one name each, everywhere (API, command line, benchmarks).

- ``grammar``: llama-cpp-python's own grammar-constrained decoding (a baseline).
- ``constrained``: serial greedy decoding under toolweave's token constraints.
- ``jump``: ``constrained`` plus prefill of every token the grammar forces.
- ``fast``: skeleton, parallel values written back unverified, provisional calls.
- ``lossless``: like ``fast``, every draft verified; the output equals ``jump``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal, cast

from toolweave.errors import ModeError

__all__ = ["MODES", "Mode", "check_mode"]

Mode = Literal["grammar", "constrained", "jump", "fast", "lossless"]

#: Every decoding mode, in the order the benchmarks show them.
MODES: tuple[Mode, ...] = ("grammar", "constrained", "jump", "fast", "lossless")


def check_mode(mode: str, offered: Collection[str] = MODES) -> Mode:
    """`mode` as a `Mode`, or `ModeError` naming the modes `offered` here."""
    if mode not in MODES or mode not in offered:
        raise ModeError(f"unknown mode {mode!r}; choose one of {', '.join(offered)}")
    return cast(Mode, mode)
