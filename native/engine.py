"""Owning wrapper over llama.cpp's low-level API: one model, one multi-sequence context.

`Llama()` silently ignores `n_seq_max`, so the context is built here with
`llama_init_from_model` and `kv_unified=True` (every sequence sees the whole window).
Every handle is freed by `close()` (or the context manager); every error code becomes an
`EngineError` subclass instead of a crash or a silent wrong answer.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Concatenate, Literal, ParamSpec, TypeVar

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
from toolweave.native.threads import default_threads
from toolweave.prompting.template_file import ChatTemplateError

__all__ = ["BatchToken", "Engine", "EngineCounters"]

#: Pass sizes kept in `EngineCounters.per_pass_sizes` (the oldest are dropped beyond it).
MAX_PASS_SIZES = 100_000

_P = ParamSpec("_P")
_R = TypeVar("_R")

_backend_lock = threading.Lock()
_backend_ready = False


def _init_backend() -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.llama_backend_init()
            _backend_ready = True


def _locked(
    method: Callable[Concatenate[Engine, _P], _R],
) -> Callable[Concatenate[Engine, _P], _R]:
    """Run under the engine's lock, so `release()` never frees the context mid-call."""

    @functools.wraps(method)
    def call(self: Engine, *args: _P.args, **kwargs: _P.kwargs) -> _R:
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


class Engine:
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
        # prefills (`toolweave.native.states.prefill`); every sequence operation below keeps
        # them truthful, so separate callers sharing a sequence reuse each other's prefix.
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

    @property
    def vocab(self) -> llama_cpp.llama_vocab_p:
        return self._vocab

    def _check_open(self) -> None:
        """Raise once `close()` freed the model; call with `_model_lock` held, so the
        vocabulary stays valid for the read that follows."""
        if self._model is None:
            raise EngineError("the engine is closed")

    # ------------------------------------------------------------------ model facts
    def metadata(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        with self._model_lock:
            self._check_open()
            n = llama_cpp.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return None if n < 0 else buf.value.decode("utf-8", errors="replace")

    @property
    def chat_template(self) -> str | None:
        """The override given to the constructor, else the GGUF's own template (or None)."""
        if self._chat_template is not None:
            return self._chat_template
        return self.metadata("tokenizer.chat_template")

    @property
    def gguf_chat_template(self) -> str | None:
        """The chat template stored in the model file, whatever the override."""
        return self.metadata("tokenizer.chat_template")

    @property
    def model_name(self) -> str:
        return self.metadata("general.name") or self.model_path.stem

    @property
    def eos_token(self) -> int:
        with self._model_lock:
            self._check_open()
            return int(llama_cpp.llama_vocab_eos(self._vocab))

    @property
    def bos_token(self) -> int:
        with self._model_lock:
            self._check_open()
            return int(llama_cpp.llama_vocab_bos(self._vocab))

    def is_eog(self, token: int) -> bool:
        with self._model_lock:
            self._check_open()
            return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    # ------------------------------------------------------------------ tokens
    def tokenize(
        self, text: str, *, add_special: bool = False, parse_special: bool = True
    ) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        with self._model_lock:  # every buffer is this call's own: threads tokenize freely
            self._check_open()
            buf = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(
                self._vocab, data, len(data), buf, cap, add_special, parse_special
            )
            if n < 0:
                cap = -n
                buf = (llama_cpp.llama_token * cap)()
                n = llama_cpp.llama_tokenize(
                    self._vocab, data, len(data), buf, cap, add_special, parse_special
                )
        if n < 0:
            raise EngineError(f"tokenization failed ({n})")
        return list(buf[:n])

    def token_bytes(self, token: int) -> bytes:
        """The bytes a token writes (special tokens written as their text).

        Safe from any thread, and never waits for a decode: a piece is read into a
        buffer of this call's own and cached (the cache holds at most one entry per
        vocabulary token)."""
        piece = self._pieces.get(token)
        if piece is None:
            if not 0 <= token < self.n_vocab:
                raise EngineError(f"token id {token} outside the vocabulary")
            piece = self._read_piece(token)
            self._pieces[token] = piece
        return piece

    def _read_piece(self, token: int) -> bytes:
        size = 64
        with self._model_lock:
            self._check_open()
            for _ in range(2):
                buf = ctypes.create_string_buffer(size)
                n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, size, 0, True)
                if n >= 0:
                    return bytes(buf.raw[:n])
                size = -n  # too small: llama.cpp says how much it needs
        raise EngineError(f"token {token} has no piece")

    def detokenize(self, tokens: Iterable[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ sequences
    def _check_seq(self, seq: int) -> None:
        if not 0 <= seq < self.n_seq_max:
            raise SequenceError(f"sequence id {seq} out of range 0..{self.n_seq_max - 1}")

    @_locked
    def seq_pos_max(self, seq: int) -> int:
        """Largest position held by `seq`, -1 when empty."""
        self._check_seq(seq)
        mem = self._memory()
        return -1 if mem is None else int(llama_cpp.llama_memory_seq_pos_max(mem, seq))

    def seq_len(self, seq: int) -> int:
        return self.seq_pos_max(seq) + 1

    @_locked
    def seq_copy(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        """Share the cells of `src` in [p0, p1) with `dst` (no copy of data, no re-prefill)."""
        self._check_seq(src)
        self._check_seq(dst)
        self.seq_tokens.pop(dst, None)
        mem = self._memory()
        if mem is not None:
            llama_cpp.llama_memory_seq_cp(mem, src, dst, p0, p1)

    @_locked
    def seq_remove(self, seq: int, p0: int = 0, p1: int = -1) -> None:
        """Drop positions [p0, p1) of `seq` (p1 < 0: to the end)."""
        self._check_seq(seq)
        known = self.seq_tokens.get(seq)
        if known is not None:
            if p1 < 0 and p0 >= 0:
                del known[p0:]
            else:
                self.seq_tokens.pop(seq)
        mem = self._memory()
        if mem is not None and not llama_cpp.llama_memory_seq_rm(mem, seq, p0, p1):
            raise SequenceError(f"cannot remove positions [{p0}, {p1}) of sequence {seq}")

    @_locked
    def seq_keep(self, seq: int) -> None:
        self._check_seq(seq)
        self.seq_tokens = {s: t for s, t in self.seq_tokens.items() if s == seq}
        mem = self._memory()
        if mem is not None:
            llama_cpp.llama_memory_seq_keep(mem, seq)

    @_locked
    def clear(self) -> None:
        self.seq_tokens.clear()
        mem = self._memory()
        if mem is not None:
            llama_cpp.llama_memory_clear(mem, True)

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
            batch.pos[i] = it.pos  # type: ignore[call-overload]
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

    @_locked
    def prefill(
        self, seq: int, tokens: Sequence[int], *, start: int | None = None, logits_last: bool = True
    ) -> NDArray[np.float32] | None:
        """Append `tokens` to `seq` (chunked by n_batch); logits of the last one if asked.

        Atomic: no other caller's pass lands between its chunks, and a prefill that is
        cancelled or fails leaves `seq` as it found it up to `start`."""
        if not tokens:
            return None
        pos0 = self.seq_len(seq) if start is None else start
        if pos0 + len(tokens) > self.n_ctx:
            raise ContextFullError(
                f"{pos0 + len(tokens)} tokens do not fit the context window of {self.n_ctx}"
            )
        last: NDArray[np.float32] | None = None
        try:
            for off in range(0, len(tokens), self.n_batch):
                chunk = tokens[off : off + self.n_batch]
                final = off + len(chunk) == len(tokens)
                items = [
                    BatchToken(
                        t, pos0 + off + k, (seq,), logits_last and final and k == len(chunk) - 1
                    )
                    for k, t in enumerate(chunk)
                ]
                rows = self.forward(items)
                if len(rows):
                    last = rows[0]
        except BaseException:
            # Cancelled or failed between chunks: drop the part written, so the sequence
            # holds no more than its recorded tokens.
            self.seq_remove(seq, pos0)
            raise
        return last

    # ------------------------------------------------------------------ states
    @_locked
    def state_size(self, seq: int) -> int:
        """Bytes `state_get(seq)` would return now."""
        self._check_seq(seq)
        return int(llama_cpp.llama_state_seq_get_size(self.ctx, seq))

    @_locked
    def state_get(self, seq: int, into: bytearray | None = None) -> bytearray:
        """The KV state of one sequence, written by llama.cpp straight into the buffer
        returned (one allocation: fresh pages of a state of tens of MiB cost more than
        llama.cpp's copy). Being writable, it is restored by `state_set` in place.

        `into`, when at least `state_size(seq)` bytes long, is that buffer (its pages
        touched beforehand, off the lock, the copy is all that is left); it is cut to
        the state's length."""
        self._check_seq(seq)
        size = llama_cpp.llama_state_seq_get_size(self.ctx, seq)
        data = into if into is not None and len(into) >= size else bytearray(size)
        buf = (ctypes.c_uint8 * size).from_buffer(data)
        try:
            n = llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, seq)
        finally:
            del buf  # release the export, so the buffer may be resized below
        if n == 0 and size:
            raise EngineError(f"could not read the state of sequence {seq}")
        if n < len(data):
            del data[n:]
        return data

    @_locked
    def state_set(self, seq: int, data: bytes | bytearray | memoryview) -> None:
        """Replace the KV state of `seq` with `data` (from `state_get`).

        A writable buffer (a bytearray, a copy-on-write mmap of a state file) is read in
        place; read-only bytes are copied first.
        """
        self._check_seq(seq)
        self.seq_remove(seq)
        view = memoryview(data)
        n = view.nbytes
        array_type = ctypes.c_uint8 * n
        buf = array_type.from_buffer_copy(view) if view.readonly else array_type.from_buffer(view)
        try:
            if llama_cpp.llama_state_seq_set_data(self.ctx, buf, n, seq) == 0:
                raise EngineError(f"could not restore a state of {n} bytes into sequence {seq}")
        finally:
            del buf  # release the buffer export before the caller closes its mapping
            view.release()

    @_locked
    def state_save_file(self, seq: int, path: str | os.PathLike[str], tokens: Sequence[int]) -> int:
        """Write the state of `seq` and its tokens to `path`; returns bytes written."""
        self._check_seq(seq)
        arr = (llama_cpp.llama_token * len(tokens))(*tokens)
        n = llama_cpp.llama_state_seq_save_file(
            self.ctx, os.fspath(path).encode(), seq, arr, len(tokens)
        )
        if n == 0:
            raise EngineError(f"could not save the state of sequence {seq} to {path}")
        return int(n)

    @_locked
    def state_load_file(self, seq: int, path: str | os.PathLike[str]) -> list[int]:
        """Load a state written by `state_save_file` into `seq`; returns its tokens."""
        self._check_seq(seq)
        if not Path(path).is_file():
            raise EngineError(f"state file not found: {path}")
        self.seq_remove(seq)
        cap = self.n_ctx
        arr = (llama_cpp.llama_token * cap)()
        count = ctypes.c_size_t(0)
        n = llama_cpp.llama_state_seq_load_file(
            self.ctx, os.fspath(path).encode(), seq, arr, cap, ctypes.byref(count)
        )
        if n == 0:
            raise EngineError(f"could not load the state file {path} (wrong model or context?)")
        return list(arr[: count.value])

    # ------------------------------------------------------------------ counters
    @_locked
    def reset_counters(self) -> None:
        self.counters = EngineCounters()
