"""Divergence-point state checkpoints across requests, sessions and restarts.

`StateStore.prefill(engine, seq, prompt)` is a drop-in for
`toolweave.native.states.prefill.prefill_prompt`: it leaves exactly `prompt` in `seq` and
returns the logits of its last token, but it also remembers the states of earlier
prompts. For each request it

1. finds the divergence point L: the longest common prefix of the prompt with the
   previous prompt of the same session (an agent rebuilds its request each step; for a
   session's first prompt on an attention-only model, the whole prompt);
2. starts from whichever costs least: the live sequence truncated to its common prefix,
   or a saved state (in memory or on disk) covering R tokens of the prompt;
3. prefills the rest in consolidated passes (`plan_passes`), and on the way saves the
   state at L when `CheckpointPolicy.should_checkpoint` says the advance repays its cost.

States are KV snapshots of one sequence (`Engine.state_get`). For attention-only models a
snapshot truncated to any shorter prefix is exact, so a state serves every prompt it
shares a prefix with; for recurrent and hybrid models only prompts it is a prefix of.

With a `directory`, every state is also kept as a file, which a store opened later over
the same directory reuses (`toolweave.native.states.storage`). Call `close()` (or use the
store as a context manager) to finish pending writes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import numpy as np
from numpy.typing import NDArray

from toolweave.checkpoints import (
    CheckpointPolicy,
    CostEstimator,
    StoreCosts,
    choose_restore,
    common_prefix,
    plan_passes,
)
from toolweave.errors import ContextFullError, EngineError
from toolweave.native.calibration import CostTable
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states.deferred import DeferredSaves
from toolweave.native.states.placement import checkpoint_cut, restore_options, worth_saving
from toolweave.native.states.prefill import PromptPrefill
from toolweave.native.states.records import Checkpoint, PrefillRecord, store_costs
from toolweave.native.states.sessions import SessionPrompts, hands_over
from toolweave.native.states.state_file import state_key
from toolweave.native.states.storage import StateStorage
from toolweave.native.states.transfer import StateTransfer

__all__ = ["Checkpoint", "PrefillRecord", "StateStore", "store_costs"]

_RESTORE_TRIES = 3  # saved states tried per request when the chosen one proves unusable


class StateStore:
    """Saved KV states shared by every session on one or more engines (see module doc).

    `policy` places and evicts states. It reasons with `costs` (a `StoreCosts`, or a
    measured `CostTable`; defaults otherwise), refined from the store's own pass and state
    timings unless `learn_costs` is False.
    `max_memory_bytes` bounds the states kept in memory; beyond it only their files stay
    (without a directory the states themselves are evicted). `consolidate=False` runs the
    last prompt token in a pass of its own, as `prefill_prompt` does, for engines whose
    batch numerics differ from single-token ones. `history` recent prompts are kept to
    place the first checkpoint of a session on recurrent models. `disk_limit` (bytes or a
    size such as ``"2GiB"``; default ``$TOOLWEAVE_CACHE_LIMIT``, else
    `toolweave.disk_cache.DEFAULT_CACHE_LIMIT`; ``"none"``: no limit) bounds the files
    of the directory and of the state directories sharing its limit
    (`toolweave.disk_cache.limit_scope`). Thread-safe.

    When a request finds its sequence holding another session's prompt, that prompt's
    state is saved before being overwritten unless saved states already cover it (the
    policy's threshold decides): it is what the other session's next request will share
    most of. This is the earlier request's save, made only when its slot changes hands;
    each request itself saves at most one state, at its divergence point.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        policy: CheckpointPolicy | None = None,
        costs: StoreCosts | CostTable | None = None,
        learn_costs: bool = True,
        max_memory_bytes: int = 512 << 20,
        consolidate: bool = True,
        history: int = 64,
        disk_limit: int | str | None = None,
    ) -> None:
        self.policy = policy or CheckpointPolicy()
        prior = store_costs(costs) if isinstance(costs, CostTable) else costs
        self._estimator = CostEstimator(prior)
        self.max_memory_bytes = max_memory_bytes
        self.consolidate = consolidate
        self._lock = threading.RLock()
        self._prompts = SessionPrompts(history)
        self._deferred = DeferredSaves(self._lock)
        self.last: PrefillRecord | None = None
        self._storage = StateStorage(directory, disk_limit, self._lock)
        self._entries = self._storage.entries  # the same dict, never replaced
        self._transfer = StateTransfer(self._storage, self._estimator, learn_costs=learn_costs)

    @property
    def learn_costs(self) -> bool:
        """Whether the store refines its costs from its own pass and state timings."""
        return self._transfer.learn_costs

    @learn_costs.setter
    def learn_costs(self, value: bool) -> None:
        self._transfer.learn_costs = value

    @property
    def directory(self) -> Path | None:
        """Where the states' files are kept (None: memory only)."""
        return self._storage.directory

    @property
    def disk_limit(self) -> int | None:
        """The bytes the files of the limit's directories may take (None: no limit)."""
        return self._storage.disk_limit

    @disk_limit.setter
    def disk_limit(self, value: int | None) -> None:
        self._storage.disk_limit = value

    @property
    def write_errors(self) -> list[str]:
        """The file writes that failed, one line each."""
        return self._storage.write_errors

    # ------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        """Wait until every deferred save, file write and delete has finished."""
        self._storage.flush()

    def close(self) -> None:
        """Finish pending writes and stop the writer thread (the store stays usable)."""
        self._storage.close()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ queries
    def checkpoints(self, engine: Engine | None = None) -> list[Checkpoint]:
        """The saved states (of `engine`'s model only, when given), oldest use first."""
        with self._lock:
            model = None if engine is None else self._transfer.model(engine)[0]
            entries = sorted(self._entries.values(), key=lambda e: e.last_used)
            return [e.public() for e in entries if model is None or e.model_id == model]

    def memory_bytes(self) -> int:
        return self._storage.memory_bytes()

    def disk_bytes(self) -> int:
        return self._storage.disk_bytes()

    def costs(self) -> StoreCosts:
        """The costs the policy currently reasons with."""
        with self._lock:
            return self._estimator.costs()

    # ------------------------------------------------------------------ prefill
    def prefill(
        self,
        engine: Engine,
        seq: int,
        prompt: Sequence[int],
        max_tokens: int = 0,
        *,
        session: str | None = None,
    ) -> PromptPrefill:
        """Leave exactly `prompt` in `seq` and return the logits of its last token.

        Same contract as `prefill_prompt` (raises `ContextFullError` when the prompt plus
        `max_tokens` cannot fit); `session` names the agent whose state budget a new
        checkpoint counts against (default: one session per sequence).
        """
        if not prompt:
            raise ContextFullError("empty prompt")
        if len(prompt) + max_tokens > engine.n_ctx:
            raise ContextFullError(
                f"prompt of {len(prompt)} tokens plus {max_tokens} output tokens exceeds "
                f"the context window of {engine.n_ctx}"
            )
        engine.seq_len(seq)  # raises SequenceError for an unknown sequence id
        session = session or f"seq{seq}"
        with engine.lock, self._lock:
            return self._prefill(engine, seq, list(prompt), session)

    def _prefill(self, engine: Engine, seq: int, prompt: list[int], session: str) -> PromptPrefill:
        costs = self._estimator.costs()
        t_start = time.perf_counter()
        n = len(prompt)
        arr = np.asarray(prompt, dtype=np.int32)
        model, truncatable = self._transfer.model(engine)
        live = engine.seq_tokens.get(seq, [])
        live_lcp = common_prefix(live, arr)
        handover_ms = 0.0
        owner = self._prompts.owner(engine, seq)
        if truncatable and owner is not None and hands_over(owner, session, live_lcp):
            handover_ms = self._hand_over(engine, seq, live, model, owner[0], costs)
        if not truncatable and (live_lcp < len(live) or engine.seq_len(seq) != len(live)):
            live_lcp = 0  # a recurrent state cannot be rolled back
        divergence = self._prompts.divergence(session, arr, truncatable)
        restore_ms = 0.0
        for _ in range(_RESTORE_TRIES):
            states = self._storage.usable(model, engine.n_ctx)
            options, covered = restore_options(states, arr, live_lcp, truncatable, costs)
            choice = choose_restore(options, costs)
            count = len(self._entries)
            start, source, ms = self._transfer.start(engine, seq, prompt, choice)
            restore_ms += ms
            if source != "none" or choice.key is None or len(self._entries) == count:
                break  # restored, or nothing was dropped: no better option appeared
            # The chosen file was unusable and is forgotten: choose again without it.
            live_lcp = 0
        last_alone = not self.consolidate
        cut = checkpoint_cut(
            self.policy, engine.n_batch, start, n, divergence, covered, costs, last_alone=last_alone
        )
        save_ms = 0.0
        if cut == start and cut is not None:
            save_ms = self._transfer.save(engine, seq, prompt[:cut], model, session)
        passes = plan_passes(start, n, engine.n_batch, cut=cut, last_alone=last_alone)
        t0 = time.perf_counter()
        logits: NDArray[np.float32] | None = None
        for lo, hi in passes:
            t0 = time.perf_counter()
            items = [BatchToken(prompt[p], p, (seq,), p == n - 1) for p in range(lo, hi)]
            rows = engine.forward(items)
            if self.learn_costs:
                self._estimator.observe_pass(hi - lo, (time.perf_counter() - t0) * 1000)
            engine.seq_tokens[seq] = prompt[:hi]
            if hi == cut:
                save_ms = self._transfer.save(engine, seq, prompt[:cut], model, session)
            if len(rows):
                logits = rows[0]
        if logits is None:  # unreachable: the last token is always prefilled
            raise EngineError("the prompt's last token was not prefilled")
        t_end = time.perf_counter()
        self._prompts.record(engine, seq, session, arr)
        self._enforce_bounds(model, costs)
        prompt_ms = (t0 - t_start) * 1000  # before the last pass, which every mode pays
        self.last = PrefillRecord(
            prompt_tokens=n,
            reused=start,
            prefilled=n - start,
            passes=len(passes),
            source=source,
            divergence=divergence,
            covered=covered,
            saved_at=cut,
            restore_ms=restore_ms,
            save_ms=save_ms,
            handover_ms=handover_ms,
            prompt_ms=(t_end - t_start) * 1000,
        )
        return PromptPrefill(logits=logits, t0=t0, prompt_ms=prompt_ms, reused=start)

    def _hand_over(
        self,
        engine: Engine,
        seq: int,
        live: Sequence[int],
        model: str,
        owner: str,
        costs: StoreCosts,
    ) -> float:
        """Save the state a request left in `seq` (its prompt and any output decoded
        after it) before this request, which cuts into that prompt, overwrites it.

        What a session sent last is what its next request shares most of (up to its next
        divergence point, not yet known), so a slot changing hands keeps the outgoing
        state when saved states do not already cover it (llama-server's prompt cache
        does the same on slot reuse). The same holds within one session whose requests
        alternate between two prompts (an agent's tool prompt and its answer prompt):
        each comes back extended (`hands_over`). This is the outgoing request's save,
        made late.
        """
        if not self._worth_saving(engine, model, live, costs):
            return 0.0
        if engine.seq_len(seq) != len(live):
            engine.seq_remove(seq, len(live))  # drop decoded output beyond the prompt
        return self._transfer.save(engine, seq, list(live), model, owner)

    def _worth_saving(
        self, engine: Engine, model: str, tokens: Sequence[int], costs: StoreCosts
    ) -> bool:
        states = self._storage.usable(model, engine.n_ctx)
        return worth_saving(self.policy, states, tokens, costs)

    # ------------------------------------------------------------------ saving
    def save(self, engine: Engine, seq: int, *, session: str | None = None) -> Checkpoint | None:
        """Save what `seq` holds now as a state (before an idle release, for instance).

        Only the tokens the engine knows to be in `seq` are kept (decoded output beyond
        them is dropped first on attention-only models). Returns None when the sequence
        is empty, already saved, or cannot be aligned with its tokens.
        """
        with engine.lock, self._lock:
            model, truncatable = self._transfer.model(engine)
            tokens = list(engine.seq_tokens.get(seq, []))
            if not tokens:
                return None
            if engine.seq_len(seq) != len(tokens):
                if not truncatable:
                    return None
                engine.seq_remove(seq, len(tokens))
            key = state_key(model, tokens)
            if key not in self._entries:
                owner = self._prompts.owner(engine, seq)
                session = session or (owner[0] if owner else f"seq{seq}")
                self._transfer.save(engine, seq, tokens, model, session)
                self._enforce_bounds(model, self._estimator.costs())
            entry = self._entries.get(key)
            return None if entry is None else entry.public()

    def save_later(self, engine: Engine, seq: int) -> None:
        """Save what `seq` holds once the request using it has let the engine go.

        A chat model calls this after each request: its prompt and the response kept
        after it are what the session's next prompt extends, which the divergence
        checkpoint no longer catches (the live sequence already reaches past it). The
        writer thread waits until the engine has been quiet for `_LATER_QUIET_S` (an
        agent's next request usually follows at once: the save is then left to the
        newer request's, so a burst costs one save), makes the buffer's pages off the
        engine lock, then copies the state under it (a few ms). A state that saved ones
        already cover, a busy engine (longer than `_LATER_WAIT_S`) or a closed one is
        skipped (see `toolweave.native.states.deferred`). `flush()` waits for it."""
        ticket = self._deferred.issue(engine, seq)
        self._storage.submit(self._deferred.run, engine, seq, ticket, self._save_quiet)

    def _save_quiet(self, engine: Engine, seq: int, buf: bytearray) -> None:
        """The deferred save itself, into `buf`, under the engine lock of a quiet engine."""
        with self._lock:
            model, truncatable = self._transfer.model(engine)
            tokens = list(engine.seq_tokens.get(seq, []))
            if engine.released or not tokens or not truncatable:
                return
            if engine.seq_len(seq) != len(tokens):
                return
            costs = self._estimator.costs()
            if not self._worth_saving(engine, model, tokens, costs):
                return
            owner = self._prompts.owner(engine, seq)
            session = owner[0] if owner else f"seq{seq}"
            self._transfer.save(engine, seq, tokens, model, session, into=buf)
            self._enforce_bounds(model, costs)

    def discard(self, key: str) -> bool:
        """Forget the saved state `key` and delete its file; False if unknown."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False
            self._storage.drop(entry)
            return True

    # ------------------------------------------------------------------ memory and eviction
    def release_memory(self) -> int:
        """Drop the in-memory copies of states that are safely on disk; returns bytes freed."""
        return self._storage.release_memory()

    def _enforce_bounds(self, model: str, costs: StoreCosts) -> None:
        self._storage.enforce_bounds(model, self.policy, costs, self.max_memory_bytes)
