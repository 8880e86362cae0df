"""Idle release on the real SmolLM2 model: memory goes back, the weights stay, and the next
request restores its state from the store and answers exactly as without the release."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from toolweave.errors import EngineError
from toolweave.models import default_model_path
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states.idle import IdleReleaser, resident_bytes
from toolweave.native.states.store import StateStore

RULES = (
    "<|im_start|>system\nYou are a tool-using agent. Reply with one tool call as compact "
    "JSON. Tools: cd(folder), ls(), mkdir(dir_name), mv(source, destination).<|im_end|>\n"
    "<|im_start|>user\nMove 'final_report.pdf' into a new folder 'temp' in document.\n"
)
FIRST = f"{RULES}Recent actions:\n1. cd(folder='document') -> ok\nNext call:<|im_end|>\n"
SECOND = (
    f"{RULES}Recent actions:\n1. cd(folder='document') -> ok\n2. mkdir(dir_name='temp') -> ok\n"
    "Next call:<|im_end|>\n"
)
ASSISTANT = "<|im_start|>assistant\n"


@pytest.fixture
def own_engine() -> Iterator[Engine]:
    """A separate engine: releasing it must not disturb the shared one."""
    with Engine(default_model_path(), n_ctx=4096, n_seq_max=2) as eng:
        yield eng


def agent_step(engine: Engine, store: StateStore, text: str, steps: int = 8) -> list[int]:
    prompt = engine.tokenize(text + ASSISTANT)
    logits = store.prefill(engine, 0, prompt, steps, session="agent").logits
    out: list[int] = []
    for i in range(steps):
        tok = int(np.argmax(logits))
        out.append(tok)
        logits = engine.forward([BatchToken(tok, len(prompt) + i, (0,), True)])[0]
    return out


def test_release_frees_memory_and_the_next_request_answers_the_same(
    own_engine: Engine, tmp_path: Path
) -> None:
    eng = own_engine
    store = StateStore(tmp_path)
    agent_step(eng, store, FIRST)
    warm = agent_step(eng, store, SECOND)
    reused_warm = store.last.reused if store.last else -1

    agent_step(eng, store, FIRST)
    record = IdleReleaser(eng, idle_s=0.0, store=store).release_now()
    assert eng.released
    assert record.saved_sequences == 1
    # n_ctx=4096 holds ~90 MB of KV cache; the weights (mmap) stay resident.
    assert record.rss_before - record.rss_after > 40 << 20
    assert store.memory_bytes() == 0  # spilled: the states are on disk only

    cold = agent_step(eng, store, SECOND)
    assert not eng.released
    assert store.last is not None and store.last.source == "disk"
    assert store.last.reused == reused_warm
    assert cold == warm
    store.close()


def test_released_engine_recreates_its_context_on_demand(own_engine: Engine) -> None:
    eng = own_engine
    tokens = eng.tokenize(FIRST)
    expected = eng.prefill(0, tokens)
    eng.release()
    eng.release()  # idempotent
    assert eng.released and eng.seq_len(0) == 0 and eng.seq_tokens == {}
    eng.seq_remove(0)  # sequence operations need no context
    assert eng.last_acquire_ms is None  # never recreated yet
    got = eng.prefill(0, tokens)  # the pass recreates the context
    assert not eng.released
    assert eng.last_acquire_ms is not None and eng.last_acquire_ms > 0
    assert np.array_equal(got, expected)
    eng.close()
    with pytest.raises(EngineError):
        eng.release()


def test_watcher_releases_after_the_idle_time(own_engine: Engine) -> None:
    eng = own_engine
    eng.prefill(0, eng.tokenize(FIRST))
    releaser = IdleReleaser(eng, idle_s=0.3, poll_s=0.05)
    with releaser:
        with releaser.busy():
            time.sleep(0.6)
            assert not eng.released  # busy: never released
        deadline = time.monotonic() + 5
        while not eng.released and time.monotonic() < deadline:
            time.sleep(0.05)
        assert eng.released
        assert len(releaser.releases) == 1
        eng.prefill(0, eng.tokenize(FIRST))  # transparent: the context comes back
        assert not eng.released
        assert releaser.idle_for() < 0.3  # the pass counted as activity
    assert resident_bytes() > 0
