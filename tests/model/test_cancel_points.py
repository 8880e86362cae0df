"""A tool call cancelled at any forward pass leaves the engine as a new request needs it.

The request is cancelled at its 1st, 2nd, ... pass until it runs to the end, in the
drafting modes, on a read-only tool with two required values and an optional one (so
`fast` and `lossless` draft the values on branch sequences for a provisional call).
After every cancellation no other sequence holds a cell, the request's sequence holds
exactly its recorded tokens (the prompt cache can be trusted), and the next request,
reusing that cache, gives the calls of an uncancelled one.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from cancel_flag import SetAfter
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.native.caller import ToolCaller
from toolweave.native.concurrency import DecodeCancelledError, cancel_scope
from toolweave.native.engine import Engine
from toolweave.native.states.store import StateStore
from toolweave.toolspec import ToolSpec

FLIGHT = ToolSpec.from_dict(
    {
        "name": "find_flights",
        "description": "List the flights between two cities.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "destination": {"type": "string"},
                "seat": {"type": "string", "enum": ["window", "aisle"]},
            },
            "required": ["origin", "destination"],
        },
    }
).with_read_only(True)  # read-only, with an optional value: its values are drafted
QUERY = "Find me a flight from Paris to Tokyo."
T = TypeVar("T")
#: More passes than any of these calls takes (a bound on the loop, not a figure).
MAX_PASSES = 200


def calls(engine: Engine, mode: str) -> list[dict[str, Any]]:
    """The calls of a new caller (one that has learned no value lengths yet, so its first
    call takes the same passes every time)."""
    caller = ToolCaller(engine, [FLIGHT], max_tokens=48)
    return [c.to_dict() for c in caller.call(QUERY, mode).calls]


def cancelled_at(engine: Engine, request: Callable[[], T], n: int) -> T | None:
    """`request()` cancelled at its `n`-th pass: None, after checking what it left behind;
    or its result if it ended first."""
    try:
        with cancel_scope(SetAfter(n)):
            return request()
    except DecodeCancelledError:
        assert_clean(engine, 0)
        return None


def assert_clean(engine: Engine, seq: int) -> None:
    held = [s for s in range(engine.n_seq_max) if s != seq and engine.seq_len(s)]
    assert held == [], f"sequences {held} still hold cells"
    assert engine.seq_len(seq) == len(engine.seq_tokens.get(seq, []))


@pytest.mark.parametrize("mode", ["lossless", "fast"])  # the modes that borrow sequences
def test_a_call_cancelled_at_any_pass_leaves_nothing_behind(engine: Engine, mode: str) -> None:
    engine.clear()
    reference = calls(engine, mode)
    assert reference and reference[0]["name"] == "find_flights"
    cancelled = 0
    for n in range(1, MAX_PASSES):
        # Cold, then with whatever the cancelled attempt left cached (its prompt, or part
        # of it): the same pass number falls at a different step of the request.
        engine.clear()
        request = partial(calls, engine, mode)
        outcomes = [cancelled_at(engine, request, n), cancelled_at(engine, request, n)]
        cancelled += outcomes.count(None)
        for got in outcomes:
            assert got is None or got == reference
        if outcomes == [reference, reference]:
            break
    else:
        pytest.fail(f"still cancelled after {MAX_PASSES} passes")
    assert cancelled >= 5
    assert_clean(engine, 0)
    assert calls(engine, mode) == reference


# -- ChatToolweave: an agent's later turn, with the prompt-state store -----------------------


def answer(message: AIMessage) -> tuple[Any, list[tuple[str, Any]]]:
    return message.content, [(c["name"], c["args"]) for c in message.tool_calls]


def test_a_chat_turn_cancelled_at_any_pass_leaves_nothing_behind(tmp_path: Path) -> None:
    """A later turn of an agent (a tool result to answer, the next call to make), its
    prompt restored from the state store, cancelled at every pass: the engine stays
    clean and the next turn answers as an uncancelled one."""
    model = ChatToolweave(
        n_ctx=2048, max_tokens=32, state_store=StateStore(tmp_path), private_engine=True
    )
    try:
        bound = model.bind_tools([FLIGHT.to_dict()])
        first = model.bind_tools([FLIGHT.to_dict()], tool_choice="any").invoke(QUERY)
        assert first.tool_calls, first
        history: list[BaseMessage] = [
            HumanMessage(QUERY),
            first,
            ToolMessage("AF276 at 23:25, NH216 at 21:55.", tool_call_id=first.tool_calls[0]["id"]),
            HumanMessage("And from Tokyo back to Paris?"),
        ]
        engine = model.engine
        reference = bound.invoke(history)
        turns = 0
        for n in range(1, MAX_PASSES):
            got = cancelled_at(engine, partial(bound.invoke, history), n)
            if got is None:
                turns += 1
                continue
            assert answer(got) == answer(reference)
            break
        else:
            pytest.fail(f"still cancelled after {MAX_PASSES} passes")
        assert turns >= 8, turns  # prefill, the call's passes and its drafts
    finally:
        model.close_engine()
