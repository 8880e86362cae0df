"""A reply cut at max_tokens inside a later call keeps the calls it finished (real
SmolLM2, parallel BFCL requests): nothing complete is lost with the cut one."""

from __future__ import annotations

import pytest

from toolweave.eval.bfcl import sample_cases
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["constrained", "lossless"])
def test_a_cut_reply_keeps_its_finished_calls(engine: Engine, mode: str) -> None:
    checked = 0
    for case in sample_cases(("parallel",), 3, seed=3):
        request = [dict(m) for m in case.messages]
        caller = ToolCaller(engine, case.tools, max_calls=None, max_tokens=160)
        full = caller.call(request, mode)
        if len(full.calls) < 2 or full.finish_reason != "stop":
            continue
        # Cut after the first call's text, closed, is complete: inside the next one...
        close = caller.fmt.close or "}"
        end = next(
            i
            for i in range(1, len(full.tokens) + 1)
            if (text := engine.detokenize(full.tokens[:i])).rstrip().endswith(close)
            and caller.validate_text(text)[0]
        )
        # ... where the text no longer parses (the format's own reading loses the call).
        at = next(
            (
                i
                for i in range(end + 1, len(full.tokens))
                if not caller.validate_text(engine.detokenize(full.tokens[:i]))[0]
            ),
            None,
        )
        if at is None:
            continue
        cut = ToolCaller(engine, case.tools, max_calls=None, max_tokens=at)
        result = cut.call(request, mode)
        assert result.finish_reason == "length", (case.id, result.text)
        assert list(result.calls[:1]) == [full.calls[0]], (case.id, result.text)
        assert len(result.calls) < len(full.calls)
        assert any("truncated" in i.error for i in result.invalid)
        checked += 1
    assert checked >= 1  # some request gave two calls to cut between
