"""The KV state of one sequence of `toolweave.native.engine.Engine`, as bytes or a file.

`EngineStates` is a mixin of `Engine`. It measures a sequence's state (`state_size`),
copies it out and back in (`state_get`, `state_set`) and writes it with its tokens to
a state file of llama.cpp's own and reads it back (`state_save_file`,
`state_load_file`). Every method runs under the engine's lock, on the live context
(recreated after `release()`).
"""

from __future__ import annotations

import ctypes
import os
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path

import llama_cpp

from toolweave.errors import EngineError
from toolweave.native.concurrency import EngineLock
from toolweave.native.engine_types import _locked

__all__ = ["EngineStates"]


class EngineStates:
    """The sequence-state methods of `Engine` (which sets every attribute below)."""

    lock: EngineLock
    n_ctx: int

    @property
    @abstractmethod
    def ctx(self) -> llama_cpp.llama_context_p:
        """The live context; recreated after `release()`, `EngineError` once closed."""

    @abstractmethod
    def _check_seq(self, seq: int) -> None:
        """Raise `SequenceError` when `seq` is not a sequence id of the context."""

    @abstractmethod
    def seq_remove(self, seq: int, p0: int = 0, p1: int = -1) -> None:
        """Drop positions [p0, p1) of `seq` (p1 < 0: to the end)."""

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
