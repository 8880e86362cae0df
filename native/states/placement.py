"""Where a `StateStore` starts a prompt and where it saves states: pure functions over the
saved states that could serve it (`toolweave.checkpoints` holds the policy they apply)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from toolweave.checkpoints import (
    CheckpointPolicy,
    RestoreOption,
    StoreCosts,
    common_prefix,
    plan_passes,
)
from toolweave.native.states.records import StoredState

__all__ = ["checkpoint_cut", "restore_options", "worth_saving"]


def restore_options(
    states: Iterable[StoredState],
    arr: NDArray[np.int32],
    live_lcp: int,
    truncatable: bool,
    costs: StoreCosts,
) -> tuple[list[RestoreOption], int]:
    """The ways to start `arr` (the live sequence first) and the tokens states cover."""
    n = len(arr)
    options = [RestoreOption(None, min(live_lcp, n - 1))]
    covered = 0
    for e in states:
        lcp = common_prefix(e.tokens, arr)
        usable = lcp if truncatable or lcp == len(e.tokens) else 0
        usable = min(usable, n - 1)
        covered = max(covered, usable)
        if usable > live_lcp:
            ms = costs.restore_ms(len(e.tokens), from_disk=e.data is None)
            options.append(RestoreOption(e.key, usable, ms))
    return options, covered


def checkpoint_cut(
    policy: CheckpointPolicy,
    n_batch: int,
    start: int,
    n: int,
    divergence: int,
    covered: int,
    costs: StoreCosts,
    *,
    last_alone: bool,
) -> int | None:
    """Where to save a state while prefilling tokens `start` to `n`: at the divergence
    point when the policy says it repays its cost and its extra pass, else nowhere."""
    if divergence < start:
        return None
    extra = len(plan_passes(start, n, n_batch, cut=divergence, last_alone=last_alone))
    extra -= len(plan_passes(start, n, n_batch, last_alone=last_alone))
    ok = policy.should_checkpoint(
        divergence=divergence, covered=covered, prompt_len=n, costs=costs, extra_passes=extra
    )
    return divergence if ok else None


def worth_saving(
    policy: CheckpointPolicy,
    states: Iterable[StoredState],
    tokens: Sequence[int],
    costs: StoreCosts,
) -> bool:
    """Whether a state of all of `tokens` repays its save, given what saved `states`
    already cover of them."""
    arr = np.asarray(tokens, dtype=np.int32)
    covered = max((common_prefix(e.tokens, arr) for e in states), default=0)
    n = len(tokens)
    return policy.should_checkpoint(divergence=n, covered=covered, prompt_len=n, costs=costs)
