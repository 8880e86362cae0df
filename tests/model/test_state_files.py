"""Saved states on disk never break a run (real SmolLM2, small contexts).

Every damaged, truncated, foreign or future file is skipped with one warning and the
state rebuilt, and the run decodes exactly what a run over an empty directory decodes
(both start from a cleared engine and run the same passes, so logits compare exactly).
A write killed midway is never read back; the model fingerprint tells same-size files
apart; the disk limit evicts the least recently used states.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from toolweave.disk_cache import CACHE_DIR_ENV, CACHE_LIMIT_ENV
from toolweave.models import default_model_path
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states import fingerprint
from toolweave.native.states.state_file import (
    SUFFIX,
    mapped_state,
    model_fingerprint,
    read_header,
    state_key,
    write_state_file,
)
from toolweave.native.states.store import StateStore

PROMPT = (
    "<|im_start|>system\nYou are a tool-using agent. Tools: ls(), cd(folder), "
    "mkdir(dir_name).<|im_end|>\n<|im_start|>user\nMake a folder named {name}.<|im_end|>\n"
    "<|im_start|>assistant\n"
)
DECODE = 6


@pytest.fixture(scope="module")
def eng() -> Iterator[Engine]:
    with Engine(default_model_path(), n_ctx=512, n_seq_max=1) as engine:
        yield engine


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(CACHE_LIMIT_ENV, raising=False)
    return tmp_path / "cache"


def tokens(eng: Engine, name: str = "reports") -> list[int]:
    return eng.tokenize(PROMPT.format(name=name))


def run(eng: Engine, store: StateStore, prompt: list[int]) -> tuple[np.ndarray, list[int]]:
    """A request from a cleared engine: prefill through the store, then greedy steps."""
    eng.clear()
    logits = store.prefill(eng, 0, prompt, DECODE, session="agent").logits.copy()
    out = [int(np.argmax(logits))]
    while len(out) < DECODE:
        pos = len(prompt) + len(out) - 1
        out.append(int(np.argmax(eng.forward([BatchToken(out[-1], pos, (0,), True)])[0])))
    return logits, out


@dataclass(frozen=True)
class Clean:
    """A run over an empty directory: the prompt, its output and the state file it saved."""

    prompt: list[int]
    logits: np.ndarray
    out: list[int]
    name: str
    data: bytes

    def same(self, got: tuple[np.ndarray, list[int]]) -> bool:
        return bool(np.array_equal(got[0], self.logits)) and got[1] == self.out


@pytest.fixture(scope="module")
def clean(eng: Engine, tmp_path_factory: pytest.TempPathFactory) -> Clean:
    directory = tmp_path_factory.mktemp("clean")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_DIR_ENV, str(directory / "cache"))
        prompt = tokens(eng)
        with StateStore(directory / "states") as store:
            logits, out = run(eng, store, prompt)
        name = f"{state_key(model_fingerprint(eng.model_path), prompt)}{SUFFIX}"
        data = (directory / "states" / name).read_bytes()
    return Clean(prompt, logits, out, name, data)


def flip(offset: int) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[offset] ^= 0xFF
        path.write_bytes(bytes(data))

    return damage


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def another_model(path: Path) -> None:
    header = read_header(path)
    payload = path.read_bytes()[header.offset :]
    write_state_file(
        path, model_id="another-model", session="x", tokens=header.tokens, payload=payload
    )


def version(digit: bytes) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[7:8] = digit
        path.write_bytes(bytes(data))

    return damage


DAMAGE: dict[str, Callable[[Path], None]] = {
    "five bytes": lambda p: p.write_bytes(b"\x01\x02\x03\x04\x05"),
    "truncated": truncate,
    "flipped payload": flip(-1000),
    "flipped header": flip(30),
    "another model": another_model,
    "older version": version(b"1"),
    "future version": version(b"3"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_bad_state_file_is_skipped_with_a_warning_and_rebuilt(
    eng: Engine, clean: Clean, tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    path = tmp_path / clean.name
    path.write_bytes(clean.data)
    DAMAGE[kind](path)

    with caplog.at_level(logging.WARNING, "toolweave.states"):
        store = StateStore(tmp_path)
        got = run(eng, store, clean.prompt)
        store.close()
    assert store.last is not None and store.last.source == "none"
    assert clean.same(got)
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert str(path) in warning.getMessage() and "\n" not in warning.getMessage()
    assert warning.exc_info is None
    # Rebuilt: the file holds a whole state of this model again.
    with mapped_state(path, model_fingerprint(eng.model_path)) as payload:
        assert payload.nbytes == len(clean.data) - read_header(path).offset


def test_another_models_state_is_kept_and_never_used(
    eng: Engine, clean: Clean, tmp_path: Path
) -> None:
    mine = tmp_path / clean.name
    mine.write_bytes(clean.data)
    payload = clean.data[read_header(mine).offset :]
    mine.unlink()
    foreign = tmp_path / f"{state_key('another-model', clean.prompt)}{SUFFIX}"
    write_state_file(
        foreign, model_id="another-model", session="s", tokens=clean.prompt, payload=payload
    )
    with StateStore(tmp_path) as store:
        assert store.checkpoints(eng) == [] and len(store.checkpoints()) == 1
        assert clean.same(run(eng, store, clean.prompt))
        assert store.last is not None and store.last.source == "none"
    assert foreign.is_file()


_KILLED_WRITER = """
import sys, time
from pathlib import Path
from toolweave.disk_cache import atomic_write
data = Path(sys.argv[2]).read_bytes()
def chunks():
    yield data[: len(data) // 2]
    print("writing", flush=True)
    time.sleep(60)
    yield data[len(data) // 2 :]
atomic_write(sys.argv[1], chunks())
"""


def test_a_write_killed_midway_is_never_read_back(
    eng: Engine, clean: Clean, tmp_path: Path
) -> None:
    whole = tmp_path / "whole"
    whole.write_bytes(clean.data)
    path = tmp_path / "states" / clean.name
    path.parent.mkdir()
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(path), str(whole)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "writing"
        child.kill()
    finally:
        child.wait(timeout=30)
    assert not path.exists()
    (partial,) = path.parent.iterdir()
    assert partial.name.endswith(".tmp") and 0 < partial.stat().st_size < len(clean.data)
    with StateStore(path.parent) as store:
        assert store.checkpoints() == []
        assert clean.same(run(eng, store, clean.prompt))


def test_same_size_model_files_get_different_fingerprints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = default_model_path()
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(original, copy)
    assert model_fingerprint(copy) == model_fingerprint(original)  # the content decides
    size = copy.stat().st_size
    with copy.open("r+b") as fh:  # flip bytes in the middle of the tensor data
        fh.seek(size // 2)
        chunk = fh.read(16)
        fh.seek(size // 2)
        fh.write(bytes(b ^ 0x5A for b in chunk))
    assert copy.stat().st_size == size
    changed = model_fingerprint(copy)
    assert changed != model_fingerprint(original)

    def no_hashing(path: Path, size: int) -> str:
        raise AssertionError("hashed again")

    fingerprint._known.clear()
    monkeypatch.setattr(fingerprint, "_hash", no_hashing)
    assert model_fingerprint(copy) == changed  # a later process: read from the cache file
    os.utime(copy, ns=(0, copy.stat().st_mtime_ns + 1_000_000))
    with pytest.raises(AssertionError, match="hashed again"):
        model_fingerprint(copy)  # the file changed: its cached digest is not trusted


def test_the_disk_limit_evicts_the_least_recently_used_states(
    eng: Engine, clean: Clean, cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = cache / "prompt-states"
    names = ("alpha", "beta", "gamma", "delta")
    # Same length, no shared prefix: no prompt's state serves another.
    base = eng.tokenize(PROMPT.format(name="reports"))
    firsts = eng.tokenize(" one two three four")
    assert len(set(firsts)) == 4
    prompts = {n: [t, *base] for n, t in zip(names, firsts, strict=True)}
    with caplog.at_level(logging.INFO, "toolweave.cache"):
        store = StateStore(directory, disk_limit="none")
        for name in ("alpha", "beta", "gamma"):
            eng.clear()
            store.prefill(eng, 0, prompts[name], session=name)
            store.flush()
            if store.disk_limit is None:  # room for two and a half states
                store.disk_limit = limit = int(2.5 * _total(directory))
        assert _stored(eng, directory, prompts) == {"beta", "gamma"}
        assert _total(directory) <= limit
        eng.clear()
        store.prefill(eng, 0, prompts["beta"], session="beta")  # beta is used again
        store.flush()
        eng.clear()
        store.prefill(eng, 0, prompts["delta"], session="delta")
        store.close()
    assert _stored(eng, directory, prompts) == {"beta", "delta"}
    assert _total(directory) <= limit
    assert sum("evicted 1 least recently used" in r.getMessage() for r in caplog.records) == 2


def _stored(eng: Engine, directory: Path, prompts: dict[str, list[int]]) -> set[str]:
    """The names whose whole prompt has a state file in `directory`."""
    model = model_fingerprint(eng.model_path)
    return {
        n for n, p in prompts.items() if (directory / f"{state_key(model, p)}{SUFFIX}").is_file()
    }


def _total(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir())


def test_a_directory_that_cannot_be_made_keeps_states_in_memory(
    eng: Engine, clean: Clean, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, "toolweave.states"):
        store = StateStore(blocker / "states")
    assert store.directory is None
    (warning,) = caplog.records
    assert "memory only" in warning.getMessage()
    assert clean.same(run(eng, store, clean.prompt))
    store.close()
