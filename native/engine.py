"""Owning wrapper over llama.cpp's low-level API: one model, one multi-sequence context.

`Llama()` silently ignores `n_seq_max`, so the context is built here with
`llama_init_from_model` and `kv_unified=True` (every sequence sees the whole window).
Every handle is freed by `close()` (or the context manager); every error code becomes an
`EngineError` subclass instead of a crash or a silent wrong answer.

`Engine` keeps the handles and the forward pass; its mixins hold the rest: the
vocabulary and metadata (`toolweave.native.engine_vocab`), the sequences and `prefill`
(`toolweave.native.engine_sequences`) and a sequence's KV state as bytes or a file
(`toolweave.native.engine_states`). `BatchToken` and `EngineCounters` are defined in
`toolweave.native.engine_types` and importable from here.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Literal

import llama_cpp
import numpy as np
from llama_cpp import _logger as _llama_logger
from numpy.typing import NDArray

from toolweave.errors import (
    ContextFullError,
    DecodeError,
    EngineError,
    ModelError,
    SequenceError,
)
from toolweave.native import compute
from toolweave.native.concurrency import EngineLock, check_cancelled
from toolweave.native.engine_sequences import EngineSequences
from toolweave.native.engine_states import EngineStates
from toolweave.native.engine_types import MAX_PASS_SIZES, BatchToken, EngineCounters, _locked
from toolweave.native.engine_vocab import EngineVocab
from toolweave.native.threads import default_threads
from toolweave.prompting.template_file import ChatTemplateError

__all__ = ["MAX_PASS_SIZES", "BatchToken", "Engine", "EngineCounters"]

_backend_lock = threading.Lock()
_backend_ready = False


def _init_backend() -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_backend_init()
            _backend_ready = True


class Engine(EngineVocab, EngineSequences, EngineStates):
    """A loaded GGUF model with a context of `n_seq_max` sequences sharing `n_ctx` cells."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_seq_max: int = 16,
        n_batch: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        batch_invariant: bool = False,
        flash_attn: bool | Literal["auto"] | None = None,
        verbose: bool = False,
        chat_template: str | None = None,
    ) -> None:
        """`chat_template` is the text of a Jinja chat template that replaces the one in
        the GGUF file (`tokenizer.chat_template`) for every prompt built on this engine."""
        path = Path(model_path)
        if not path.is_file():
            raise ModelError(f"model file not found: {path}")
        with path.open("rb") as fh:
            if fh.read(4) != b"GGUF":
                raise ModelError(f"not a GGUF model file: {path}")
        if n_seq_max < 1 or n_ctx < 16 or n_batch < 1:
            raise EngineError("n_seq_max >= 1, n_ctx >= 16 and n_batch >= 1 are required")
        if chat_template is not None and not chat_template.strip():
            raise ChatTemplateError("chat_template is empty: pass the template's text or None")
        self._chat_template = chat_template
        _llama_logger.set_verbose(verbose)
        _init_backend()
        # Re-entrant and owned by the frames holding it, not by a thread: higher layers
        # serialise whole requests (decoder generators hold it from first to last event),
        # the engine serialises calls; a stream left paused gets a clear error, not a
        # deadlock (`toolweave.native.concurrency`).
        self.lock = EngineLock()
        # Guards the model's vocabulary and metadata against `close()`: tokenizing and
        # reading pieces are read-only in llama.cpp, so they never wait for a decode.
        self._model_lock = threading.Lock()
        self.model_path = path
        self._model: llama_cpp.llama_model_p | None = None
        self._ctx: llama_cpp.llama_context_p | None = None
        self._batch: llama_cpp.llama_batch | None = None
        self._mem: llama_cpp.llama_memory_t | None = None

        mparams = llama_cpp.llama_model_default_params()
        model = llama_cpp.llama_model_load_from_file(str(path).encode("utf-8"), mparams)
        if not model:
            raise ModelError(f"llama.cpp could not load the model: {path}")
        self._model = model
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_vocab: int = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self.n_ctx_train: int = llama_cpp.llama_model_n_ctx_train(model)

        # Every kind of pass runs on all physical cores by default, with flash attention
        # off, as llama-cpp-python's `Llama` runs: on the CPU backend that is the faster
        # serial step at long contexts (SmolLM2 at 3,000 tokens: 24.7 against 77.4 ms with
        # llama.cpp's "auto"), and it scales with the machine. A single-token pass then
        # computes a token's logits slightly differently from the same token's row in a
        # multi-token pass, so `lossless` decides by a measured bound
        # (`toolweave.native.numerics`). `batch_invariant=True` is the exact opt-in: one
        # thread for single-token passes and llama.cpp's flash-attention default make the
        # two bit-identical on SmolLM2 Q4_1 (not on K-quants), at a serial step that does
        # not grow with the cores.
        batch_threads = n_threads_batch or n_threads or default_threads()
        threads = n_threads or (1 if batch_invariant else batch_threads)
        self.n_seq_max = n_seq_max
        self.n_batch = n_batch
        self.n_threads = threads
        self.n_threads_batch = batch_threads
        self.batch_invariant = batch_invariant and not n_threads
        # None: off on the default engine, llama.cpp's own choice ("auto") on the exact one.
        if flash_attn is None:
            flash_attn = "auto" if self.batch_invariant else False
        self.flash_attn: bool | Literal["auto"] = flash_attn
        self._n_ctx_wanted = n_ctx
        self._released = False
        self.last_acquire_ms: float | None = None
        self._open_context()
        self.n_ctx: int = llama_cpp.llama_n_ctx(self.ctx)
        # llama.cpp caps a pass at the context size: chunk prefills by what it accepts.
        self.n_batch = min(self.n_batch, llama_cpp.llama_n_batch(self.ctx))
        self.counters = EngineCounters()
        self._pieces: dict[int, bytes] = {}
        # Tokens known to sit in each sequence at positions 0..n-1, recorded by prompt
        # prefills (`toolweave.native.states.prefill`); every sequence operation keeps them
        # truthful (`EngineSequences`), so separate callers sharing a sequence reuse each
        # other's prefix.
        self.seq_tokens: dict[int, list[int]] = {}

    # ------------------------------------------------------------------ lifecycle
    def _open_context(self) -> None:
        """Create the context, its memory handle and the batch on the loaded model."""
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = self._n_ctx_wanted
        cparams.n_batch = self.n_batch
        cparams.n_ubatch = self.n_batch
        cparams.n_seq_max = self.n_seq_max
        cparams.n_threads = self.n_threads
        cparams.n_threads_batch = self.n_threads_batch
        cparams.kv_unified = True
        if self.flash_attn != "auto":
            cparams.flash_attn_type = 1 if self.flash_attn else 0
        cparams.no_perf = True
        ctx = llama_cpp.llama_init_from_model(self.model, cparams)
        if not ctx:
            self.close()
            raise ModelError(
                f"llama.cpp could not create a context for {self.model_path} "
                f"(n_ctx={self._n_ctx_wanted})"
            )
        self._ctx = ctx
        self._mem = llama_cpp.llama_get_memory(ctx)
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, self.n_seq_max)

    def _free_context(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        self._mem = None

    def close(self) -> None:
        """Free the batch, the context and the model (idempotent).

        Waits for the request holding the engine; raises `EngineBusyError` when a paused
        stream holds it."""
        with self.lock, self._model_lock:
            self._released = False
            self._free_context()
            if self._model is not None:
                llama_cpp.llama_model_free(self._model)
                self._model = None

    # ------------------------------------------------------------------ idle release
    @property
    def released(self) -> bool:
        """True between `release()` and the next operation that needs the context."""
        return self._released

    def release(self) -> None:
        """Free the context (KV cache, compute buffers, threads); keep the model weights.

        Every sequence is emptied. The next forward pass or state operation recreates
        the context with the same parameters (`acquire`); sequence queries in between
        answer from the empty state without recreating it. Idempotent.
        """
        with self.lock:
            if self._model is None:
                raise EngineError("the engine is closed")
            if self._ctx is None:
                return
            self._free_context()
            self.seq_tokens.clear()
            self._released = True

    def acquire(self) -> None:
        """Recreate the context after `release()` (a no-op when it is live).

        `last_acquire_ms` keeps how long the re-creation took: mostly llama.cpp clearing
        the KV buffer, i.e. page faults over n_ctx cells (see `toolweave.adapters.cli.launch`).
        """
        with self.lock:
            if self._released:
                start = time.perf_counter()
                self._open_context()
                self._released = False
                self.last_acquire_ms = (time.perf_counter() - start) * 1000

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at shutdown the library may be gone already
            if self.lock.acquire(blocking=False):  # nobody can hold an unreferenced engine
                try:
                    self.close()
                finally:
                    self.lock.release()

    @property
    def ctx(self) -> llama_cpp.llama_context_p:
        if self._released:
            self.acquire()
        if self._ctx is None:
            raise EngineError("the engine is closed")
        return self._ctx

    def _memory(self) -> llama_cpp.llama_memory_t | None:
        """The KV memory handle; None while released (every sequence is empty then)."""
        if self._released:
            return None
        if self._mem is None:
            raise EngineError("the engine is closed")
        return self._mem

    @property
    def model(self) -> llama_cpp.llama_model_p:
        if self._model is None:
            raise EngineError("the engine is closed")
        return self._model

    # ------------------------------------------------------------------ forward passes
    @_locked
    def forward(self, items: Sequence[BatchToken]) -> NDArray[np.float32]:
        """Run one llama_decode over `items`; return logits rows for items with `logits`.

        Rows come back in the order of the flagged items, shape (rows, n_vocab).
        """
        check_cancelled()  # a cancelled request stops here, between two passes
        if not items:
            raise EngineError("empty forward pass")
        if len(items) > self.n_batch:
            raise EngineError(
                f"a pass holds at most n_batch={self.n_batch} tokens, got {len(items)}"
            )
        ctx = self.ctx  # recreates a released context
        batch = self._batch
        if batch is None:
            raise EngineError("the engine is closed")
        want: list[int] = []
        for i, it in enumerate(items):
            if not 0 <= it.pos < self.n_ctx:
                raise ContextFullError(
                    f"position {it.pos} is outside the context window of {self.n_ctx} tokens"
                )
            if not 0 <= it.token < self.n_vocab:
                raise EngineError(f"token id {it.token} outside the vocabulary")
            if not it.seq_ids or len(it.seq_ids) > self.n_seq_max:
                raise SequenceError(f"a token needs 1..{self.n_seq_max} sequence ids")
            batch.token[i] = it.token
            batch.pos[i] = it.pos
            batch.n_seq_id[i] = len(it.seq_ids)
            for j, s in enumerate(it.seq_ids):
                self._check_seq(s)
                batch.seq_id[i][j] = s
                known = self.seq_tokens.get(s)
                if known is not None and it.pos < len(known):
                    del known[it.pos :]  # overwritten: what follows is no longer known
            batch.logits[i] = 1 if it.logits else 0
            if it.logits:
                want.append(i)
        batch.n_tokens = len(items)
        rc = compute.run(llama_cpp.llama_decode, ctx, batch)  # one OpenMP team: compute.py
        if rc == 1:
            raise ContextFullError("no free KV cells for this pass: the context is full")
        if rc != 0:
            raise DecodeError(f"llama_decode failed with code {rc}")
        self.counters.record(len(items), len(want))
        out = np.empty((len(want), self.n_vocab), dtype=np.float32)
        for row, i in enumerate(want):
            ptr = llama_cpp.llama_get_logits_ith(ctx, i)
            if not ptr:
                raise DecodeError(f"no logits for batch index {i}")
            out[row] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
        return out

    # ------------------------------------------------------------------ counters
    @_locked
    def reset_counters(self) -> None:
        self.counters = EngineCounters()
