"""The pipeline benchmark's pieces on real data: plan DAG accuracy, the request sample, and
one Planner -> BFCL tools -> Arbiter round on the embedded model, with PromptWeaver's
stored prefix and ExSpec giving exactly the plain greedy output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolweave.adapters.bench.bfcl_tools import bfcl_environment
from toolweave.adapters.bench.pipeline import pick_requests
from toolweave.adapters.bench.pipeline_stages import (
    StageConfig,
    execute,
    observations,
    render_tokens,
    run_stage,
)
from toolweave.eval.plan_scoring import plan_matches
from toolweave.eval.workload import PlanRequest, load_workload, tool_themes
from toolweave.models import default_model_path
from toolweave.native.calibration import engine_costs
from toolweave.native.engine import Engine
from toolweave.native.states.prefixes import PrefixStates
from toolweave.plan.format import Plan, PlanTask, TaskRef
from toolweave.plan.grammar import arbiter_grammar, plan_grammar
from toolweave.plan.parse import parse_plan
from toolweave.plan.prompts import ARBITER_EXAMPLES, arbiter_messages
from toolweave.prompting.promptweaver import fit_weavers
from toolweave.prompting.toolrag import ToolRAG


@pytest.fixture(scope="module")
def test_split() -> list[PlanRequest]:
    return load_workload(split="test")


def test_ground_truth_plans_match_themselves_and_wrong_ones_do_not(
    test_split: list[PlanRequest],
) -> None:
    for req in test_split[:200]:
        parsed = parse_plan(req.plan_text, req.tool_map)
        assert plan_matches(parsed, req.plan, req.tool_map)
    req = next(r for r in test_split if len(r.plan.tasks) >= 2)
    tasks = req.plan.tasks
    swapped = Plan(tuple(reversed(tasks)))  # independent tasks in another order: same DAG
    assert plan_matches(swapped, req.plan, req.tool_map)
    assert not plan_matches(Plan(tasks[:-1]), req.plan, req.tool_map)
    first = tasks[0]
    wrong = {k: "something else" for k in first.arguments}
    changed = Plan((PlanTask(first.index, first.tool, wrong), *tasks[1:]))
    assert not first.arguments or not plan_matches(changed, req.plan, req.tool_map)
    chained = Plan(
        (
            tasks[0],
            PlanTask(
                tasks[1].index,
                tasks[1].tool,
                {k: TaskRef(tasks[0].index) for k in tasks[1].arguments},
                (tasks[0].index,),
            ),
        )
    )
    truth = Plan(tasks[:2])
    assert not tasks[1].arguments or not plan_matches(chained, truth, req.tool_map)
    assert not plan_matches(Plan(tasks, joined=False), req.plan, req.tool_map)


def test_request_sample_spreads_over_catalogues(test_split: list[PlanRequest]) -> None:
    sample = pick_requests(test_split, 30)
    assert len(sample) == 30 and len({r.id for r in sample}) == 30
    assert len({r.theme for r in sample}) >= 15
    assert [r.id for r in pick_requests(test_split, 30)] == [r.id for r in sample]


@pytest.fixture(scope="module")
def eng() -> Iterator[Engine]:
    with Engine(default_model_path(), n_ctx=4096, n_seq_max=4) as engine:
        yield engine


@pytest.mark.slow
def test_one_round_with_stored_prefix_and_exspec_equals_plain(
    eng: Engine, test_split: list[PlanRequest], tmp_path: Path
) -> None:
    train = load_workload(split="train")
    weavers = fit_weavers(train, themes=tool_themes())
    rag = ToolRAG.fit(train, k=1)
    req = next(r for r in pick_requests(test_split, 10) if r.theme == ("GorillaFileSystem",))
    weaver = weavers[req.theme]
    found = rag.retrieve(req.request_text, candidates=[t.name for t in req.tools])
    dynamic = [(m.example.query, m.example.plan) for m in found.examples]
    msgs = weaver.messages(req.request_text, found.tools, dynamic=dynamic)
    states = PrefixStates(tmp_path, eng)
    static = render_tokens(eng, weaver.static_messages(), generation=False)
    arbiter_static = render_tokens(eng, arbiter_messages("", "", "")[:-1], generation=False)
    eng.clear()
    states.build([("static", static), ("arbiter", arbiter_static)], seq=1)
    eng.clear()
    costs = engine_costs(eng)
    prompt = render_tokens(eng, msgs)
    grammar = plan_grammar(list(weaver.catalogue))
    outputs = {}
    for config in (StageConfig("promptweaver", weave=True), StageConfig("both", True, True)):
        planner = run_stage(
            eng,
            prompt,
            config=config,
            grammar=grammar,
            examples=[text for _, text in msgs[1:-1]],
            query=req.request_text,
            states=states,
            costs=costs,
            max_tokens=96,
        )
        assert planner.restored_tokens >= len(static)
        run = execute(planner.result.text, {t.name: t for t in bfcl_environment(req)})
        assert run.records or run.error is not None  # the plan ran, or its error is known
        arb_msgs = arbiter_messages(req.request_text, planner.result.text, observations(run))
        arbiter = run_stage(
            eng,
            render_tokens(eng, arb_msgs),
            config=config,
            grammar=arbiter_grammar(),
            examples=[text for pair in ARBITER_EXAMPLES for text in pair],
            query=arb_msgs[-1][1],
            states=states,
            costs=costs,
            max_tokens=96,
            learn="arbiter",
            decode_repeats=2,
        )
        assert arbiter.restored_tokens == len(arbiter_static)
        assert arbiter.result.text.startswith("Thought: ")
        outputs[config.name] = (planner.result.tokens, arbiter.result.tokens)
    assert outputs["both"] == outputs["promptweaver"]
