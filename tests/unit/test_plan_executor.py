"""DAG executor: parallel start, $N substitution, error observations, streaming plans."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from time import perf_counter
from typing import Any

import anyio
import pytest

from toolweave.consent import (
    DENIED_BY_POLICY,
    DENIED_BY_USER,
    ConsentDecision,
    ConsentPolicy,
    ConsentRequest,
    with_consent,
)
from toolweave.plan.executor import TaskEvent, execute_plan, execute_plan_text
from toolweave.plan.format import PlanTask, TaskRef
from toolweave.plan.ledger import CallLedger
from toolweave.plan.parse import PlanStreamParser, parse_plan
from toolweave.tools import Tool, ToolResult
from toolweave.toolspec import ToolSpec

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Catalogue:
    """Real async tools built from Python functions, counting every call they get."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.calls: Counter[str] = Counter()
        self.arguments: list[tuple[str, dict[str, Any]]] = []

    def add(
        self,
        name: str,
        properties: dict[str, Any],
        function: Callable[..., Awaitable[Any]],
        *,
        required: list[str] | None = None,
        read_only: bool = False,
    ) -> None:
        spec = ToolSpec.from_dict(
            {
                "name": name,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": list(properties) if required is None else required,
                },
            }
        ).with_read_only(read_only)

        async def run(arguments: Any) -> ToolResult:
            self.calls[name] += 1
            self.arguments.append((name, dict(arguments)))
            value = await function(**arguments)
            if isinstance(value, ToolResult):
                return value
            return ToolResult(str(value), None if isinstance(value, str) else value)

        self.tools[name] = Tool(spec, run)


@pytest.fixture
def catalogue() -> Catalogue:
    cat = Catalogue()

    async def nap(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    async def capital(country: str) -> str:
        return {"France": "Paris", "Italy": "Rome"}[country]

    async def weather(city: str, unit: str = "celsius") -> str:
        return f"18 degrees {unit} in {city}"

    async def add(a: float, b: float) -> ToolResult:
        return ToolResult(str(a + b), a + b)

    async def echo(text: str) -> str:
        return text

    async def create_event(title: str) -> ToolResult:
        return ToolResult(f"created {title}", {"id": 7, "title": title})

    async def broken(text: str) -> str:
        raise ConnectionError(f"server down while reading {text}")

    async def refuse(text: str) -> ToolResult:
        return ToolResult.error("permission denied")

    async def hang(text: str) -> str:
        await anyio.sleep(30)
        return "never"

    string = {"type": "string"}
    number = {"type": "number"}
    cat.add("nap", {"seconds": number}, nap, read_only=True)
    cat.add("capital", {"country": string}, capital, read_only=True)
    cat.add(
        "weather",
        {"city": string, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        weather,
        required=["city"],
        read_only=True,
    )
    cat.add("add", {"a": number, "b": number}, add, read_only=True)
    cat.add("echo", {"text": string}, echo, read_only=True)
    cat.add("create_event", {"title": string}, create_event)
    cat.add("broken", {"text": string}, broken)
    cat.add("refuse", {"text": string}, refuse)
    cat.add("hang", {"text": string}, hang)
    return cat


def specs(cat: Catalogue) -> dict[str, ToolSpec]:
    return {name: tool.spec for name, tool in cat.tools.items()}


async def test_independent_tasks_overlap_in_time(catalogue: Catalogue) -> None:
    run = await execute_plan_text(
        "1. nap(seconds=0.2)\n2. nap(seconds=0.2)\n3. join()", catalogue.tools
    )
    assert run.ok
    first, second = run.records
    span = max(first.finished, second.finished) - min(first.started, second.started)
    assert first.finished - first.started >= 0.19
    assert span < 0.35


async def test_dependency_result_is_substituted_after_it_finishes(catalogue: Catalogue) -> None:
    run = await execute_plan_text(
        '1. capital(country="France")\n'
        "2. weather(city=$1)\n"
        '3. echo(text="Forecast for ${1}: $2")\n'
        "4. join()",
        catalogue.tools,
    )
    assert run.ok
    assert run.record(2).arguments == {"city": "Paris"}
    assert run.record(3).arguments == {"text": "Forecast for Paris: 18 degrees celsius in Paris"}
    assert run.record(2).started >= run.record(1).finished
    assert run.record(3).started >= run.record(2).finished


async def test_whole_value_reference_gets_structured_content(catalogue: Catalogue) -> None:
    run = await execute_plan_text(
        '1. create_event(title="standup")\n2. add(a=2, b=3)\n3. add(a=$2, b=$2)\n'
        '4. echo(text="event $1")\n5. join()',
        catalogue.tools,
    )
    assert run.ok
    assert run.record(3).arguments == {"a": 5, "b": 5}
    assert run.record(3).observation.structured == 10
    assert run.record(4).arguments == {"text": "event created standup"}  # strings get text


async def test_text_result_is_read_as_json_when_the_schema_needs_a_number(
    catalogue: Catalogue,
) -> None:
    async def count(text: str) -> ToolResult:
        return ToolResult(str(len(text)))  # text only, no structured content

    catalogue.add("count", {"text": {"type": "string"}}, count, read_only=True)
    run = await execute_plan_text(
        '1. count(text="four")\n2. add(a=$1, b=1)\n3. join()', catalogue.tools
    )
    assert run.ok
    assert run.record(2).arguments == {"a": 4, "b": 1}


async def test_call_invalid_after_substitution_is_an_error_and_not_run(
    catalogue: Catalogue,
) -> None:
    run = await execute_plan_text(
        '1. echo(text="abc")\n2. add(a=$1, b=1)\n3. echo(text="$2")\n4. join()',
        catalogue.tools,
    )
    second = run.record(2)
    assert second.failed and not second.ran
    assert "invalid arguments" in second.observation.text
    assert catalogue.calls["add"] == 0
    assert not run.record(3).ran and catalogue.calls["echo"] == 1


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ("broken", "broken raised ConnectionError: server down while reading x"),
        ("refuse", "permission denied"),
        ("hang", "hang timed out after 0.2 s"),
    ],
)
async def test_tool_failure_becomes_an_error_observation_and_dependents_do_not_run(
    catalogue: Catalogue, tool: str, message: str
) -> None:
    start = perf_counter()
    run = await execute_plan_text(
        f'1. {tool}(text="x")\n2. echo(text=$1)\n3. echo(text="then $2")\n'
        '4. echo(text="independent")\n5. join()',
        catalogue.tools,
        timeout=0.2,
    )
    assert perf_counter() - start < 2
    failed = run.record(1)
    assert failed.failed and failed.ran and failed.observation.text == message
    for index in (2, 3):
        record = run.record(index)
        assert record.failed and not record.ran
        assert (
            f"task {index - 1}" in record.observation.text and "failed" in record.observation.text
        )
    assert run.record(4).observation.text == "independent"
    assert catalogue.calls["echo"] == 1  # only the independent task ran
    assert not run.ok


async def test_tool_returning_something_else_and_unknown_tool_are_errors(
    catalogue: Catalogue,
) -> None:
    async def odd(arguments: Any) -> Any:
        return "not a ToolResult"

    spec = ToolSpec.from_dict({"name": "odd"}).with_read_only(True)
    tools = {**catalogue.tools, "odd": Tool(spec, odd)}
    plan = parse_plan("1. odd()\n2. join()", {"odd": spec})
    ghost = PlanTask(2, "ghost", {})
    run = await execute_plan(replace(plan, tasks=(*plan.tasks, ghost)), tools)
    assert "returned str instead of a ToolResult" in run.record(1).observation.text
    assert "unknown tool 'ghost'" in run.record(2).observation.text


async def test_non_read_only_tool_runs_once_however_many_tasks_use_it(
    catalogue: Catalogue,
) -> None:
    run = await execute_plan_text(
        '1. create_event(title="review")\n2. echo(text="$1")\n3. echo(text="again $1")\n4. join()',
        catalogue.tools,
    )
    assert run.ok
    assert catalogue.calls["create_event"] == 1


async def stream(*items: PlanTask | float) -> AsyncIterator[PlanTask]:
    """Yield tasks, sleeping for each float in between."""
    for item in items:
        if isinstance(item, PlanTask):
            yield item
        else:
            await anyio.sleep(item)


async def test_provisional_read_only_call_is_replaced_by_the_final_version(
    catalogue: Catalogue,
) -> None:
    early = PlanTask(1, "weather", {"city": "Oslo"}, provisional=True)
    final = PlanTask(1, "weather", {"city": "Oslo", "unit": "fahrenheit"})
    then = PlanTask(2, "echo", {"text": "$1"}, (1,))
    run = await execute_plan(stream(early, 0.05, final, then), catalogue.tools)
    assert catalogue.calls["weather"] == 2  # started early, then run again with the final call
    assert run.record(1).task == final
    assert run.record(2).arguments == {"text": "18 degrees fahrenheit in Oslo"}


async def test_provisional_call_of_a_tool_that_is_not_read_only_waits_for_its_final_version(
    catalogue: Catalogue,
) -> None:
    early = PlanTask(1, "create_event", {"title": "draft"}, provisional=True)
    final = PlanTask(1, "create_event", {"title": "final"})
    run = await execute_plan(stream(early, 0.1, final), catalogue.tools)
    assert catalogue.arguments == [("create_event", {"title": "final"})]

    # A provisional version left standing when the stream ends is the final one.
    catalogue.arguments.clear()
    run = await execute_plan(stream(early, 0.05), catalogue.tools)
    assert catalogue.arguments == [("create_event", {"title": "draft"})]
    assert run.ok


async def test_a_held_side_effect_runs_its_last_version_once(catalogue: Catalogue) -> None:
    first = PlanTask(1, "create_event", {"title": "a"})
    changed = PlanTask(1, "create_event", {"title": "b"})
    run = await execute_plan(stream(first, 0.05, changed, 0.05, first), catalogue.tools)
    assert catalogue.arguments == [("create_event", {"title": "a"})]
    assert run.record(1).arguments == {"title": "a"} and run.ok


async def test_tasks_start_while_the_plan_is_still_streaming(catalogue: Catalogue) -> None:
    lines = ["Thought: nap first\n1. nap(seconds=0.05)\n", "2. echo(text=$1)\n", "3. join()"]
    yielded: dict[str, float] = {}

    async def deltas() -> AsyncIterator[str]:
        for number, line in enumerate(lines):
            for start in range(0, len(line), 5):
                yield line[start : start + 5]
                await anyio.sleep(0.01)
            yielded[f"line {number + 1}"] = perf_counter()
        yielded["end"] = perf_counter()

    parser = PlanStreamParser(specs(catalogue))
    run = await execute_plan(parser.iter_tasks(deltas()), catalogue.tools)
    assert run.ok and parser.plan is not None and parser.plan.joined
    first = run.record(1)
    assert first.started < yielded["line 2"] < yielded["end"]
    assert run.record(2).started < yielded["end"]
    assert run.record(2).arguments == {"text": "slept 0.05"}


async def test_plan_error_mid_stream_keeps_the_tasks_read_before_it(catalogue: Catalogue) -> None:
    async def deltas() -> AsyncIterator[str]:
        yield '1. echo(text="hi")\n'
        await anyio.sleep(0.01)
        yield "2. echo(text=$3)\n3. join()"

    parser = PlanStreamParser(specs(catalogue))
    run = await execute_plan(parser.iter_tasks(deltas()), catalogue.tools)
    assert run.error is not None and run.error.line == 2
    assert [record.task.index for record in run.records] == [1]
    assert run.record(1).observation.text == "hi"
    assert not run.ok


async def test_malformed_plan_text_gives_one_error_observation(catalogue: Catalogue) -> None:
    run = await execute_plan_text('1. echo(text=$2)\n2. echo(text="x")', catalogue.tools)
    assert run.records == () and run.error is not None and run.error.line == 1
    text = run.observations_text()
    assert text.startswith("Plan error: plan line 1 ('1. echo(text=$2)'): $2 is the result")
    assert sum(catalogue.calls.values()) == 0


async def test_a_failing_producer_propagates_unwrapped(catalogue: Catalogue) -> None:
    async def tasks() -> AsyncIterator[PlanTask]:
        yield PlanTask(1, "nap", {"seconds": 5})
        raise RuntimeError("the model crashed")

    with pytest.raises(RuntimeError, match="the model crashed"):
        await execute_plan(tasks(), catalogue.tools)


async def test_events_and_observations_text(catalogue: Catalogue) -> None:
    events: list[TaskEvent] = []
    plan = (
        "Thought: find the city\n"
        '1. capital(country="Italy")\n'
        "2. weather(city=$1)\n"
        '3. broken(text="$2")\n'
        "4. echo(text=$3)\n"
        "5. join()"
    )
    run = await execute_plan_text(plan, catalogue.tools, on_event=events.append)
    assert [(event.kind, event.task.index) for event in events] == [
        ("started", 1),
        ("finished", 1),
        ("started", 2),
        ("finished", 2),
        ("started", 3),
        ("finished", 3),
        ("finished", 4),  # not run: no start
    ]
    assert [event.record for event in events if event.kind == "finished"] == list(run.records)
    assert run.observations_text() == (
        "Thought: find the city\n"
        '1. capital(country="Italy")\n'
        "Observation: Rome\n"
        '2. weather(city="Rome")\n'
        "Observation: 18 degrees celsius in Rome\n"
        '3. broken(text="18 degrees celsius in Rome")\n'
        "Observation: Error: broken raised ConnectionError: server down while reading "
        "18 degrees celsius in Rome\n"
        "4. echo(text=$3)\n"
        "Observation: Error: not run: it uses $3, and task 3 (broken) failed"
    )


async def test_references_in_a_hand_built_plan_are_checked_at_run_time(
    catalogue: Catalogue,
) -> None:
    plan = parse_plan('1. echo(text="a")\n2. join()', specs(catalogue))
    dangling = PlanTask(2, "echo", {"text": TaskRef(5)}, (5,))
    run = await execute_plan(replace(plan, tasks=(*plan.tasks, dangling)), catalogue.tools)
    assert "there is no task 5" in run.record(2).observation.text


# -- side effects: held until the plan is checked, consent, at most once per request ------


async def chunks(*parts: str, pause: float = 0.05) -> AsyncIterator[str]:
    for part in parts:
        yield part
        await anyio.sleep(pause)


async def test_side_effects_wait_for_the_whole_plan_while_reads_stream(
    catalogue: Catalogue,
) -> None:
    events: list[tuple[str, int, float]] = []
    parser = PlanStreamParser(specs(catalogue))
    text = ('1. create_event(title="a")\n', '2. echo(text="b")\n', "3. join()")
    run = await execute_plan(
        parser.iter_tasks(chunks(*text)),
        catalogue.tools,
        on_event=lambda e: events.append((e.kind, e.task.index, perf_counter())),
    )
    assert run.ok and catalogue.calls["create_event"] == 1
    kinds = [(kind, index) for kind, index, _ in events]
    assert kinds.index(("held", 1)) < kinds.index(("started", 2)) < kinds.index(("started", 1))
    # The read-only task ran while the plan was still being written; the side effect
    # only after its last line.
    assert run.record(2).started < run.record(1).started


async def test_a_plan_that_breaks_later_runs_none_of_its_side_effects(
    catalogue: Catalogue,
) -> None:
    parser = PlanStreamParser(specs(catalogue))
    text = ('1. create_event(title="a")\n', '2. echo(text="b")\n', "3. no_such_tool()\n")
    run = await execute_plan(parser.iter_tasks(chunks(*text)), catalogue.tools)
    assert run.error is not None and run.error.line == 3
    assert catalogue.calls["create_event"] == 0 and catalogue.calls["echo"] == 1
    held = run.record(1)
    assert not held.ran and held.failed
    assert "a plan that fails its check runs no side effect" in held.observation.text

    # Without join(): the same.
    parser = PlanStreamParser(specs(catalogue))
    run = await execute_plan(
        parser.iter_tasks(chunks('1. create_event(title="a")\n')), catalogue.tools
    )
    assert run.error is not None and catalogue.calls["create_event"] == 0


async def test_a_dangling_reference_anywhere_stops_every_side_effect(
    catalogue: Catalogue,
) -> None:
    plan = parse_plan('1. create_event(title="a")\n2. echo(text="b")\n3. join()', specs(catalogue))
    dangling = PlanTask(3, "echo", {"text": TaskRef(7)}, (7,))
    run = await execute_plan(replace(plan, tasks=(*plan.tasks, dangling)), catalogue.tools)
    assert catalogue.calls["create_event"] == 0 and catalogue.calls["echo"] == 1
    assert "task 3 uses $7" in run.record(1).observation.text
    # An unknown tool or a plan without join(): the same.
    ghost = PlanTask(3, "ghost", {})
    run = await execute_plan(replace(plan, tasks=(*plan.tasks, ghost)), catalogue.tools)
    assert "unknown tool 'ghost'" in run.record(1).observation.text
    run = await execute_plan(replace(plan, joined=False), catalogue.tools)
    assert "does not end with join()" in run.record(1).observation.text
    assert catalogue.calls["create_event"] == 0 and catalogue.calls["echo"] == 3


async def test_deny_all_turns_side_effects_into_denied_observations(catalogue: Catalogue) -> None:
    events: list[TaskEvent] = []
    run = await execute_plan_text(
        '1. create_event(title="a")\n2. echo(text="b")\n3. echo(text=$1)\n4. join()',
        catalogue.tools,
        consent=ConsentPolicy.deny_all(),
        on_event=events.append,
    )
    denied = run.record(1)
    assert denied.denied and not denied.ran and denied.observation.text == DENIED_BY_POLICY
    assert catalogue.calls == {"echo": 1}
    assert [e.kind for e in events if e.task.index == 1] == ["denied", "finished"]
    assert f"Observation: Error: {DENIED_BY_POLICY}" in run.observations_text()


async def test_allow_tools_runs_only_the_named_side_effects(catalogue: Catalogue) -> None:
    run = await execute_plan_text(
        '1. create_event(title="a")\n2. refuse(text="b")\n3. join()',
        catalogue.tools,
        consent=ConsentPolicy.allow_tools(["create_event"]),
    )
    assert catalogue.calls == {"create_event": 1}
    assert run.record(2).denied


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_ask_sees_the_resolved_call_and_asks_one_question_at_a_time(
    catalogue: Catalogue, kind: str
) -> None:
    asked: list[ConsentRequest] = []
    active = [0, 0]  # now, most at once

    def sync_answer(request: ConsentRequest) -> bool:
        active[0] += 1
        active[1] = max(active)
        time.sleep(0.05)  # a person thinking: blocks its thread, not the event loop
        asked.append(request)
        active[0] -= 1
        return request.arguments["title"] != "no"

    async def async_answer(request: ConsentRequest) -> bool:
        active[0] += 1
        active[1] = max(active)
        await anyio.sleep(0.05)
        asked.append(request)
        active[0] -= 1
        return request.arguments["title"] != "no"

    callback = sync_answer if kind == "sync" else async_answer
    run = await execute_plan_text(
        '1. capital(country="Italy")\n2. create_event(title=$1)\n'
        '3. create_event(title="no")\n4. nap(seconds=0.01)\n5. join()',
        catalogue.tools,
        consent=ConsentPolicy.ask(callback),
    )
    assert sorted((r.tool, r.arguments["title"], r.task) for r in asked) == [
        ("create_event", "Rome", 2),
        ("create_event", "no", 3),
    ]
    assert active[1] == 1  # never two questions at once
    assert catalogue.arguments.count(("create_event", {"title": "Rome"})) == 1
    assert ("create_event", {"title": "no"}) not in catalogue.arguments
    refused = run.record(3)
    assert refused.denied and refused.observation.text == DENIED_BY_USER
    assert catalogue.calls["nap"] == 1  # no question for a read-only tool


async def test_a_question_without_answer_or_with_a_broken_callback_denies(
    catalogue: Catalogue,
) -> None:
    async def never(request: ConsentRequest) -> bool:
        await anyio.sleep(30)
        return True

    def broken(request: ConsentRequest) -> bool:
        raise OSError("no terminal")

    start = perf_counter()
    run = await execute_plan_text(
        '1. create_event(title="a")\n2. join()',
        catalogue.tools,
        consent=ConsentPolicy.ask(never, timeout=0.2),
    )
    assert perf_counter() - start < 2
    assert run.record(1).denied and "within 0.2 s" in run.record(1).observation.text
    run = await execute_plan_text(
        '1. create_event(title="a")\n2. join()',
        catalogue.tools,
        consent=ConsentPolicy.ask(broken),
    )
    assert "OSError: no terminal" in run.record(1).observation.text

    # A blocking question nobody answers (a terminal left alone) is abandoned in time.
    gate = threading.Event()

    def stuck(request: ConsentRequest) -> bool:
        gate.wait(30)
        return True

    start = perf_counter()
    run = await execute_plan_text(
        '1. create_event(title="a")\n2. join()',
        catalogue.tools,
        consent=ConsentPolicy.ask(stuck, timeout=0.2),
    )
    gate.set()
    assert perf_counter() - start < 2 and run.record(1).denied
    assert catalogue.calls["create_event"] == 0


async def test_a_side_effect_of_an_earlier_round_is_reused_not_run_again(
    catalogue: Catalogue,
) -> None:
    ledger = CallLedger()
    plan = '1. create_event(title="a")\n2. create_event(title="a")\n3. join()'
    first = await execute_plan_text(plan, catalogue.tools, ledger=ledger)
    assert catalogue.calls["create_event"] == 2  # one round may ask twice on purpose
    ledger.next_round()
    events: list[TaskEvent] = []
    again = await execute_plan_text(
        '1. create_event(title="a")\n2. create_event(title="b")\n3. echo(text="$1")\n4. join()',
        catalogue.tools,
        ledger=ledger,
        on_event=events.append,
    )
    assert catalogue.arguments.count(("create_event", {"title": "a"})) == 2
    assert catalogue.arguments.count(("create_event", {"title": "b"})) == 1
    reused = again.record(1)
    assert reused.reused and reused.reused_round == 1 and not reused.ran
    assert reused.observation == first.record(1).observation
    assert again.record(3).arguments == {"text": "created a"}  # the reused result flows on
    assert [e.kind for e in events if e.task.index == 1] == ["reused", "finished"]
    assert "Observation: (done in round 1, not run again) created a" in again.observations_text()


async def test_a_call_the_user_denied_is_not_asked_again_in_the_same_request(
    catalogue: Catalogue,
) -> None:
    asked: list[str] = []

    async def no(request: ConsentRequest) -> bool:
        asked.append(request.tool)
        return False

    ledger = CallLedger()
    policy = ConsentPolicy.ask(no)
    plan = '1. create_event(title="a")\n2. join()'
    await execute_plan_text(plan, catalogue.tools, consent=policy, ledger=ledger)
    ledger.next_round()
    run = await execute_plan_text(plan, catalogue.tools, consent=policy, ledger=ledger)
    assert asked == ["create_event"] and catalogue.calls["create_event"] == 0
    assert "denied this call earlier in this request" in run.record(1).observation.text


async def test_with_consent_guards_one_tool_outside_a_plan(catalogue: Catalogue) -> None:
    seen: list[tuple[ConsentRequest, ConsentDecision]] = []
    create = catalogue.tools["create_event"]
    guarded = with_consent(create, ConsentPolicy.deny_all(), lambda r, d: seen.append((r, d)))
    result = await guarded.run({"title": "x"})
    assert result.is_error and result.text == DENIED_BY_POLICY
    assert catalogue.calls["create_event"] == 0
    assert [(r.tool, dict(r.arguments), d.by) for r, d in seen] == [
        ("create_event", {"title": "x"}, "policy")
    ]
    allowed = with_consent(create, ConsentPolicy.allow_tools(["create_event"]))
    assert (await allowed.run({"title": "y"})).text == "created y"
    assert catalogue.calls["create_event"] == 1
    echo = catalogue.tools["echo"]
    assert with_consent(echo, ConsentPolicy.deny_all()) is echo  # read-only: unchanged


async def test_a_read_only_call_asked_for_twice_runs_once(catalogue: Catalogue) -> None:
    events: list[TaskEvent] = []
    run = await execute_plan_text(
        '1. weather(city="Oslo")\n2. capital(country="France")\n3. weather(city="Oslo")\n'
        '4. echo(text="$1 / $3")\n5. join()',
        catalogue.tools,
        on_event=events.append,
    )
    assert run.ok
    assert catalogue.calls["weather"] == 1
    first, again = run.record(1), run.record(3)
    assert again.observation == first.observation and again.shared_with == 1
    assert again.shared and not again.ran and first.ran and not first.shared
    assert run.record(4).arguments == {
        "text": "18 degrees celsius in Oslo / 18 degrees celsius in Oslo"
    }
    kinds = [(e.kind, e.task.index) for e in events]
    assert ("reused", 3) in kinds and ("started", 3) not in kinds
    # The Arbiter reads the observation as if the call had run twice.
    lines = run.observations_text().splitlines()
    assert lines.count("Observation: 18 degrees celsius in Oslo") == 2


async def test_a_repeated_read_waits_for_the_run_under_way(catalogue: Catalogue) -> None:
    t0 = perf_counter()
    run = await execute_plan_text(
        "1. nap(seconds=0.3)\n2. nap(seconds=0.3)\n3. join()", catalogue.tools
    )
    assert catalogue.calls["nap"] == 1
    assert run.record(2).observation.text == "slept 0.3" and run.record(2).shared_with == 1
    assert 0.29 <= perf_counter() - t0 < 0.55  # one nap, not two in a row or none


async def test_a_read_after_a_side_effect_of_the_plan_runs_again(catalogue: Catalogue) -> None:
    # Task 3 resolves to task 1's call, but it comes after create_event: it reads again.
    run = await execute_plan_text(
        '1. echo(text="created review")\n2. create_event(title="review")\n'
        '3. echo(text="$2")\n4. join()',
        catalogue.tools,
    )
    assert run.ok
    assert run.record(3).arguments == run.record(1).arguments
    assert catalogue.calls["echo"] == 2 and run.record(3).ran and not run.record(3).shared


async def test_a_provisional_read_that_changes_stops_waiting_and_runs_its_call(
    catalogue: Catalogue,
) -> None:
    first = PlanTask(1, "nap", {"seconds": 0.3})
    early = PlanTask(2, "nap", {"seconds": 0.3}, provisional=True)  # waits on task 1's run
    final = PlanTask(2, "nap", {"seconds": 0.05})
    t0 = perf_counter()
    run = await execute_plan(stream(first, 0.05, early, 0.05, final), catalogue.tools)
    two = run.record(2)
    assert two.task == final and two.ran and not two.shared
    assert two.observation.text == "slept 0.05" and two.finished - t0 < 0.25
    assert catalogue.calls["nap"] == 2
