"""The plan-out agent: Planner -> executor -> Arbiter, on the embedded model with a real
MCP server, and on another LangChain chat model (a scripted fake at the LLM boundary)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from toolweave.adapters.demo_servers import plan_examples
from toolweave.adapters.demo_servers.store import call_counts
from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.plan_agent import NO_CONSENT, PlanOutAgent
from toolweave.adapters.mcp.client import MCPHub, demo_server_configs
from toolweave.consent import ConsentPolicy
from toolweave.events import ArbiterDone, CallDenied, CallReused
from toolweave.native.constraints import TokenMatcher, vocabulary_for
from toolweave.native.learning import forget_acceptance
from toolweave.plan.arbiter import read_arbiter
from toolweave.plan.grammar import arbiter_grammar, plan_grammar
from toolweave.plan.parse import parse_plan


@pytest.fixture(scope="module")
def weather_hub(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with MCPHub(demo_server_configs(tmp_path_factory.mktemp("state"), names=["weather"])) as hub:
        yield hub


def test_plan_grammar_accepts_the_demo_example_plans(engine: Any, tmp_path: Path) -> None:
    with MCPHub(demo_server_configs(tmp_path)) as hub:  # every demo tool
        specs = [t.spec for t in hub.tools]
    grammar = plan_grammar(specs)
    vocab = vocabulary_for(engine)
    by_name = {s.name: s for s in specs}
    for _, plan in plan_examples():
        parse_plan(plan, by_name)  # the examples are valid plans
        tokens = engine.tokenize(plan, parse_special=False)
        assert TokenMatcher(vocab, grammar).accepts_prefix(tokens) == len(tokens), plan
    reply = "Thought: done.\nAction: Finish(It is 6 degrees.)"
    tokens = engine.tokenize(reply, parse_special=False)
    assert TokenMatcher(vocab, arbiter_grammar()).accepts_prefix(tokens) == len(tokens)
    assert read_arbiter(reply).answer == "It is 6 degrees."
    assert read_arbiter("Thought: no.\nAction: Replan").replan


def test_pipeline_completes_a_multi_step_request_on_the_embedded_model(
    weather_hub: MCPHub,
) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    agent = PlanOutAgent(
        ChatToolweave(max_tokens=256),
        weather_hub.tools,
        examples=plan_examples(),
        observer=lambda event: events.append((event.kind, event.to_json())),
    )
    result = agent.run("What's the weather in London and in Paris right now?")
    first = result.rounds[0]
    assert first.run.error is None  # the grammar kept the plan well formed
    cities = {r.arguments.get("city") for r in first.run.records}
    assert {"London", "Paris"} <= cities and all(not r.failed for r in first.run.records)
    assert result.finished and result.answer
    kinds = [k for k, _ in events]
    # Each task started while the Planner was still writing (before plan_done).
    assert kinds.index("task_start") < kinds.index("plan_done")


def test_pipeline_runs_on_any_langchain_chat_model(weather_hub: MCPHub) -> None:
    plan = (
        '1. current_weather(city="Stockholm")\n'
        '2. distance(from_city="Stockholm", to_city="Rome")\n3. join()'
    )
    replies = iter(
        [
            AIMessage(plan),
            AIMessage("Thought: enough.\nAction: Finish(Stockholm is cold and far from Rome.)"),
        ]
    )
    model = GenericFakeChatModel(messages=replies)
    result = PlanOutAgent(model, weather_hub.tools).run("Stockholm weather, and how far to Rome?")
    assert result.answer == "Stockholm is cold and far from Rome."
    records = result.rounds[0].run.records
    assert [r.task.tool for r in records] == ["current_weather", "distance"]
    assert json.loads(records[0].observation.text)["city"] == "Stockholm"


def test_malformed_plan_becomes_an_observation_and_the_agent_replans(
    weather_hub: MCPHub,
) -> None:
    replies = iter(
        [
            AIMessage("1. no_such_tool(x=1)\n2. join()"),
            AIMessage("Thought: the plan failed.\nAction: Replan"),
            AIMessage('1. geocode(city="Rome")\n2. join()'),
            AIMessage("Thought: found it.\nAction: Finish(Rome is in Italy.)"),
        ]
    )
    result = PlanOutAgent(GenericFakeChatModel(messages=replies), weather_hub.tools).run(
        "Where is Rome?"
    )
    assert len(result.rounds) == 2 and result.finished
    assert result.rounds[0].run.error is not None
    assert "no_such_tool" in result.rounds[0].run.observations_text()
    assert result.answer == "Rome is in Italy."


@pytest.mark.slow
def test_exspec_drafts_change_speed_not_the_planner_or_arbiter_output(
    weather_hub: MCPHub,
) -> None:
    model = ChatToolweave(max_tokens=256)
    assert "exspec" not in PlanOutAgent(model, weather_hub.tools).planner_kwargs  # default off
    agent = PlanOutAgent(model, weather_hub.tools, examples=plan_examples(), exspec=True)
    assert agent.planner_kwargs["exspec"] and agent.arbiter_kwargs["exspec"]
    result = agent.run("What's the weather in Paris and the forecast for Rome?")
    plain = ChatToolweave(max_tokens=256)  # each prompt prefilled once for both decodes
    accepted = drafted_total = 0
    for r in result.rounds:
        for msgs, bound in (
            (r.planner_messages, agent.planner_kwargs),
            (r.arbiter_messages, agent.arbiter_kwargs),
        ):
            # start from the prior each time: the runs before taught the engine their rates
            forget_acceptance(plain.engine)
            drafted = plain.bind(**bound).invoke(list(msgs))
            greedy = plain.bind(grammar=bound["grammar"]).invoke(list(msgs))
            assert drafted.content == greedy.content
            stats = drafted.response_metadata["stats"]
            assert greedy.response_metadata["stats"]["drafted_tokens"] == 0
            accepted += stats["accepted_tokens"]
            drafted_total += stats["drafted_tokens"]
    # The examples' n-grams were drafted and the model agreed with some. ExSpec drafts only
    # where the pass times it measured say drafts pay: on a machine loaded while it
    # measured, it may draft nothing, and then only the equality above is checked.
    assert accepted > 0 or drafted_total == 0, (accepted, drafted_total)


# -- side effects: consent, at most once per request, only a written Replan replans -----


@pytest.fixture(scope="module")
def notes_hub(tmp_path_factory: pytest.TempPathFactory) -> Any:
    state = tmp_path_factory.mktemp("notes-state")
    with MCPHub(demo_server_configs(state, names=["notes"])) as hub:
        yield hub, state


def scripted(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def test_a_replan_does_not_repeat_a_side_effect_of_the_same_request(notes_hub: Any) -> None:
    hub, state = notes_hub
    plan = '1. create_note(title="Dentist", body="Tuesday 10:00")\n2. join()'
    events: list[Any] = []
    before = call_counts("notes", state).get("create_note", 0)
    agent = PlanOutAgent(
        scripted(
            plan,
            "Thought: not sure it worked.\nAction: Replan",
            plan + "\n",
            "Thought: saved.\nAction: Finish(The note is saved.)",
        ),
        hub.tools,
        consent=ConsentPolicy.allow_all(),
        observer=events.append,
    )
    result = agent.run("Note: dentist on Tuesday at 10")
    assert result.finished and len(result.rounds) == 2
    assert call_counts("notes", state).get("create_note", 0) == before + 1
    second = result.rounds[1].run.record(1)
    assert second.reused_round == 1 and not second.ran
    reused = [e for e in events if isinstance(e, CallReused)]
    assert [(e.index, e.tool, e.round) for e in reused] == [(1, "create_note", 1)]
    assert result.ledger is not None and len(result.ledger.entries) == 1


def test_without_a_consent_policy_the_agent_runs_no_side_effect(notes_hub: Any) -> None:
    hub, state = notes_hub
    events: list[Any] = []
    before = call_counts("notes", state)
    result = PlanOutAgent(
        scripted(
            '1. delete_note(note_id="n2")\n2. list_notes()\n3. join()',
            "Thought: it was not allowed.\nAction: Finish(I may not delete notes.)",
        ),
        hub.tools,
        observer=events.append,
    ).run("Delete the Atlas note")
    assert call_counts("notes", state) == before
    record = result.rounds[0].run.record(1)
    assert record.denied and record.observation.text == NO_CONSENT
    denied = [e for e in events if isinstance(e, CallDenied)]
    assert [(e.tool, e.arguments, e.index) for e in denied] == [
        ("delete_note", {"note_id": "n2"}, 1)
    ]
    assert NO_CONSENT in result.rounds[0].run.observations_text()  # what the Arbiter read


def test_an_arbiter_reply_cut_before_its_action_ends_the_request(notes_hub: Any) -> None:
    hub, state = notes_hub
    plan = '1. create_note(title="Call Sam", body="about the budget")\n2. join()'
    before = call_counts("notes", state).get("create_note", 0)
    result = PlanOutAgent(
        scripted(plan, "Thought: the note is saved.\nAction: Rep", plan, "never read"),
        hub.tools,
        consent=ConsentPolicy.allow_all(),
        max_rounds=3,
    ).run("Remind me to call Sam")
    assert len(result.rounds) == 1 and not result.finished
    assert result.error is not None and "neither Finish(...) nor Replan" in result.error
    assert call_counts("notes", state).get("create_note", 0) == before + 1


def test_an_arbiter_answer_cut_inside_finish_is_a_truncated_answer(notes_hub: Any) -> None:
    hub, _ = notes_hub
    events: list[Any] = []
    result = PlanOutAgent(
        scripted('1. list_notes(tag="work")\n2. join()', "Thought: found it.\nAction: Finish(One"),
        hub.tools,
        observer=events.append,
    ).run("Which work notes do I have?")
    assert result.finished and result.answer == "One"
    assert result.rounds[0].decision.truncated
    done = [e for e in events if isinstance(e, ArbiterDone)]
    assert done[-1].truncated and done[-1].finish
