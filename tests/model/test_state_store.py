"""Divergence-point checkpoints on the real SmolLM2 model, and the pure policy under them.

Logits are compared exactly. On this CPU build a row's value depends on the shape of the
pass that computes it and on which KV cells hold the context, so each comparison runs
the same passes from a cleared engine; what differs is only where the prefix state came
from (prefilled now, or restored from a checkpoint in memory or on disk).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolweave.checkpoints import (
    CheckpointInfo,
    CheckpointPolicy,
    RestoreOption,
    StoreCosts,
    choose_restore,
    common_prefix,
    plan_passes,
)
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states.prefill import prefill_prompt
from toolweave.native.states.state_file import read_header, state_key, write_state_file
from toolweave.native.states.store import StateStore

RULES = (
    "<|im_start|>system\nYou are a tool-using agent. Call one tool per reply, as compact "
    "JSON. Tools: cd(folder), ls(), mkdir(dir_name), mv(source, destination), "
    "grep(file_name, pattern), sort(file_name), diff(file_name1, file_name2).<|im_end|>\n"
    "<|im_start|>user\nRequests:\n1. Move 'final_report.pdf' from the document folder into "
    "a new 'temp' folder inside it, creating the folder first.\n"
)


def request(*actions: str) -> str:
    """An agent request: fixed rules and task, then the recent actions."""
    lines = "".join(f"{i + 1}. {a} -> ok\n" for i, a in enumerate(actions))
    return f"{RULES}Recent actions:\n{lines}Next call:<|im_end|>\n<|im_start|>assistant\n"


ACTIONS = [
    "cd(folder='document')",
    "mkdir(dir_name='temp')",
    "mv(source='final_report.pdf', destination='temp')",
    "cd(folder='temp')",
    "grep(file_name='final_report.pdf', pattern='budget analysis')",
    "sort(file_name='final_report.pdf')",
]


@pytest.fixture
def clean(engine: Engine) -> Iterator[Engine]:
    engine.clear()
    yield engine
    engine.clear()


def last_pass_logits(engine: Engine, tokens: list[int], start: int) -> np.ndarray:
    items = [BatchToken(t, start + i, (0,), i == len(tokens) - 1) for i, t in enumerate(tokens)]
    return engine.forward(items)[0]


# ---------------------------------------------------------------------- policy (pure)


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix(np.array([5, 6]), [5, 6]) == 2


@given(
    start=st.integers(0, 2000),
    length=st.integers(0, 3000),
    n_batch=st.integers(1, 600),
    cut_at=st.floats(0, 1),
    last_alone=st.booleans(),
)
def test_plan_passes_covers_the_range_in_fewest_even_passes(
    start: int, length: int, n_batch: int, cut_at: float, last_alone: bool
) -> None:
    end = start + length
    cut = start + int(cut_at * length)
    passes = plan_passes(start, end, n_batch, cut=cut, last_alone=last_alone)
    flat = [p for lo, hi in passes for p in range(lo, hi)]
    assert flat == list(range(start, end))
    assert all(0 < hi - lo <= n_batch for lo, hi in passes)
    if start < cut < end:
        assert any(hi == cut for _, hi in passes)
    if last_alone and length > 1:
        assert passes[-1] == (end - 1, end)
    if length and not (start < cut < end) and not last_alone:
        assert len(passes) == -(-length // n_batch)
        sizes = [hi - lo for lo, hi in passes]
        assert max(sizes) - min(sizes) <= 1  # consolidated: no handful-token pass


def test_plan_passes_consolidates_the_tail() -> None:
    assert plan_passes(0, 515, 512) == [(0, 258), (258, 515)]
    assert plan_passes(10, 600, 512, cut=100) == [(10, 100), (100, 600)]
    assert plan_passes(0, 5, 512, last_alone=True) == [(0, 4), (4, 5)]


def test_threshold_follows_the_measured_costs() -> None:
    policy = CheckpointPolicy(min_gap_tokens=1)
    cheap = StoreCosts(prefill_ms_per_token=2.0, save_ms_per_token=0.0, restore_ms_per_token=0.0)
    dear = StoreCosts(prefill_ms_per_token=2.0, save_ms_per_token=0.2, restore_ms_per_token=0.1)
    assert policy.threshold_tokens(cheap, 1000) == 1
    assert policy.threshold_tokens(dear, 1000) == 100  # (200 / 2 + 100) / 2
    assert policy.threshold_tokens(cheap, 1000, extra_passes=1) == 2  # (6 / 2) / 2
    assert CheckpointPolicy().threshold_tokens(cheap, 1000) == 16  # the floor
    kw = {"prompt_len": 900, "costs": cheap}
    assert CheckpointPolicy().should_checkpoint(divergence=500, covered=400, **kw)
    assert not CheckpointPolicy().should_checkpoint(divergence=500, covered=490, **kw)
    assert not CheckpointPolicy().should_checkpoint(divergence=0, covered=0, **kw)


def test_restore_choice_weighs_reuse_against_restore_cost() -> None:
    costs = StoreCosts(prefill_ms_per_token=2.0)
    live = RestoreOption(None, 100)
    assert choose_restore([live, RestoreOption("a", 300, 50.0)], costs).key == "a"
    assert choose_restore([live, RestoreOption("a", 110, 50.0)], costs).key is None


def test_eviction_weighs_recency_and_value_per_byte() -> None:
    costs = StoreCosts()
    old = CheckpointInfo("old", "s", 500, 1000, last_used=1.0)
    new = CheckpointInfo("new", "s", 500, 1000, last_used=3.0)
    bulky = CheckpointInfo("bulky", "s", 500, 100_000, last_used=2.0)
    order = CheckpointPolicy().eviction_order([new, bulky, old], costs)
    assert [e.key for e in order] == ["bulky", "old", "new"]
    only_recency = CheckpointPolicy(value_weight=0.0).eviction_order([new, bulky, old], costs)
    assert [e.key for e in only_recency] == ["old", "bulky", "new"]


# ---------------------------------------------------------------------- store on the model


def test_restored_checkpoint_continues_like_prefill(clean: Engine, tmp_path: Path) -> None:
    eng = clean
    a = eng.tokenize(request(*ACTIONS[:2]))
    b = eng.tokenize(request(*ACTIONS[:3]))
    shared = common_prefix(a, b)
    # Reference: A prefilled in one pass, truncated to the shared prefix, B's rest.
    eng.prefill(0, a, logits_last=False)
    eng.seq_remove(0, shared)
    expected = last_pass_logits(eng, b[shared:], shared)

    with StateStore(tmp_path) as store:
        eng.clear()
        store.prefill(eng, 0, a, session="agent")  # first request: the whole prompt is kept
        assert store.last is not None and store.last.saved_at == len(a)
        eng.clear()  # the live sequence is gone: only the checkpoint can help
        got = store.prefill(eng, 0, b, session="agent")
        assert store.last.source == "memory"
        assert got.reused == shared
        assert np.array_equal(got.logits, expected)

    eng.clear()
    restarted = StateStore(tmp_path)  # a new process over the same directory
    got = restarted.prefill(eng, 0, b, session="agent")
    assert restarted.last is not None and restarted.last.source == "disk"
    assert got.reused == shared
    assert np.array_equal(got.logits, expected)


def test_new_prompt_prefills_only_its_new_tokens(clean: Engine, tmp_path: Path) -> None:
    eng = clean
    store = StateStore(tmp_path, policy=CheckpointPolicy(min_gap_tokens=8))
    prompts = [eng.tokenize(request(*ACTIONS[: k + 1])) for k in range(4)]
    other = eng.tokenize("<|im_start|>user\nSomething else entirely.<|im_end|>\n")
    store.prefill(eng, 0, prompts[0], session="a")
    store.prefill(eng, 0, other, session="b")  # another agent takes the slot
    for prev, cur in itertools.pairwise(prompts):
        before = eng.counters.tokens_processed
        pre = store.prefill(eng, 0, cur, session="a")
        # The slot held the other agent's prompt: this agent's last state came back.
        assert store.last is not None and store.last.source == "memory"
        assert pre.reused == common_prefix(prev, cur)
        assert eng.counters.tokens_processed - before == len(cur) - pre.reused
        store.prefill(eng, 0, other, session="b")
    assert {c.session for c in store.checkpoints(eng)} == {"a", "b"}
    store.close()


def test_consolidated_passes(clean: Engine, tmp_path: Path) -> None:
    eng = clean
    tokens = eng.tokenize(" ".join(f"word{i}" for i in range(400)))[:515]
    assert len(tokens) == 515
    store = StateStore(tmp_path)
    before = len(eng.counters.per_pass_sizes)
    t0 = time.perf_counter()
    store.prefill(eng, 0, tokens, session="s")
    wall_ms = (time.perf_counter() - t0) * 1000
    assert eng.counters.per_pass_sizes[before:] == [258, 257]
    # The record's time covers both passes, the last one (with the prompt's end) too.
    assert store.last is not None and 0.8 * wall_ms < store.last.prompt_ms <= wall_ms
    eng.clear()
    before = len(eng.counters.per_pass_sizes)
    prefill_prompt(eng, 0, tokens)
    assert eng.counters.per_pass_sizes[before:] == [512, 2, 1]


def test_unconsolidated_store_matches_prefill_prompt(clean: Engine) -> None:
    eng = clean
    tokens = eng.tokenize(request(*ACTIONS[:2]))
    expected = prefill_prompt(eng, 0, tokens).logits
    eng.clear()
    got = StateStore(consolidate=False).prefill(eng, 0, tokens)
    assert np.array_equal(got.logits, expected)


def test_eviction_keeps_the_bound(clean: Engine, tmp_path: Path) -> None:
    eng = clean
    store = StateStore(tmp_path, policy=CheckpointPolicy(max_per_session=2, min_gap_tokens=4))
    words = [f"fact{i}" for i in range(60)]
    for k in range(1, 6):  # each request shares ~10 words more with the previous one
        prompt = eng.tokenize(f"{RULES}{' '.join(words[: 10 * k])} end{k}")
        store.prefill(eng, 0, prompt, session="s")
    store.flush()
    kept = store.checkpoints(eng)
    assert len(kept) == 2
    assert len(list(tmp_path.glob("*.twstate"))) == 2
    # The newest survive: the last one covers the longest prefix.
    assert max(c.n_tokens for c in kept) == store.last.divergence  # type: ignore[union-attr]
    assert store.discard(kept[0].key) and not store.discard(kept[0].key)
    store.close()
    assert len(list(tmp_path.glob("*.twstate"))) == 1


def test_checkpoints_of_another_model_are_ignored(clean: Engine, tmp_path: Path) -> None:
    eng = clean
    a = eng.tokenize(request(*ACTIONS[:2]))
    with StateStore(tmp_path) as store:
        store.prefill(eng, 0, a, session="s")
    (path,) = tmp_path.glob("*.twstate")
    payload = path.read_bytes()[read_header(path).offset :]
    path.unlink()
    foreign = tmp_path / f"{state_key('another-model', a)}.twstate"
    write_state_file(foreign, model_id="another-model", session="s", tokens=a, payload=payload)

    (tmp_path / "garbage.twstate").write_bytes(b"not a state file")
    eng.clear()
    other = StateStore(tmp_path)
    assert other.checkpoints(eng) == []
    assert len(other.checkpoints()) == 1  # seen, not ours
    assert not (tmp_path / "garbage.twstate").exists()  # damaged: deleted
    pre = other.prefill(eng, 0, a, session="s")
    assert pre.reused == 0 and other.last is not None and other.last.source == "none"
    other.close()
    assert foreign.is_file()  # never deleted: another process may use it


def test_alternating_prompts_each_come_back_extended(clean: Engine, tmp_path: Path) -> None:
    """An agent session alternates a long tool prompt and a short answer prompt on one
    sequence: before one overwrites the other, the store saves the outgoing state, so
    each prompt starts from its own previous turn instead of from scratch. A sibling
    keeping most of the live prompt is left to the divergence checkpoint."""
    eng = clean
    store = StateStore(tmp_path)
    head = "<|im_start|>system\nAnswer the user briefly.<|im_end|>\n<|im_start|>user\n"
    tools = [eng.tokenize(request(*ACTIONS[:k])) for k in (1, 2, 3)]
    answers = [
        eng.tokenize(f"{head}{' then '.join(ACTIONS[:k])}<|im_end|>\n<|im_start|>assistant\n")
        for k in (1, 2, 3)
    ]
    for k in range(3):
        for prompts in (tools, answers):
            store.prefill(eng, 0, prompts[k], session="agent")
            rec = store.last
            assert rec is not None
            if k == 0:
                continue
            shared = common_prefix(prompts[k - 1], prompts[k])
            live = common_prefix(tools[k], answers[k])  # all the live sequence offers
            assert shared > live + 10
            assert (rec.reused, rec.source) == (shared, "memory"), rec
    sibling = eng.tokenize(request(*ACTIONS[:2]) + "Think first.")
    store.prefill(eng, 0, eng.tokenize(request(*ACTIONS[:2])), session="agent")
    store.prefill(eng, 0, sibling, session="agent")
    assert store.last is not None and store.last.handover_ms == 0.0
    store.close()
