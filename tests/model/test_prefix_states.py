"""PromptWeaver's stored prefix states on the real SmolLM2 model.

A restored prefix must continue exactly as the same tokens prefilled now. Logits are
compared exactly, so both sides run the same passes from a cleared engine (on this CPU
build a row's value depends on the shape of the pass that computed it): the only
difference is where the prefix's KV state came from. (Prefilling the whole prompt in
one pass instead splits the work differently; its greedy output can differ where two
tokens are nearly tied, as it does for any change of pass boundaries on this build.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from toolweave.adapters.bench.pipeline_stages import render_tokens
from toolweave.models import default_model_path
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.states.prefixes import PrefixStates
from toolweave.plan.prompts import planner_messages
from toolweave.toolspec import ToolSpec

TOOLS = (
    ToolSpec.from_dict(
        {
            "name": "get_weather",
            "description": "Current weather of a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ),
    ToolSpec.from_dict(
        {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                "required": ["to", "body"],
            },
        }
    ),
)
EXAMPLES = [
    ("What is the weather in Rome?", '1. get_weather(city="Rome")\n2. join()'),
    ("Email Bob to say hi.", '1. send_email(to="Bob", body="hi")\n2. join()'),
]
QUERIES = ["What's the weather in Oslo and in Lima?", "Tell Ann by email that I'm late."]


@pytest.fixture(scope="module")
def eng() -> Iterator[Engine]:
    with Engine(default_model_path(), n_ctx=2048, n_seq_max=4) as engine:
        yield engine


def prompt(engine: Engine, query: str) -> list[int]:
    return render_tokens(engine, planner_messages(TOOLS, query, examples=EXAMPLES))


def static_prefix(engine: Engine) -> list[int]:
    return render_tokens(engine, planner_messages(TOOLS, "")[:1], generation=False)


def combo_prefix(engine: Engine) -> list[int]:
    msgs = planner_messages(TOOLS, "", examples=EXAMPLES)[:-1]
    return render_tokens(engine, msgs, generation=False)


def greedy(engine: Engine, seq: int, tokens: list[int], start: int, n: int) -> list[int]:
    """Prefill tokens[start:] after the cached tokens[:start], then decode n tokens."""
    logits = engine.prefill(seq, tokens[start:], start=start)
    assert logits is not None
    out = [int(np.argmax(logits))]
    pos = len(tokens)
    while len(out) < n:
        row = engine.forward([BatchToken(out[-1], pos, (seq,), True)])[0]
        out.append(int(np.argmax(row)))
        pos += 1
    return out


def test_prefixes_are_token_prefixes_of_the_prompt(eng: Engine) -> None:
    full = prompt(eng, QUERIES[0])
    for prefix in (static_prefix(eng), combo_prefix(eng)):
        assert full[: len(prefix)] == prefix


def test_restored_prefix_continues_exactly_like_prefilling_it(eng: Engine, tmp_path: Path) -> None:
    states = PrefixStates(tmp_path, eng)
    prefix = combo_prefix(eng)
    eng.clear()
    states.build([("combo", prefix)], seq=1)
    for query in QUERIES:
        full = prompt(eng, query)
        eng.clear()
        got = states.restore(0, full)
        assert got.tokens == len(prefix) and got.entry is not None
        restored = greedy(eng, 0, full, len(prefix), 24)
        restored_logits = eng.forward([BatchToken(restored[-1], len(full) + 23, (0,), True)])[0]
        eng.clear()  # the same passes, the prefix prefilled now
        eng.prefill(0, prefix, start=0, logits_last=False)
        fresh = greedy(eng, 0, full, len(prefix), 24)
        fresh_logits = eng.forward([BatchToken(fresh[-1], len(full) + 23, (0,), True)])[0]
        assert restored == fresh
        assert np.array_equal(restored_logits, fresh_logits)


def test_longest_stored_prefix_wins_and_survives_a_restart(eng: Engine, tmp_path: Path) -> None:
    short, long = static_prefix(eng), combo_prefix(eng)
    eng.clear()
    built = PrefixStates(tmp_path, eng).build([("combo", long), ("static", short)], seq=1)
    assert [e.n_tokens for e in built] == [len(long), len(short)]
    again = PrefixStates(tmp_path, eng)  # a new process reads the index from disk
    assert {e.n_tokens for e in again.entries} == {len(short), len(long)}
    full = prompt(eng, QUERIES[1])
    eng.clear()
    assert again.restore(0, full).tokens == len(long)
    assert eng.seq_tokens[0] == long
    assert again.restore(0, full).tokens == 0  # already holds it: nothing loaded
    again.select({built[1].digest})  # a smaller budget: only the static prefix
    eng.clear()
    assert again.restore(0, full).tokens == len(short)
    other = render_tokens(eng, [("system", "Something else entirely.")], generation=False)
    eng.clear()
    assert again.restore(0, other + full).tokens == 0


def test_a_damaged_state_file_is_skipped_and_rebuilt(
    eng: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    states = PrefixStates(tmp_path, eng)
    prefix = static_prefix(eng)
    eng.clear()
    (entry,) = states.build([("static", prefix)], seq=1)
    path = states.root / entry.file
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # a flipped byte in the KV payload
    path.write_bytes(bytes(data))
    (states.root / f"{'0' * 32}.twstate").write_bytes(b"\x01\x02\x03\x04\x05")
    eng.clear()
    full = prompt(eng, QUERIES[0])
    with caplog.at_level(logging.WARNING, "toolweave.states"):
        assert PrefixStates(tmp_path, eng).entries == [entry]  # the 5-byte file: deleted
        assert states.restore(0, full).tokens == 0  # the flipped byte: not loaded
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.WARNING]
    assert all("\n" not in r.getMessage() for r in caplog.records)
    assert eng.seq_tokens[0] == [] and states.entries == []
    assert sorted(p.name for p in states.root.iterdir()) == []
    eng.clear()
    states.build([("static", prefix)], seq=1)  # rebuilt
    eng.clear()
    assert states.restore(0, full).tokens == len(prefix)
