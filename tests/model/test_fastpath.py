"""`fast` and `lossless` on the real SmolLM2 model.

`lossless` must equal `jump` token for token: both run the same greedy loop under the
same grammar; lossless only gets its logits from verification passes over parallel
drafts. On the default engine (every pass on all cores) a batched row may differ from the
serial step of the same token by up to the measured logit bound, so lossless decides a
choice from a row only past twice the bound and otherwise on `jump`'s own pass
(`native/decode/verify.py`, `native/decode/reference.py`); on the exact engine
(`batch_invariant=True`) the two are bit-identical, which the first test pins down.
The tests force parallel drafting (`parallel_values=True`); by default the cost table
decides, and on this 2-core CPU it decides against it (`native/values.parallel_pays`).
"""

from __future__ import annotations

import numpy as np
import pytest
from reference_check import assert_same_tokens

from toolweave.native.caller import ToolCaller
from toolweave.native.engine import BatchToken, Engine
from toolweave.toolspec import ToolSpec

EXTRA_TOOLS = [
    {
        "name": "record_measurement",
        "description": "Record a signed measurement with a label.",
        "parameters": {
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "value": {"type": "number"},
                "offset": {"type": "integer"},
                "verified": {"type": "boolean"},
                "unit": {"type": "string", "enum": ["C", "F", "K"]},
            },
            "required": ["label", "value", "offset", "verified"],
        },
    },
    {
        "name": "store_quote",
        "description": "Store a quotation exactly as given, with its author.",
        "parameters": {
            "type": "object",
            "properties": {"quote": {"type": "string"}, "author": {"type": "string"}},
            "required": ["quote", "author"],
        },
    },
]

EXTRA_QUERIES = [
    ("record_measurement", "Record the outside temperature as -3.5 with offset -2, verified."),
    ("record_measurement", "Log pressure 1013.25, offset 0, not verified, label it 'baro'."),
    ("store_quote", 'Store the quote "C\'est la vie \\ said "she"" by Édith Piaf.'),
    ("store_quote", "Save the line 東京は大きい by 田中, with a tab\there."),
]


#: The assistant tools whose first query the SmolLM2 loops decode (the four extra queries
#: are always in): arrays, objects, numbers, booleans, enums, optional arguments, a tool
#: without arguments and a long free-text value, in a fifth of the time of all 40 queries.
#: `lossless` is also compared with `jump` on BFCL's parallel categories
#: (test_forecast.py), on Gemma (test_margin_rule.py) and on the zoo's Q4_K models.
COVERED = (
    "create_calendar_event",
    "create_note",
    "search_flights",
    "control_lights",
    "stop_music",
    "set_reminder",
)
#: Output tokens per call: every call of the 135M model that ends, ends well within it.
MAX_TOKENS = 96


def _cases(
    tools: tuple[ToolSpec, ...], queries: list[dict[str, str]], covered: tuple[str, ...] = ()
) -> list[tuple[ToolSpec, str]]:
    """(tool, query) pairs: the first query of each tool in `covered` (of every tool when
    it is empty), then the extra queries."""
    by_name = {t.name: t for t in tools}
    extra = {t["name"]: ToolSpec.from_dict(t) for t in EXTRA_TOOLS}
    cases, seen = [], set()
    for q in queries:
        name = q["tool"]
        if name in by_name and (not covered or (name in covered and name not in seen)):
            cases.append((by_name[name], q["query"]))
            seen.add(name)
    return cases + [(extra[name], query) for name, query in EXTRA_QUERIES]


def test_multi_token_pass_is_bit_identical_to_serial_steps_beyond_256_cells(
    exact_engine: Engine,
) -> None:
    engine = exact_engine
    tokens = engine.tokenize("<|im_start|>user\n" + "sea " * 400 + "<|im_end|>\n")
    engine.clear()
    logits = engine.prefill(0, tokens)
    assert logits is not None and len(tokens) > 300
    serial, rows_serial = [], []
    for i in range(8):
        tok = int(np.argmax(logits))
        serial.append(tok)
        logits = engine.forward([BatchToken(tok, len(tokens) + i, (0,), True)])[0]
        rows_serial.append(logits)
    engine.seq_remove(0, len(tokens))
    rows = engine.forward(
        [BatchToken(t, len(tokens) + i, (0,), True) for i, t in enumerate(serial)]
    )
    assert all(np.array_equal(a, b) for a, b in zip(rows, rows_serial, strict=True))
    engine.clear()


@pytest.mark.slow
def test_lossless_equals_jump_token_for_token(
    engine: Engine, assistant_tools: tuple[ToolSpec, ...], tool_queries: list[dict[str, str]]
) -> None:
    cases = _cases(assistant_tools, tool_queries, COVERED)
    assert len(cases) == len(COVERED) + len(EXTRA_QUERIES)
    verified = 0
    for spec, query in cases:
        caller = ToolCaller(engine, [spec], max_tokens=MAX_TOKENS, parallel_values=True)
        jump = caller.call(query, "jump")
        lossless = caller.call(query, "lossless")
        assert_same_tokens(jump.tokens, lossless, (spec.name, query, jump.text, lossless.text))
        verified += lossless.stats.accepted_tokens
    assert verified > 0  # the drafts were really verified and used


@pytest.mark.slow
def test_fast_calls_validate_and_use_fewer_passes(
    engine: Engine, assistant_tools: tuple[ToolSpec, ...], tool_queries: list[dict[str, str]]
) -> None:
    cases = _cases(assistant_tools, tool_queries, COVERED)
    fewer = finished = 0
    for spec, query in cases:
        caller = ToolCaller(engine, [spec], max_tokens=MAX_TOKENS, parallel_values=True)
        fast = caller.call(query, "fast")
        if fast.finish_reason == "length":
            continue  # a 135M model may loop inside a long string; truncation is reported
        finished += 1
        assert not fast.invalid, (spec.name, fast.text, fast.invalid)
        for call in fast.calls:
            spec.validate_call(call.arguments)
        constrained = caller.call(query, "constrained")
        fewer += fast.stats.decode_passes < constrained.stats.decode_passes
    assert finished >= len(cases) // 2 and fewer >= finished * 0.8


def test_provisional_call_only_for_read_only_tools(
    engine: Engine, assistant_tools: tuple[ToolSpec, ...], tool_queries: list[dict[str, str]]
) -> None:
    weather = next(t for t in assistant_tools if t.name == "get_current_weather")
    assert weather.optional
    query = next(q["query"] for q in tool_queries if q["tool"] == weather.name)
    for read_only in (True, False):
        caller = ToolCaller(engine, [weather.with_read_only(read_only)], max_tokens=200)
        kinds = [ev.kind for ev in caller.events(query, "fast")]
        if read_only:
            assert "provisional" in kinds
            assert kinds.index("provisional") < kinds.index("call")
        else:
            assert "provisional" not in kinds


@pytest.mark.parametrize("mode", ["fast", "lossless"])
def test_value_that_never_ends_falls_back_cleanly(engine: Engine, mode: str) -> None:
    spec = ToolSpec.from_dict(
        {
            "name": "echo",
            "description": "Repeat the text.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["a", "b"],
            },
        }
    )
    caller = ToolCaller(engine, [spec], max_tokens=24, parallel_values=True)
    result = caller.call("Repeat 'la' forever, " + "la " * 60, mode)
    assert result.finish_reason in ("stop", "length")
    if result.finish_reason == "length":
        assert result.invalid  # truncation is reported, never a hang or a crash
    follow = caller.call("Echo a=x and b=y", "jump")  # the engine is still usable
    assert follow.finish_reason in ("stop", "length")
