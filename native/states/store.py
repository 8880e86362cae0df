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

With a `directory`, every state is also written there (one file per state, holding its
tokens and the model fingerprint, so no other model loads it) by a background thread,
and a store opened later over the same directory - a restarted process - reuses them.
Call `close()` (or use the store as a context manager) to finish pending writes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

import llama_cpp
import numpy as np
from numpy.typing import NDArray

from toolweave.checkpoints import (
    CheckpointPolicy,
    CostEstimator,
    RestoreOption,
    StoreCosts,
    choose_restore,
    common_prefix,
    plan_passes,
)
from toolweave.disk_cache import enforce_cache_limit, limit_scope, resolve_cache_limit
from toolweave.errors import ContextFullError, EngineError
from toolweave.native.calibration import CostTable
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states.prefill import PromptPrefill
from toolweave.native.states.records import Checkpoint, PrefillRecord, StoredState, store_costs
from toolweave.native.states.state_file import (
    SUFFIX,
    StateFileError,
    StateHeader,
    checked_headers,
    mapped_state,
    model_fingerprint,
    one_line,
    state_key,
    touch,
    unlink,
    write_state_file,
)

__all__ = ["Checkpoint", "PrefillRecord", "StateStore", "store_costs"]

log = logging.getLogger("toolweave.states")

_SESSIONS_KEPT = 1024  # sessions whose last prompt is remembered (for their divergence point)
_RESTORE_TRIES = 3  # saved states tried per request when the chosen one proves unusable
_LATER_WAIT_S = 2.0  # how long a deferred save waits for a quiet engine before giving up
_LATER_QUIET_S = 0.2  # the quiet spell (no forward pass) a deferred save waits for


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
        self.learn_costs = learn_costs
        self.max_memory_bytes = max_memory_bytes
        self.consolidate = consolidate
        self.directory = None if directory is None else Path(directory).expanduser().resolve()
        self.disk_limit = resolve_cache_limit(disk_limit)
        self._scope = [] if self.directory is None else limit_scope(self.directory)
        self._lock = threading.RLock()
        self._entries: dict[str, StoredState] = {}
        self._history: deque[NDArray[np.int32]] = deque(maxlen=history)
        self._sessions: OrderedDict[str, NDArray[np.int32]] = OrderedDict()
        #: (engine, sequence) -> the session whose prompt the store left there, and it.
        self._owners: dict[tuple[int, int], tuple[str, NDArray[np.int32]]] = {}
        self._later: dict[tuple[int, int], int] = {}  # the newest deferred save per sequence
        self._models: dict[str, tuple[str, bool]] = {}
        self._writer: ThreadPoolExecutor | None = None
        self.write_errors: list[str] = []
        self.last: PrefillRecord | None = None
        if self.directory is not None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                log.warning("cannot keep states in %s (%s): memory only", self.directory, exc)
                self.directory, self._scope = None, []
            self._scan()

    # ------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        """Wait until every deferred save, file write and delete has finished."""
        self._barrier()  # deferred saves queue their file writes as they run
        with self._lock:
            pending = [e.pending for e in self._entries.values() if e.pending is not None]
        for fut in pending:
            fut.result()
        self._barrier()  # and writes may queue deletes

    def _barrier(self) -> None:
        """Wait for what the writer thread has queued so far."""
        with self._lock:
            writer = self._writer
        if writer is not None:
            # Shut down at interpreter exit (before atexit callbacks): its queue already ran.
            with contextlib.suppress(RuntimeError):
                writer.submit(lambda: None).result()

    def close(self) -> None:
        """Finish pending writes and stop the writer thread (the store stays usable)."""
        self.flush()
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.shutdown(wait=True)

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
            model = None if engine is None else self._model(engine)[0]
            entries = sorted(self._entries.values(), key=lambda e: e.last_used)
            return [e.public() for e in entries if model is None or e.model_id == model]

    def memory_bytes(self) -> int:
        with self._lock:
            return sum(len(e.data) for e in self._entries.values() if e.data is not None)

    def disk_bytes(self) -> int:
        with self._lock:
            return sum(e.file_bytes for e in self._entries.values() if e.path is not None)

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
        model, truncatable = self._model(engine)
        live = engine.seq_tokens.get(seq, [])
        live_lcp = common_prefix(live, arr)
        handover_ms = 0.0
        owner = self._owner(engine, seq)
        if truncatable and owner is not None and _hands_over(owner, session, live_lcp):
            handover_ms = self._hand_over(engine, seq, live, model, owner[0], costs)
        if not truncatable and (live_lcp < len(live) or engine.seq_len(seq) != len(live)):
            live_lcp = 0  # a recurrent state cannot be rolled back
        divergence = self._divergence(session, arr, truncatable)
        restore_ms = 0.0
        for _ in range(_RESTORE_TRIES):
            options, covered = self._options(engine, model, arr, live_lcp, truncatable, costs)
            choice = choose_restore(options, costs)
            count = len(self._entries)
            start, source, ms = self._start(engine, seq, prompt, choice)
            restore_ms += ms
            if source != "none" or choice.key is None or len(self._entries) == count:
                break  # restored, or nothing was dropped: no better option appeared
            # The chosen file was unusable and is forgotten: choose again without it.
            live_lcp = 0
        cut = self._cut(engine, start, n, divergence, covered, costs)
        save_ms = 0.0
        if cut == start and cut is not None:
            save_ms = self._save(engine, seq, prompt[:cut], model, session)
        passes = plan_passes(start, n, engine.n_batch, cut=cut, last_alone=not self.consolidate)
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
                save_ms = self._save(engine, seq, prompt[:cut], model, session)
            if len(rows):
                logits = rows[0]
        if logits is None:  # unreachable: the last token is always prefilled
            raise EngineError("the prompt's last token was not prefilled")
        self._history.append(arr)
        self._sessions[session] = arr
        self._sessions.move_to_end(session)
        self._owners[(id(engine), seq)] = (session, arr)
        while len(self._sessions) > _SESSIONS_KEPT:
            self._sessions.popitem(last=False)
        self._enforce_bounds(model, costs)
        prompt_ms = (t0 - t_start) * 1000
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
            prompt_ms=prompt_ms,
        )
        return PromptPrefill(logits=logits, t0=t0, prompt_ms=prompt_ms, reused=start)

    def _options(
        self,
        engine: Engine,
        model: str,
        arr: NDArray[np.int32],
        live_lcp: int,
        truncatable: bool,
        costs: StoreCosts,
    ) -> tuple[list[RestoreOption], int]:
        """The ways to start `arr` (the live sequence first) and the tokens states cover."""
        n = len(arr)
        options = [RestoreOption(None, min(live_lcp, n - 1))]
        covered = 0
        for e in self._usable(model, engine.n_ctx):
            lcp = common_prefix(e.tokens, arr)
            usable = lcp if truncatable or lcp == len(e.tokens) else 0
            usable = min(usable, n - 1)
            covered = max(covered, usable)
            if usable > live_lcp:
                ms = costs.restore_ms(len(e.tokens), from_disk=e.data is None)
                options.append(RestoreOption(e.key, usable, ms))
        return options, covered

    def _start(
        self, engine: Engine, seq: int, prompt: list[int], choice: RestoreOption
    ) -> tuple[int, str, float]:
        """Put the chosen starting state in `seq`; returns (tokens reused, source, ms)."""
        t0 = time.perf_counter()
        entry = self._entries.get(choice.key) if choice.key is not None else None
        source = "live"
        if entry is not None:
            source = "memory" if entry.data is not None else "disk"
            try:
                self._restore(engine, seq, entry)
            except (EngineError, OSError, ValueError) as exc:
                # A missing or damaged file is forgotten; a refusal by the engine (a full
                # context, say) may not last, so that state is kept. Either way: start cold.
                if not isinstance(exc, EngineError):
                    if isinstance(exc, FileNotFoundError):
                        log.info("state %s is gone (evicted?); prefilling instead", entry.key)
                    else:
                        log.warning("skipped the state file %s; it will be rebuilt", one_line(exc))
                    if isinstance(exc, StateFileError) and not exc.damaged:
                        self._entries.pop(entry.key, None)  # not damaged: not ours to delete
                    else:
                        self._drop(entry)
                engine.seq_remove(seq)
                engine.seq_tokens[seq] = []
                return 0, "none", (time.perf_counter() - t0) * 1000
        reuse = choice.reuse
        engine.seq_remove(seq, reuse)
        engine.seq_tokens[seq] = prompt[:reuse]
        if reuse == 0:
            source = "none"
        return reuse, source, (time.perf_counter() - t0) * 1000

    def _owner(self, engine: Engine, seq: int) -> tuple[str, NDArray[np.int32]] | None:
        """The session whose prompt the store left in `seq` and that prompt, if `seq`
        still starts with it (the decoder may have appended its output since)."""
        found = self._owners.get((id(engine), seq))
        if found is None:
            return None
        live = engine.seq_tokens.get(seq, ())
        prompt = found[1]
        if common_prefix(live, prompt) < len(prompt):
            return None
        return found

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
        each comes back extended (`_hands_over`). This is the outgoing request's save,
        made late.
        """
        if not self._worth_saving(engine, model, live, costs):
            return 0.0
        if engine.seq_len(seq) != len(live):
            engine.seq_remove(seq, len(live))  # drop decoded output beyond the prompt
        return self._save(engine, seq, list(live), model, owner)

    def _worth_saving(
        self, engine: Engine, model: str, tokens: Sequence[int], costs: StoreCosts
    ) -> bool:
        """Whether a state of all of `tokens` repays its save, given what saved states
        already cover of them."""
        arr = np.asarray(tokens, dtype=np.int32)
        covered = max(
            (common_prefix(e.tokens, arr) for e in self._usable(model, engine.n_ctx)), default=0
        )
        n = len(tokens)
        return self.policy.should_checkpoint(
            divergence=n, covered=covered, prompt_len=n, costs=costs
        )

    def _divergence(self, session: str, prompt: NDArray[np.int32], truncatable: bool) -> int:
        """Where this prompt departs from what its session is expected to resend.

        Within a session: the common prefix with the session's previous prompt (Tandem's
        locality: the next request will share about as much). A session's first prompt
        has no predecessor; a truncatable state of the whole prompt serves any later
        prefix of it, so that is what is saved; a recurrent state is useful only where it
        ends, so the common prefix with any recent prompt (shared instructions) is used.
        """
        previous = self._sessions.get(session)
        if previous is not None:
            return common_prefix(previous, prompt)
        if truncatable:
            return len(prompt)
        return max((common_prefix(p, prompt) for p in self._history), default=0)

    def _cut(
        self, engine: Engine, start: int, n: int, divergence: int, covered: int, costs: StoreCosts
    ) -> int | None:
        if divergence < start:
            return None
        last_alone = not self.consolidate
        extra = len(plan_passes(start, n, engine.n_batch, cut=divergence, last_alone=last_alone))
        extra -= len(plan_passes(start, n, engine.n_batch, last_alone=last_alone))
        ok = self.policy.should_checkpoint(
            divergence=divergence, covered=covered, prompt_len=n, costs=costs, extra_passes=extra
        )
        return divergence if ok else None

    # ------------------------------------------------------------------ saving
    def save(self, engine: Engine, seq: int, *, session: str | None = None) -> Checkpoint | None:
        """Save what `seq` holds now as a state (before an idle release, for instance).

        Only the tokens the engine knows to be in `seq` are kept (decoded output beyond
        them is dropped first on attention-only models). Returns None when the sequence
        is empty, already saved, or cannot be aligned with its tokens.
        """
        with engine.lock, self._lock:
            model, truncatable = self._model(engine)
            tokens = list(engine.seq_tokens.get(seq, []))
            if not tokens:
                return None
            if engine.seq_len(seq) != len(tokens):
                if not truncatable:
                    return None
                engine.seq_remove(seq, len(tokens))
            key = state_key(model, tokens)
            if key not in self._entries:
                owner = self._owner(engine, seq)
                session = session or (owner[0] if owner else f"seq{seq}")
                self._save(engine, seq, tokens, model, session)
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
        skipped. `flush()` waits for it."""
        key = (id(engine), seq)
        with self._lock:
            ticket = self._later.get(key, 0) + 1
            self._later[key] = ticket
        self._submit(self._save_later_job, engine, seq, ticket)

    def _superseded(self, engine: Engine, seq: int, ticket: int) -> bool:
        with self._lock:
            return self._later.get((id(engine), seq)) != ticket

    def _save_later_job(self, engine: Engine, seq: int, ticket: int) -> None:
        passes = -1
        deadline = time.monotonic() + _LATER_WAIT_S
        while passes != engine.counters.forward_passes:  # until a quiet spell
            if self._superseded(engine, seq, ticket) or time.monotonic() > deadline:
                return
            passes = engine.counters.forward_passes
            time.sleep(_LATER_QUIET_S)
        if self._superseded(engine, seq, ticket):
            return
        if not engine.lock.acquire(timeout=_LATER_WAIT_S):
            return
        try:
            if engine.released or not engine.seq_tokens.get(seq):
                return
            size = engine.state_size(seq)
        except EngineError:
            return  # closed meanwhile
        finally:
            engine.lock.release()
        # Zero-filled, so every page is made here, not under the lock; with room for a
        # few more tokens should a request slip in between.
        buf = bytearray(size + size // 16)
        if not engine.lock.acquire(timeout=_LATER_WAIT_S):
            return
        try:
            if self._superseded(engine, seq, ticket):
                return  # a newer request ended while this one waited: its save follows
            with self._lock:
                model, truncatable = self._model(engine)
                tokens = list(engine.seq_tokens.get(seq, []))
                if engine.released or not tokens or not truncatable:
                    return
                if engine.seq_len(seq) != len(tokens):
                    return
                costs = self._estimator.costs()
                if not self._worth_saving(engine, model, tokens, costs):
                    return
                owner = self._owner(engine, seq)
                session = owner[0] if owner else f"seq{seq}"
                self._save(engine, seq, tokens, model, session, into=buf)
                self._enforce_bounds(model, costs)
        except EngineError:
            return
        finally:
            engine.lock.release()

    def _save(
        self,
        engine: Engine,
        seq: int,
        tokens: list[int],
        model: str,
        session: str,
        into: bytearray | None = None,
    ) -> float:
        t0 = time.perf_counter()
        key = state_key(model, tokens)
        if key in self._entries:
            self._entries[key].last_used = time.time()
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
        self._entries[key] = entry
        if self.directory is not None:
            entry.pending = self._submit(self._write_job, entry, data)
        return (time.perf_counter() - t0) * 1000

    def _restore(self, engine: Engine, seq: int, entry: StoredState) -> None:
        t0 = time.perf_counter()
        from_disk = entry.data is None
        if entry.data is not None:
            engine.state_set(seq, entry.data)
        elif entry.path is not None:
            # Mapped, not read: llama.cpp copies straight from the page cache.
            with mapped_state(entry.path, entry.model_id) as payload:
                engine.state_set(seq, payload)
        else:
            raise ValueError(f"state {entry.key} has neither memory nor file")
        engine.seq_tokens[seq] = [int(t) for t in entry.tokens]
        if self.learn_costs:
            ms = (time.perf_counter() - t0) * 1000
            self._estimator.observe_restore(len(entry.tokens), ms, from_disk=from_disk)
        entry.last_used = time.time()
        if entry.path is not None:
            self._submit(touch, entry.path)

    def discard(self, key: str) -> bool:
        """Forget the saved state `key` and delete its file; False if unknown."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False
            self._drop(entry)
            return True

    # ------------------------------------------------------------------ memory and eviction
    def release_memory(self) -> int:
        """Drop the in-memory copies of states that are safely on disk; returns bytes freed."""
        self.flush()
        freed = 0
        with self._lock:
            for e in self._entries.values():
                if e.data is not None and e.path is not None:
                    freed += len(e.data)
                    e.data = None
        return freed

    def _enforce_bounds(self, model: str, costs: StoreCosts) -> None:
        mine = [e for e in self._entries.values() if e.model_id == model]
        for session in {e.session for e in mine}:
            group = [e.info() for e in mine if e.session == session]
            excess = len(group) - self.policy.max_per_session
            for info in self.policy.eviction_order(group, costs)[: max(0, excess)]:
                self._drop(self._entries[info.key])
        resident = [e for e in self._entries.values() if e.data is not None]
        total = sum(len(e.data) for e in resident if e.data is not None)
        if total <= self.max_memory_bytes:
            return
        infos = [e.info() for e in resident if e.model_id == model]
        for info in self.policy.eviction_order(infos, costs):
            if total <= self.max_memory_bytes:
                break
            entry = self._entries[info.key]
            if entry.data is None:
                continue
            size = len(entry.data)
            if self.directory is None:
                self._drop(entry)
            elif entry.pending is not None and not entry.pending.done():
                continue  # its file is still being written: the bytes stay for now
            elif entry.path is None:
                self._drop(entry)  # the write failed: nothing else holds this state
            else:
                entry.data = None
            total -= size

    def _drop(self, entry: StoredState) -> None:
        self._entries.pop(entry.key, None)
        entry.data = None
        if self.directory is not None:
            self._submit(unlink, self.directory / f"{entry.key}{SUFFIX}")

    def _usable(self, model: str, n_ctx: int) -> Iterator[StoredState]:
        for e in list(self._entries.values()):
            if e.model_id == model and len(e.tokens) <= n_ctx:
                yield e

    def _model(self, engine: Engine) -> tuple[str, bool]:
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

    # ------------------------------------------------------------------ files
    def _submit(self, fn: Callable[..., None], *args: object) -> Future[None]:
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolweave-states")
        return self._writer.submit(fn, *args)

    def _write_job(self, entry: StoredState, data: bytes | bytearray) -> None:
        if self.directory is None:
            return
        path = self.directory / f"{entry.key}{SUFFIX}"
        try:
            size = write_state_file(
                path,
                model_id=entry.model_id,
                session=entry.session,
                tokens=entry.tokens,
                payload=data,
            )
        except OSError as exc:
            log.warning("could not save the state %s: %s", path, exc)
            with self._lock:
                self.write_errors.append(f"{path}: {exc}")
            return
        with self._lock:
            if entry.key in self._entries:
                entry.path = path
                entry.file_bytes = size
            else:  # dropped while being written
                path.unlink(missing_ok=True)
        self._enforce_disk_limit()

    def _enforce_disk_limit(self) -> None:
        """Keep the limit's directories under `disk_limit`; forget the files it deletes."""
        if not self._scope:
            return
        gone = set(enforce_cache_limit(self._scope, self.disk_limit).deleted)
        if not gone:
            return
        with self._lock:
            for entry in list(self._entries.values()):
                if entry.path is not None and entry.path in gone:
                    entry.path, entry.file_bytes = None, 0
                    if entry.data is None:
                        self._entries.pop(entry.key, None)

    def _scan(self) -> None:
        """Index the directory's state files (after applying the disk limit).

        A damaged file is deleted, a file of another format version left for the
        toolweave that wrote it; both with one warning. Another model's files are indexed
        (never used by this model) so that `checkpoints()` shows them."""
        if self.directory is None:
            return
        self._enforce_disk_limit()

        def check(path: Path, header: StateHeader) -> None:
            if state_key(header.model_id, header.tokens) != path.name[: -len(SUFFIX)]:
                raise StateFileError(path, "its name does not match its tokens", damaged=True)

        files = sorted(self.directory.glob(f"*{SUFFIX}"))
        for path, header, st in checked_headers(files, check, "state file", log):
            key = path.name[: -len(SUFFIX)]
            self._entries[key] = StoredState(
                key=key,
                model_id=header.model_id,
                tokens=header.tokens,
                session=header.session,
                n_bytes=header.n_bytes,
                last_used=st.st_mtime,
                path=path,
                file_bytes=st.st_size,
            )


def _hands_over(owner: tuple[str, NDArray[np.int32]], session: str, keep: int) -> bool:
    """Whether a request keeping the first `keep` tokens of the prompt `owner` left in a
    sequence should save that state first: always for another session's prompt it cuts
    into; within one session only when it keeps less than half of it (another prompt
    stream, which comes back), not for a sibling sharing most of it (the divergence
    checkpoint covers those)."""
    prompt_len = len(owner[1])
    if keep >= prompt_len:
        return False
    return owner[0] != session or keep < prompt_len / 2
