"""KV states of fixed prompt prefixes: computed offline, kept on disk, loaded by longest match.

PromptWeaver (Agent-X) makes most of a Planner prompt a fixed prefix: the rules and every
tool of the catalogue, then the examples of a stored combination of tool clusters. Those
prefixes are known before any request arrives, so their KV states are computed once
(`PrefixStates.build`) and written as state files. A request then loads the longest
stored prefix of its prompt (`PrefixStates.restore`) and prefills only the rest. Unlike
`toolweave.native.states.store.StateStore`, which decides at run time what to keep, this
set is chosen offline (a storage budget); only the cache limit shared by toolweave's
state directories (`toolweave.disk_cache`) deletes its files, least recently used first.

Files live in ``DIRECTORY/<model fingerprint>/``, one ``<digest of the tokens>.twstate``
per prefix in the format of `toolweave.native.states.state_file` (the header holds the
model fingerprint, the label and the tokens; the payload a checksum). Opening the
directory reads every header: a file that is damaged, of another version, of another
model or whose name does not match its tokens is skipped with a warning (a damaged one
deleted), so the next `build` computes it again. A restore checks the whole file first.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from toolweave.checkpoints import common_prefix
from toolweave.disk_cache import enforce_cache_limit, limit_scope, resolve_cache_limit
from toolweave.errors import EngineError
from toolweave.native.engine import Engine
from toolweave.native.states.state_file import (
    SUFFIX,
    StateFileError,
    StateHeader,
    checked_headers,
    mapped_state,
    model_fingerprint,
    one_line,
    touch,
    unlink,
    write_state_file,
)

__all__ = ["PrefixEntry", "PrefixStates", "Restored"]

log = logging.getLogger("toolweave.states")


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
    """The stored prefix states of one model in `directory` (created when missing).

    `disk_limit`: the byte limit of the state directories (see `toolweave.disk_cache`;
    default ``$TOOLWEAVE_CACHE_LIMIT`` or 4 GiB), applied after each file written."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        engine: Engine,
        *,
        disk_limit: int | str | None = None,
    ) -> None:
        self.model_id = model_fingerprint(engine.model_path)
        self.root = (Path(directory).expanduser() / self.model_id[:16]).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.engine = engine
        self.disk_limit = resolve_cache_limit(disk_limit)
        self._scope = limit_scope(Path(directory).expanduser())
        self._entries: dict[str, PrefixEntry] = {}
        self._tokens: dict[str, NDArray[np.int32]] = {}
        self._active: set[str] | None = None
        self._scan()

    # ------------------------------------------------------------ contents
    @property
    def entries(self) -> list[PrefixEntry]:
        return list(self._entries.values())

    def disk_bytes(self, digests: Sequence[str] | None = None) -> int:
        """Bytes on disk of all stored prefixes, or of the ones named by digest (a digest
        not stored counts 0)."""
        if digests is None:
            return sum(e.n_bytes for e in self._entries.values())
        return sum(self._entries[d].n_bytes for d in digests if d in self._entries)

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
        for _, tokens in prefixes:  # used again: the files of this set are evicted last
            found = self._entries.get(_digest([int(t) for t in tokens]))
            if found is not None:
                touch(self.root / found.file)
        order = sorted(range(len(prefixes)), key=lambda i: list(prefixes[i][1]))
        out: dict[int, PrefixEntry] = {}
        for done, i in enumerate(order):
            label, tokens = prefixes[i]
            toks = [int(t) for t in tokens]
            if not toks:
                raise ValueError(f"prefix {label!r} is empty")
            digest = _digest(toks)
            if digest not in self._entries:
                path = self.root / f"{digest}{SUFFIX}"
                with engine.lock:
                    _extend(engine, seq, toks)
                    payload = engine.state_get(seq)
                n_bytes = write_state_file(
                    path, model_id=self.model_id, session=label, tokens=toks, payload=payload
                )
                del payload
                self._entries[digest] = PrefixEntry(path.name, len(toks), n_bytes, digest, label)
                self._tokens[digest] = np.asarray(toks, dtype=np.int32)
                self._enforce_disk_limit()
            out[i] = self._entries.get(digest) or PrefixEntry(
                f"{digest}{SUFFIX}", len(toks), 0, digest, label
            )
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
            if np.array_equal(self._tokens[digest], arr[:n]):
                best = entry
        return best

    def restore(self, seq: int, prompt: Sequence[int]) -> Restored:
        """Load into `seq` the longest stored prefix of `prompt`, unless `seq` already
        holds at least as much of it. Call with `engine.lock` held when shared.

        A file found damaged, missing or refused by the engine loads nothing (one warning;
        a damaged or missing file is forgotten): `seq` is left empty and the caller
        prefills the whole prompt, with the same result."""
        engine = self.engine
        t0 = time.perf_counter()
        entry = self.longest(prompt)
        cached = engine.seq_tokens.get(seq, [])
        have = common_prefix(cached, prompt)
        if entry is None or entry.n_tokens <= have:
            return Restored(0, (time.perf_counter() - t0) * 1000)
        path = self.root / entry.file
        try:
            with mapped_state(path, self.model_id) as payload:
                engine.state_set(seq, payload)
        except (OSError, ValueError, EngineError) as exc:
            engine.seq_remove(seq)
            engine.seq_tokens[seq] = []
            if isinstance(exc, FileNotFoundError):
                log.info("prefix state %s is gone (evicted?); prefilling instead", path)
            else:
                log.warning("skipped the prefix state %s; prefilling instead", one_line(exc))
            if not isinstance(exc, EngineError):
                keep = isinstance(exc, FileNotFoundError) or (
                    isinstance(exc, StateFileError) and not exc.damaged
                )
                self._forget(entry.digest, delete=not keep)
            return Restored(0, (time.perf_counter() - t0) * 1000)
        tokens = [int(t) for t in self._tokens[entry.digest]]
        engine.seq_tokens[seq] = tokens
        touch(path)
        return Restored(len(tokens), (time.perf_counter() - t0) * 1000, entry)

    # ------------------------------------------------------------ files
    def _forget(self, digest: str, *, delete: bool) -> None:
        entry = self._entries.pop(digest, None)
        self._tokens.pop(digest, None)
        if entry is not None and delete:
            unlink(self.root / entry.file)

    def _enforce_disk_limit(self) -> None:
        for path in enforce_cache_limit(self._scope, self.disk_limit).deleted:
            if path.parent == self.root and path.name.endswith(SUFFIX):
                self._forget(path.name[: -len(SUFFIX)], delete=False)

    def _scan(self) -> None:
        """Index the files that check out (after applying the disk limit)."""
        self._enforce_disk_limit()

        def check(path: Path, header: StateHeader) -> None:
            if header.model_id != self.model_id:
                raise StateFileError(path, "belongs to another model", damaged=False)
            if _digest(header.tokens) != path.name[: -len(SUFFIX)] or not len(header.tokens):
                raise StateFileError(path, "its name does not match its tokens", damaged=True)

        files = sorted(self.root.glob(f"*{SUFFIX}"))
        for path, header, st in checked_headers(files, check, "prefix state", log):
            digest, size = path.name[: -len(SUFFIX)], st.st_size
            n = len(header.tokens)
            self._entries[digest] = PrefixEntry(path.name, n, size, digest, header.session)
            self._tokens[digest] = header.tokens


def _digest(tokens: Sequence[int] | NDArray[np.int32]) -> str:
    return hashlib.sha256(np.asarray(tokens, dtype=np.int32).tobytes()).hexdigest()[:32]


def _extend(engine: Engine, seq: int, tokens: list[int]) -> None:
    """Leave exactly `tokens` in `seq`, prefilling only what the sequence lacks."""
    keep = common_prefix(engine.seq_tokens.get(seq, []), tokens)
    engine.seq_remove(seq, keep)
    engine.seq_tokens[seq] = tokens[:keep]
    if keep < len(tokens):
        engine.prefill(seq, tokens[keep:], start=keep, logits_last=False)
    engine.seq_tokens[seq] = list(tokens)
