"""Copying states between engine sequences and a store's `StateStorage`.

`StateTransfer` identifies an engine's model (the states it takes), saves a sequence's
state as a new entry, restores a saved one into a sequence, and puts the starting state a
request chose in its sequence (falling back to a cold start when that state proves
unusable); it times each copy for the store's `CostEstimator` unless `learn_costs` is
False.
"""

from __future__ import annotations

import os
import time

import llama_cpp
import numpy as np

from toolweave.checkpoints import CostEstimator, RestoreOption
from toolweave.errors import EngineError
from toolweave.native.engine import Engine
from toolweave.native.states.records import StoredState
from toolweave.native.states.state_file import model_fingerprint, state_key
from toolweave.native.states.storage import StateStorage

__all__ = ["StateTransfer"]


class StateTransfer:
    """Saves and restores the states of a `StateStorage` (callers hold the store's lock)."""

    def __init__(
        self, storage: StateStorage, estimator: CostEstimator, *, learn_costs: bool
    ) -> None:
        self._storage = storage
        self._estimator = estimator
        self.learn_costs = learn_costs
        self._models: dict[str, tuple[str, bool]] = {}

    def model(self, engine: Engine) -> tuple[str, bool]:
        """`engine`'s model fingerprint (which states it takes) and whether its states
        may be truncated (attention-only models; not recurrent or hybrid ones)."""
        key = os.fspath(engine.model_path)
        found = self._models.get(key)
        if found is None:
            model = engine.model
            recurrent = llama_cpp.llama_model_is_recurrent(
                model
            ) or llama_cpp.llama_model_is_hybrid(model)
            found = (model_fingerprint(engine.model_path), not recurrent)
            self._models[key] = found
        return found

    def save(
        self,
        engine: Engine,
        seq: int,
        tokens: list[int],
        model: str,
        session: str,
        into: bytearray | None = None,
    ) -> float:
        """Save the state of `tokens` in `seq` (into `into`, when given) unless it is
        saved already; returns the ms it took."""
        t0 = time.perf_counter()
        key = state_key(model, tokens)
        entries = self._storage.entries
        if key in entries:
            entries[key].last_used = time.time()
            return 0.0
        data = engine.state_get(seq, into)
        if self.learn_costs:
            self._estimator.observe_save(len(tokens), (time.perf_counter() - t0) * 1000)
        entry = StoredState(
            key=key,
            model_id=model,
            tokens=np.asarray(tokens, dtype=np.int32),
            session=session,
            n_bytes=len(data),
            last_used=time.time(),
            data=data,
        )
        self._storage.add(entry, data)
        return (time.perf_counter() - t0) * 1000

    def restore(self, engine: Engine, seq: int, entry: StoredState) -> None:
        """Put the saved state `entry` in `seq`."""
        t0 = time.perf_counter()
        from_disk = entry.data is None
        self._storage.load(engine, seq, entry)
        engine.seq_tokens[seq] = [int(t) for t in entry.tokens]
        if self.learn_costs:
            ms = (time.perf_counter() - t0) * 1000
            self._estimator.observe_restore(len(entry.tokens), ms, from_disk=from_disk)
        entry.last_used = time.time()
        self._storage.touch(entry)

    def start(
        self, engine: Engine, seq: int, prompt: list[int], choice: RestoreOption
    ) -> tuple[int, str, float]:
        """Put the chosen starting state in `seq`; returns (tokens reused, source, ms)."""
        t0 = time.perf_counter()
        entry = self._storage.entries.get(choice.key) if choice.key is not None else None
        source = "live"
        if entry is not None:
            source = "memory" if entry.data is not None else "disk"
            try:
                self.restore(engine, seq, entry)
            except (EngineError, OSError, ValueError) as exc:
                # A missing or damaged file is forgotten; a refusal by the engine (a full
                # context, say) may not last, so that state is kept. Either way: start cold.
                if not isinstance(exc, EngineError):
                    self._storage.forget_unreadable(entry, exc)
                engine.seq_remove(seq)
                engine.seq_tokens[seq] = []
                return 0, "none", (time.perf_counter() - t0) * 1000
        reuse = choice.reuse
        engine.seq_remove(seq, reuse)
        engine.seq_tokens[seq] = prompt[:reuse]
        if reuse == 0:
            source = "none"
        return reuse, source, (time.perf_counter() - t0) * 1000
