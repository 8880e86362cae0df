"""What the state store reports and keeps: its checkpoints as users see them, the record
of one prefill, a saved state's entry, and the policy costs read off an engine's measured
cost table (`toolweave.native.states.store` uses them all)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from toolweave.checkpoints import CheckpointInfo, StoreCosts
from toolweave.native.calibration import CostTable

__all__ = ["Checkpoint", "PrefillRecord", "StoredState", "store_costs"]


def store_costs(table: CostTable) -> StoreCosts:
    """Checkpoint policy costs from a measured engine cost table.

    Saving costs the `state_get` copy only (files are written off the request path).
    """
    per = 1.0 / max(1, table.state_tokens)
    return StoreCosts(
        prefill_ms_per_token=table.prefill_ms_per_token,
        pass_ms=max(0.0, table.serial_step_ms - table.prefill_ms_per_token),
        save_ms_per_token=table.state_get_ms * per,
        restore_ms_per_token=table.state_set_ms * per,
        load_ms_per_token=table.state_load_ms * per,
    )


@dataclass(frozen=True)
class Checkpoint:
    """A saved state as the store reports it."""

    key: str
    session: str
    n_tokens: int
    n_bytes: int
    in_memory: bool
    on_disk: bool


@dataclass(frozen=True)
class PrefillRecord:
    """What one `StateStore.prefill` did.

    ``source``: ``"live"`` (the sequence's own cache), ``"memory"`` or ``"disk"`` (a saved
    state), ``"none"`` (nothing reused). ``divergence`` is L, ``covered`` R (tokens saved
    states covered before this request), ``saved_at`` where a new state was saved;
    ``handover_ms`` the time spent saving the previous session's state first (see
    `StateStore`); ``prompt_ms`` the whole call: restoring, saving and every prefill
    pass, the last one included (with consolidated passes it may carry the whole tail).
    """

    prompt_tokens: int
    reused: int
    prefilled: int
    passes: int
    source: str
    divergence: int
    covered: int
    saved_at: int | None
    restore_ms: float
    save_ms: float
    handover_ms: float
    prompt_ms: float


@dataclass
class StoredState:
    """A saved state: its tokens and owner, its bytes in memory and/or its file."""

    key: str
    model_id: str
    tokens: NDArray[np.int32]
    session: str
    n_bytes: int
    last_used: float
    data: bytes | bytearray | None = None
    path: Path | None = None
    file_bytes: int = 0
    pending: Future[None] | None = field(default=None, repr=False)

    def public(self) -> Checkpoint:
        on_disk = self.path is not None
        return Checkpoint(
            self.key, self.session, len(self.tokens), self.n_bytes, bool(self.data), on_disk
        )

    def info(self) -> CheckpointInfo:
        return CheckpointInfo(
            self.key, self.session, len(self.tokens), self.n_bytes, self.last_used
        )
