"""The llguidance vocabulary of an engine lives and dies with that engine."""

from __future__ import annotations

import gc

from toolweave.models import resolve_model
from toolweave.native.constraints import vocabulary_for
from toolweave.native.engine import Engine


def test_an_engine_never_gets_the_vocabulary_of_a_closed_one() -> None:
    # Engines made and closed one after the other often reuse a dead engine's address.
    # Its tokenizer calls llama.cpp on the vocabulary it was built from, freed with its
    # engine: every engine must get one built from its own.
    model = resolve_model(None)
    for _ in range(10):
        engine = Engine(model, n_ctx=256, n_seq_max=1)
        vocab = vocabulary_for(engine)
        assert vocab.engine() is engine
        assert vocabulary_for(engine) is vocab  # built once per engine
        matcher = vocab.matcher('start: "yes" | "no"')
        assert matcher.forced() == []
        assert matcher.mask().sum() >= 2
        engine.close()
        del engine, vocab, matcher
        gc.collect()
