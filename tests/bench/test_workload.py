"""The plan-out workload from BFCL v4 multi-turn: split, plans, history, counts."""

from __future__ import annotations

import pytest

from toolweave.eval.bfcl_multi_turn import MULTI_TURN_CATEGORIES, load_multi_turn
from toolweave.eval.workload import (
    TRAIN_FRACTION,
    PlanRequest,
    load_workload,
    split_of,
    tool_themes,
    workload_stats,
)
from toolweave.plan.parse import parse_plan


@pytest.fixture(scope="module")
def everything() -> list[PlanRequest]:
    return list(load_workload("all"))


def test_split_is_deterministic_and_by_scenario(everything: list[PlanRequest]) -> None:
    train, test = load_workload("train"), load_workload("test")
    assert [r.id for r in load_workload("train")] == [r.id for r in train]
    assert {r.id for r in train} | {r.id for r in test} == {r.id for r in everything}
    assert not {r.conversation_id for r in train} & {r.conversation_id for r in test}
    # The categories are variants of the same scenarios: none may straddle the split.
    assert not {r.scenario for r in train} & {r.scenario for r in test}
    assert all(split_of(r.scenario) == r.split for r in everything)
    share = len({r.scenario for r in train}) / len({r.scenario for r in everything})
    assert abs(share - TRAIN_FRACTION) < 0.1


def test_every_plan_parses_against_its_catalogue(everything: list[PlanRequest]) -> None:
    for request in everything:
        text = request.plan_text
        assert text.endswith(f"{len(request.plan.tasks) + 1}. join()")
        plan = parse_plan(text, request.tool_map)
        assert plan == request.plan
        assert all(task.dependencies == () for task in plan.tasks), request.id
        assert [t.tool for t in plan.tasks] == [t.tool for t in request.plan.tasks]
        assert set(request.tools_used) <= set(request.tool_map)
        assert request.tools_used == tuple(dict.fromkeys(t.tool for t in plan.tasks))


def test_requests_follow_the_bfcl_turns(everything: list[PlanRequest]) -> None:
    themes = tool_themes()
    base = {case.id: case for case in load_multi_turn("multi_turn_base")}
    for request in everything:
        assert request.query and request.plan.tasks
        assert {themes[name] for name in request.tools_used} <= set(request.theme)
        if request.category == "multi_turn_base":
            case = base[request.conversation_id]
            assert [t.tool for t in request.plan.tasks] == [
                call.name for call in case.ground_truth[request.turn]
            ]
            assert request.query == case.turns[request.turn][-1]["content"].strip()
    # Each earlier turn is a user message, then the assistant's plan when it had calls.
    first = next(r for r in everything if r.conversation_id == "multi_turn_base_0" and r.turn == 1)
    assert [m["role"] for m in first.history] == ["user", "assistant"]
    assert first.history[1]["content"].endswith("join()")


def test_request_text_adds_turns_left_without_calls(everything: list[PlanRequest]) -> None:
    pending = [r for r in everything if r.request_text != r.query]
    assert pending, "miss_param turns answer a request made one turn earlier"
    for request in pending:
        assert request.request_text.endswith(request.query)
        assert request.history[-1]["role"] == "user"
        assert request.history[-1]["content"] in request.request_text
    answered = [r for r in everything if not r.history or r.history[-1]["role"] == "assistant"]
    assert all(r.request_text == r.query for r in answered)


def test_duplicates_across_categories_are_kept_once(everything: list[PlanRequest]) -> None:
    keys = [(r.scenario, r.query, r.plan_text) for r in everything]
    assert len(keys) == len(set(keys))
    stats = workload_stats(everything)
    assert stats.by_category["multi_turn_base"] > stats.by_category["multi_turn_long_context"]
    assert set(stats.by_category) <= set(MULTI_TURN_CATEGORIES)
    train, test = workload_stats(load_workload("train")), workload_stats(load_workload("test"))
    assert train.requests + test.requests == stats.requests
    assert train.conversations + test.conversations == stats.conversations


def test_limit_and_bad_arguments() -> None:
    assert [r.id for r in load_workload("test", limit=5)] == [
        r.id for r in load_workload("test")[:5]
    ]
    with pytest.raises(ValueError, match="unknown split"):
        load_workload("dev")
    skipped = load_workload("all").skipped
    assert all("plan line" in reason for reason in skipped.values())
