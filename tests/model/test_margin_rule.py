"""The margin rule on Gemma 3 270M Q4_K_M, whose batched rows differ from its serial steps
on every engine setting (K-quant kernels): verified drafts still write exactly what the
plain decoders write.

`lossless` against `jump` (parallel value drafts forced, so every call verifies some) and
ExSpec against plain greedy text decoding, on the default engine (every pass on all
cores). The same comparisons on SmolLM2 are in test_fastpath.py and test_exspec.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from reference_check import assert_same_tokens
from test_exspec import CASES, COSTS, MAX_TOKENS, Case, finish, prompt_tokens, table_for
from test_fastpath import _cases

from toolweave.errors import ModelError
from toolweave.models import resolve_model
from toolweave.native.caller import ToolCaller
from toolweave.native.decode.exspec import generate_with_exspec
from toolweave.native.decode.text import generate_text
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolSpec

#: Assistant calls compared (each one jump and one lossless decode on Gemma).
CALLS = 6


@pytest.fixture(scope="module")
def gemma() -> Iterator[Engine]:
    try:
        path = resolve_model("gemma3")
    except ModelError as exc:  # the test extra installs it; say so where it is missing
        pytest.skip(str(exc))
    with Engine(path, n_ctx=8192, n_seq_max=16) as eng:
        yield eng


def test_gemma_rows_differ_from_serial_steps(gemma: Engine) -> None:
    from toolweave.native.numerics import engine_bound

    assert not gemma.batch_invariant and engine_bound(gemma).max_delta > 0


@pytest.mark.slow
def test_lossless_equals_jump_on_gemma(
    gemma: Engine, assistant_tools: tuple[ToolSpec, ...], tool_queries: list[dict[str, str]]
) -> None:
    cases = _cases(assistant_tools, tool_queries)
    step = max(1, len(cases) // CALLS)
    verified = ties = 0
    for spec, query in cases[::step][:CALLS]:
        caller = ToolCaller(gemma, [spec], max_tokens=96, parallel_values=True)
        jump = caller.call(query, "jump")
        lossless = caller.call(query, "lossless")
        assert_same_tokens(jump.tokens, lossless, (spec.name, query, jump.text, lossless.text))
        assert lossless.stats.logit_bound is not None and lossless.stats.logit_bound > 0
        verified += lossless.stats.accepted_tokens
        ties += len(lossless.stats.near_ties)
    assert verified > 0  # drafts were verified and used
    assert ties > 0  # and some positions were too close for a batched row to decide


@pytest.mark.parametrize("case", CASES[:4], ids=[c.name for c in CASES[:4]])
def test_exspec_equals_greedy_on_gemma(gemma: Engine, case: Case) -> None:
    prompt = prompt_tokens(gemma, case)
    table = table_for(gemma, case)
    _, plain = finish(generate_text(gemma, prompt, max_tokens=MAX_TOKENS))
    _, fast = finish(
        generate_with_exspec(gemma, prompt, table=table, max_tokens=MAX_TOKENS, costs=COSTS)
    )
    assert_same_tokens(plain.tokens, fast, (plain.text, fast.text))
