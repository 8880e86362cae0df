"""The engine on the real SmolLM2 model: batching, sequences, states, errors.

On the exact engine (`batch_invariant=True`) SmolLM2 (Q4_1) gives bit-identical logits
whether a token is computed alone, in a multi-sequence pass or in a multi-token pass, so
the tests of that property compare greedy tokens exactly on it (no tolerance); the
default engine and Gemma 3 (Q4_K) do not: see docs/architecture.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cancel_flag import SetAfter

from toolweave.errors import ContextFullError, EngineError, ModelError, SequenceError
from toolweave.models import default_model_path
from toolweave.native.concurrency import DecodeCancelledError, cancel_scope
from toolweave.native.engine import MAX_PASS_SIZES, BatchToken, Engine, EngineCounters

PROMPTS = [
    "<|im_start|>user\nWrite a poem about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nList three fruits.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nTranslate 'hello' to German.<|im_end|>\n<|im_start|>assistant\n",
]
STEPS = 16


def greedy_alone(engine: Engine, seq: int, prompt: str, steps: int) -> list[int]:
    tokens = engine.tokenize(prompt)
    engine.seq_remove(seq)
    logits = engine.prefill(seq, tokens)
    assert logits is not None
    pos, out = len(tokens), []
    for _ in range(steps):
        tok = int(np.argmax(logits))
        out.append(tok)
        logits = engine.forward([BatchToken(tok, pos, (seq,), True)])[0]
        pos += 1
    return out


def test_multi_sequence_pass_matches_single_sequences(exact_engine: Engine) -> None:
    alone = [greedy_alone(exact_engine, 0, p, STEPS) for p in PROMPTS]
    exact_engine.clear()
    toks = [exact_engine.tokenize(p) for p in PROMPTS]
    last = []
    for i, t in enumerate(toks):
        row = exact_engine.prefill(i, t)
        assert row is not None
        last.append(row)
    pos = [len(t) for t in toks]
    outs: list[list[int]] = [[] for _ in PROMPTS]
    passes0 = exact_engine.counters.forward_passes
    for _ in range(STEPS):
        items = []
        for i in range(len(PROMPTS)):
            tok = int(np.argmax(last[i]))
            outs[i].append(tok)
            items.append(BatchToken(tok, pos[i], (i,), True))
            pos[i] += 1
        last = list(exact_engine.forward(items))
    assert exact_engine.counters.forward_passes - passes0 == STEPS
    assert outs == alone
    exact_engine.clear()


def test_verification_pass_matches_serial_steps(exact_engine: Engine) -> None:
    tokens = exact_engine.tokenize(PROMPTS[0])
    out = greedy_alone(exact_engine, 0, PROMPTS[0], 8)
    exact_engine.seq_remove(0, len(tokens))
    rows = exact_engine.forward(
        [BatchToken(t, len(tokens) + j, (0,), True) for j, t in enumerate(out)]
    )
    assert [int(np.argmax(r)) for r in rows[:-1]] == out[1:]
    exact_engine.clear()


def test_state_bytes_restore_continues_identically(engine: Engine) -> None:
    tokens = engine.tokenize(PROMPTS[1])
    engine.clear()
    engine.prefill(0, tokens[:-1], logits_last=False)
    state = engine.state_get(0)
    assert len(state) > 0
    expected = greedy_alone(engine, 0, PROMPTS[1], 12)
    engine.clear()
    engine.state_set(3, state)
    assert engine.seq_len(3) == len(tokens) - 1
    logits = engine.forward([BatchToken(tokens[-1], len(tokens) - 1, (3,), True)])[0]
    pos, got = len(tokens), []
    for _ in range(12):
        tok = int(np.argmax(logits))
        got.append(tok)
        logits = engine.forward([BatchToken(tok, pos, (3,), True)])[0]
        pos += 1
    assert got == expected
    engine.clear()


def test_state_file_round_trip(exact_engine: Engine, tmp_path: Path) -> None:
    tokens = exact_engine.tokenize(PROMPTS[2])
    exact_engine.clear()
    logits = exact_engine.prefill(0, tokens)
    assert logits is not None
    path = tmp_path / "seq.state"
    assert exact_engine.state_save_file(0, path, tokens) > 0
    exact_engine.clear()
    assert exact_engine.state_load_file(5, path) == tokens
    assert exact_engine.seq_len(5) == len(tokens)
    # The restored sequence continues exactly as the original.
    exact_engine.seq_copy(5, 6)
    row = exact_engine.forward([BatchToken(int(np.argmax(logits)), len(tokens), (6,), True)])[0]
    exact_engine.clear()
    ref = exact_engine.prefill(0, [*tokens, int(np.argmax(logits))])
    assert ref is not None
    assert int(np.argmax(row)) == int(np.argmax(ref))
    exact_engine.clear()


def test_sequence_copy_shares_prefix(engine: Engine) -> None:
    tokens = engine.tokenize(PROMPTS[3])
    engine.clear()
    engine.prefill(0, tokens, logits_last=False)
    engine.seq_copy(0, 1)
    engine.seq_copy(0, 2, 0, 5)
    assert engine.seq_len(1) == len(tokens)
    assert engine.seq_len(2) == 5
    engine.seq_keep(1)
    assert engine.seq_len(0) == 0 and engine.seq_len(1) == len(tokens)
    engine.clear()


def test_engine_errors_are_clear(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(SequenceError):
        engine.seq_len(engine.n_seq_max)
    with pytest.raises(SequenceError):
        engine.forward([BatchToken(1, 0, (99,), True)])
    with pytest.raises(ContextFullError):
        engine.forward([BatchToken(1, engine.n_ctx, (0,), True)])
    with pytest.raises(ContextFullError):
        engine.prefill(0, [1] * (engine.n_ctx + 1))
    with pytest.raises(EngineError):
        engine.forward([BatchToken(engine.n_vocab + 5, 0, (0,), True)])
    with pytest.raises(EngineError):
        engine.forward([])
    with pytest.raises(ModelError):
        Engine(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ModelError):
        Engine(bad)
    engine.clear()


def test_closed_engine_refuses_work() -> None:
    eng = Engine(default_model_path(), n_ctx=256, n_seq_max=2)
    eng.close()
    eng.close()  # idempotent
    with pytest.raises(EngineError):
        eng.forward([BatchToken(1, 0, (0,), True)])
    # The vocabulary is gone with the model: a clear error, not a read of freed memory.
    for read in (lambda: eng.tokenize("hi"), lambda: eng.token_bytes(5), lambda: eng.is_eog(5)):
        with pytest.raises(EngineError, match="closed"):
            read()


def test_prefill_cancelled_between_chunks_leaves_the_sequence_as_it_was() -> None:
    with Engine(default_model_path(), n_ctx=256, n_seq_max=2, n_batch=16) as eng:
        tokens = eng.tokenize(PROMPTS[0] * 3)
        assert len(tokens) > 5 + 32
        eng.prefill(0, tokens[:5])
        passes = eng.counters.forward_passes
        with cancel_scope(SetAfter(3)), pytest.raises(DecodeCancelledError):
            eng.prefill(0, tokens[5:])  # two 16-token chunks run, the third is cancelled
        assert eng.counters.forward_passes - passes == 2
        assert eng.seq_len(0) == 5
        assert eng.prefill(0, tokens[5:]) is not None  # and it continues from there


def test_pass_sizes_are_bounded() -> None:
    counters = EngineCounters()
    for _ in range(MAX_PASS_SIZES + 10):
        counters.record(3, 1)
    assert len(counters.per_pass_sizes) == MAX_PASS_SIZES
    assert counters.forward_passes == MAX_PASS_SIZES + 10


def test_tokenize_round_trip(engine: Engine) -> None:
    text = 'Zürich "quoted" \\ back 東京 -3.5e2'
    assert engine.detokenize(engine.tokenize(text)) == text
