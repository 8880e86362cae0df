"""On the exact engine every mode but `fast` writes `constrained`'s tokens.

`jump` prefills forced tokens in one pass with the next step and `lossless` verifies
drafts in batched passes; on the default engine a token's logits depend slightly on the
shape of the pass that computed them, so a near tie can go the other way (the session
benchmark's "same calls as constrained"). On `Engine(batch_invariant=True)` they do not
(SmolLM2 Q4_1), and the three modes must agree token for token on real prompts: the
first BFCL multi-turn session's requests, each offered its session's 8 tools, the
prompts `toolweave bench session` decodes. `ChatToolweave(batch_invariant=True)` builds
its engine that way.
"""

from __future__ import annotations

import pytest

from toolweave.adapters.bench.session_run import conversations
from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.eval.bfcl_data import DatasetError
from toolweave.eval.bfcl_multi_turn import load_multi_turn
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolSpec


def _session_requests() -> list[tuple[str, list[ToolSpec], str]]:
    try:
        convs = conversations(1, 0, 3, 8)
        cases = {c.id: c for c in load_multi_turn("multi_turn_base")}
    except DatasetError as exc:  # pragma: no cover - only without the package index
        pytest.skip(f"the BFCL data could not be had: {exc}")
    out = []
    for conv in convs:
        by_name = {t.name: t for t in cases[conv.id].tools}
        specs = [by_name[n] for n in conv.tools]
        out += [(conv.id, specs, turn) for turn in conv.turns]
    return out


@pytest.mark.slow
def test_jump_and_lossless_equal_constrained_on_the_exact_engine(exact_engine: Engine) -> None:
    requests = _session_requests()
    assert len(requests) == 3
    calls = 0
    for conv_id, specs, request in requests:
        assert len(specs) >= 8
        caller = ToolCaller(exact_engine, specs, max_tokens=48)
        reference = caller.call(request, "constrained")
        calls += len(reference.calls)
        results = {mode: caller.call(request, mode) for mode in ("jump", "lossless")}
        for mode, result in results.items():
            assert result.tokens == reference.tokens, (conv_id, mode, result.text, reference.text)
        # The shortcut did work: jump decoded fewer tokens than constrained.
        assert results["jump"].stats.decoded_tokens < reference.stats.decoded_tokens
    assert calls >= 3  # real tool calls, not empty answers, were compared


def test_chat_model_builds_the_exact_engine() -> None:
    chat = ChatToolweave(n_ctx=512, batch_invariant=True, private_engine=True)
    try:
        assert chat.engine.batch_invariant
        assert chat.engine.n_threads == 1
    finally:
        chat.close_engine()
