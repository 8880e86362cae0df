"""A cancel flag for `cancel_scope` that cancels a request at a chosen forward pass."""

from __future__ import annotations

import threading


class SetAfter(threading.Event):
    """A cancel flag that reads as set from its `n`-th check on (one check per pass)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.checks, self.n = 0, n

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks >= self.n
