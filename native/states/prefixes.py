"""KV states of fixed prompt prefixes: computed offline, kept on disk, loaded by longest match.

PromptWeaver (Agent-X) makes most of a Planner prompt a fixed prefix: the rules and every
tool of the catalogue, then the examples of a stored combination of tool clusters. Those
prefixes are known before any request arrives, so their KV states are computed once
(`PrefixStates.build`) and written as llama.cpp sequence-state files. A request then
loads the longest stored prefix of its prompt (`PrefixStates.restore`) and prefills only
the rest. Unlike `toolweave.native.states.store.StateStore`, which decides at run time
what to keep and evicts, this set is chosen offline (a storage budget) and never evicted.

Files live in ``DIRECTORY/<model fingerprint>/`` (so a different model never loads
them), one ``<hash>.state`` per prefix plus ``index.json`` mapping each file to its token
count and size. The token list itself is inside the state file (llama.cpp stores it) and
is checked on load.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toolweave.checkpoints import common_prefix
from toolweave.errors import EngineError
from toolweave.native.engine import Engine
from toolweave.native.states.state_file import model_fingerprint

__all__ = ["PrefixEntry", "PrefixStates", "Restored"]

_INDEX = "index.json"
_FORMAT = "toolweave-prefix-states-v1"


@dataclass(frozen=True)
class PrefixEntry:
    """One stored prefix: its file, token count, bytes on disk and the tokens' digest."""

    file: str
    n_tokens: int
    n_bytes: int
    digest: str
    label: str = ""


@dataclass(frozen=True)
class Restored:
    """What `PrefixStates.restore` did: tokens now cached (0: nothing loaded) and time."""

    tokens: int
    ms: float
    entry: PrefixEntry | None = None


class PrefixStates:
    """The stored prefix states of one model in `directory` (created when missing)."""

    def __init__(self, directory: str | os.PathLike[str], engine: Engine) -> None:
        self.root = Path(directory).expanduser() / model_fingerprint(engine.model_path)[:16]
        self.root.mkdir(parents=True, exist_ok=True)
        self.engine = engine
        self._entries: dict[str, PrefixEntry] = {}
        self._tokens: dict[str, np.ndarray] = {}
        self._active: set[str] | None = None
        self._read_index()

    # ------------------------------------------------------------ contents
    @property
    def entries(self) -> list[PrefixEntry]:
        return list(self._entries.values())

    def disk_bytes(self, digests: Sequence[str] | None = None) -> int:
        """Bytes on disk of all stored prefixes, or of the ones named by digest."""
        chosen = self._entries if digests is None else {d: self._entries[d] for d in digests}
        return sum(e.n_bytes for e in chosen.values())

    def select(self, digests: set[str] | None) -> None:
        """Restore only from the prefixes named by digest (None: all); the others stay
        on disk. A storage budget smaller than what the directory holds uses this."""
        self._active = None if digests is None else set(digests)

    def has(self, tokens: Sequence[int]) -> bool:
        return _digest(tokens) in self._entries

    # ------------------------------------------------------------ offline
    def build(
        self,
        prefixes: Sequence[tuple[str, Sequence[int]]],
        *,
        seq: int = 0,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[PrefixEntry]:
        """Compute and save the state of each (label, tokens) prefix not stored yet.

        Prefixes are computed in sorted token order so one that extends the previous
        one prefills only its extension. Returns the entries of all `prefixes`.
        """
        engine = self.engine
        order = sorted(range(len(prefixes)), key=lambda i: list(prefixes[i][1]))
        out: dict[int, PrefixEntry] = {}
        for done, i in enumerate(order):
            label, tokens = prefixes[i]
            toks = [int(t) for t in tokens]
            if not toks:
                raise ValueError(f"prefix {label!r} is empty")
            digest = _digest(toks)
            if digest not in self._entries:
                with engine.lock:
                    _extend(engine, seq, toks)
                    path = self.root / f"{digest}.state"
                    tmp = path.with_suffix(".tmp")
                    n_bytes = engine.state_save_file(seq, tmp, toks)
                    os.replace(tmp, path)
                self._entries[digest] = PrefixEntry(path.name, len(toks), n_bytes, digest, label)
                self._tokens[digest] = np.asarray(toks, dtype=np.int32)
                self._write_index()
            out[i] = self._entries[digest]
            if progress is not None:
                progress(done + 1, len(prefixes))
        return [out[i] for i in range(len(prefixes))]

    # ------------------------------------------------------------ online
    def longest(self, prompt: Sequence[int]) -> PrefixEntry | None:
        """The longest stored prefix of `prompt` that leaves at least one token to run."""
        arr = np.asarray(prompt, dtype=np.int32)
        best: PrefixEntry | None = None
        for digest, entry in self._entries.items():
            if self._active is not None and digest not in self._active:
                continue
            n = entry.n_tokens
            if n >= len(arr) or (best is not None and n <= best.n_tokens):
                continue
            if np.array_equal(self._tokens_of(digest), arr[:n]):
                best = entry
        return best

    def restore(self, seq: int, prompt: Sequence[int]) -> Restored:
        """Load into `seq` the longest stored prefix of `prompt`, unless `seq` already
        holds at least as much of it. Call with `engine.lock` held when shared."""
        engine = self.engine
        t0 = time.perf_counter()
        entry = self.longest(prompt)
        cached = engine.seq_tokens.get(seq, [])
        have = common_prefix(cached, prompt)
        if entry is None or entry.n_tokens <= have:
            return Restored(0, (time.perf_counter() - t0) * 1000)
        tokens = engine.state_load_file(seq, self.root / entry.file)
        if len(tokens) != entry.n_tokens or list(prompt[: len(tokens)]) != tokens:
            engine.seq_remove(seq)
            engine.seq_tokens[seq] = []
            raise EngineError(f"prefix state {entry.file} does not hold the tokens it claims")
        engine.seq_tokens[seq] = tokens
        return Restored(len(tokens), (time.perf_counter() - t0) * 1000, entry)

    # ------------------------------------------------------------ index
    def _tokens_of(self, digest: str) -> np.ndarray:
        found = self._tokens.get(digest)
        if found is None:  # read lazily from the state file's token list
            found = np.asarray(_file_tokens(self.root / self._entries[digest].file), np.int32)
            self._tokens[digest] = found
        return found

    def _read_index(self) -> None:
        path = self.root / _INDEX
        if not path.is_file():
            return
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != _FORMAT:
                return
            for item in data["entries"]:
                entry = PrefixEntry(**item)
                if (self.root / entry.file).is_file():
                    self._entries[entry.digest] = entry
        except (OSError, ValueError, TypeError, KeyError):
            self._entries.clear()  # an unreadable index: the states are rebuilt

    def _write_index(self) -> None:
        data = {"format": _FORMAT, "entries": [vars(e) for e in self._entries.values()]}
        tmp = self.root / (_INDEX + ".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.root / _INDEX)


def _digest(tokens: Sequence[int]) -> str:
    return hashlib.sha256(np.asarray(tokens, dtype=np.int32).tobytes()).hexdigest()[:32]


def _extend(engine: Engine, seq: int, tokens: list[int]) -> None:
    """Leave exactly `tokens` in `seq`, prefilling only what the sequence lacks."""
    keep = common_prefix(engine.seq_tokens.get(seq, []), tokens)
    engine.seq_remove(seq, keep)
    engine.seq_tokens[seq] = tokens[:keep]
    if keep < len(tokens):
        engine.prefill(seq, tokens[keep:], start=keep, logits_last=False)
    engine.seq_tokens[seq] = list(tokens)


def _file_tokens(path: Path) -> list[int]:
    """The token list at the head of a llama.cpp sequence-state file (magic, version,
    count, tokens)."""
    with path.open("rb") as fh:
        head = fh.read(12)
        if len(head) < 12:
            raise EngineError(f"{path} is not a state file")
        count = int.from_bytes(head[8:12], "little")
        data = fh.read(4 * count)
    return np.frombuffer(data, dtype=np.int32).tolist()
