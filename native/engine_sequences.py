"""What each sequence of `toolweave.native.engine.Engine`'s context holds, and filling it.

`EngineSequences` is a mixin of `Engine`. It reads a sequence's length (`seq_pos_max`,
`seq_len`), shares, drops and keeps its cells (`seq_copy`, `seq_remove`, `seq_keep`,
`clear`) and appends a prompt to it in forward passes of at most n_batch tokens
(`prefill`). Every operation keeps `Engine.seq_tokens` truthful, and while the context
is released every sequence answers as empty without recreating it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import llama_cpp
import numpy as np
from numpy.typing import NDArray

from toolweave.errors import ContextFullError, SequenceError
from toolweave.native.concurrency import EngineLock
from toolweave.native.engine_types import BatchToken, _locked

__all__ = ["EngineSequences"]


class EngineSequences:
    """The sequence methods of `Engine` (which sets every attribute below)."""

    lock: EngineLock
    n_ctx: int
    n_batch: int
    n_seq_max: int
    seq_tokens: dict[int, list[int]]

    @abstractmethod
    def _memory(self) -> llama_cpp.llama_memory_t | None:
        """The KV memory handle; None while released (every sequence is empty then)."""

    @abstractmethod
    def forward(self, items: Sequence[BatchToken]) -> NDArray[np.float32]:
        """Run one llama_decode over `items`; return logits rows for items with `logits`."""

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

    # ------------------------------------------------------------------ prefill
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
