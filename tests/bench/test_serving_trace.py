"""The replay trace built from BFCL v4 multi-turn conversations (pure, no model)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from toolweave.eval.bfcl_data import DatasetError
from toolweave.eval.bfcl_multi_turn import MultiTurnCase, load_multi_turn
from toolweave.eval.serving_trace import (
    DEFAULT_RULES,
    agent_messages,
    conversation_steps,
    render_trace,
    replay_trace,
    tool_catalogue,
)
from toolweave.prompting.chat_template import CHATML_TEMPLATE


@pytest.fixture(scope="module")
def cases() -> Sequence[MultiTurnCase]:
    try:
        return list(load_multi_turn("multi_turn_base"))[:6]
    except DatasetError as exc:  # only when the data cannot be fetched at all
        pytest.skip(f"BFCL data unavailable: {exc}")


def test_one_step_per_ground_truth_call(cases: Sequence[MultiTurnCase]) -> None:
    case = cases[0]
    steps = conversation_steps(case)
    expected = [call for turn in case.ground_truth for call in turn]
    assert [s.expected for s in steps] == expected
    assert [s.action for s in steps] == list(range(len(expected)))
    assert {s.session for s in steps} == {case.id}
    assert [s.turn for s in steps] == sorted(s.turn for s in steps)


def test_rules_and_tools_stay_the_window_slides(cases: Sequence[MultiTurnCase]) -> None:
    case = cases[0]
    steps = conversation_steps(case, window=2)
    systems = {s.messages[0]["content"] for s in steps}
    assert len(systems) == 1  # rules and tools fixed (no held-out tools in base)
    (system,) = systems
    assert system.startswith(DEFAULT_RULES)
    assert tool_catalogue(case.tools) in system
    for s in steps:
        user = s.messages[1]["content"]
        shown = [line for line in user.splitlines() if ") -> " in line]
        numbers = [int(line.split(".", 1)[0]) for line in shown]
        assert numbers == list(range(max(1, s.action - 1), s.action + 1))  # the last two
        for number, line in zip(numbers, shown, strict=True):
            assert line.startswith(f"{number}. {steps[number - 1].expected.name}(")
        requests = [m["content"] for t in case.turns[: s.turn + 1] for m in t]
        assert all(r in user for r in requests)


def test_trace_is_deterministic_and_interleaves_agents(cases: Sequence[MultiTurnCase]) -> None:
    a = replay_trace(cases, steps=12, interleave=2)
    b = replay_trace(cases, steps=12, interleave=2)
    assert a == b
    assert len(a) == 12
    sessions = [s.session for s in a]
    assert sessions[0] != sessions[1]
    assert sessions[0] == sessions[2]
    sequential = replay_trace(cases)
    assert len(sequential) == sum(len(t) for c in cases for t in c.ground_truth)
    assert [s.session for s in sequential] == sorted(
        (s.session for s in sequential), key=[c.id for c in cases].index
    )


def test_rendered_with_the_chat_template(cases: Sequence[MultiTurnCase]) -> None:
    steps = replay_trace(cases, steps=3)
    texts = render_trace(steps, CHATML_TEMPLATE)
    assert len(texts) == 3
    assert all(t.startswith("<|im_start|>system\n" + DEFAULT_RULES) for t in texts)
    assert all(t.endswith("<|im_start|>assistant\n") for t in texts)
    assert texts == render_trace(steps, CHATML_TEMPLATE)


def test_custom_observations_and_empty_history(cases: Sequence[MultiTurnCase]) -> None:
    steps = conversation_steps(cases[0], observe=lambda call: f"result of {call.name}")
    assert "Recent actions: none yet." in steps[0].messages[1]["content"]
    assert f"-> result of {steps[0].expected.name}" in steps[1].messages[1]["content"]
    with pytest.raises(ValueError):
        agent_messages(cases[0], 0, [], window=-1)
    with pytest.raises(ValueError):
        replay_trace(cases, interleave=0)
