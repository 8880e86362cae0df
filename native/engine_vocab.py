"""The model side of `toolweave.native.engine.Engine`: its vocabulary and its metadata.

`EngineVocab` is a mixin of `Engine`. It turns text into tokens and tokens into bytes
(`tokenize`, `token_bytes`, `detokenize`), names the special tokens (`eos_token`,
`bos_token`, `is_eog`) and reads the GGUF metadata (`metadata`, `chat_template`,
`gguf_chat_template`, `model_name`). None of it touches the context: every read holds
the model lock, never the engine's, so it never waits for a decode.
"""

from __future__ import annotations

import ctypes
import threading
from abc import abstractmethod
from collections.abc import Iterable
from pathlib import Path

import llama_cpp

from toolweave.errors import EngineError

__all__ = ["EngineVocab"]


class EngineVocab:
    """The vocabulary and metadata methods of `Engine` (which sets every attribute below)."""

    model_path: Path
    n_vocab: int
    _model: llama_cpp.llama_model_p | None
    _vocab: llama_cpp.llama_vocab_p
    _model_lock: threading.Lock
    _chat_template: str | None
    _pieces: dict[int, bytes]

    @property
    @abstractmethod
    def model(self) -> llama_cpp.llama_model_p:
        """The loaded model; raises `EngineError` once the engine is closed."""

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
