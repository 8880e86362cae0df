"""Side effects on real MCP servers: held until the plan is checked, decided by consent,
run at most once per request. Fixed plan texts drive the executor against the demo
servers over stdio; the servers count their own side-effect calls, and the tests read
those counts rather than what the client believes it sent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolweave.adapters.demo_servers.store import call_counts
from toolweave.adapters.mcp.client import MCPHub, demo_server_configs
from toolweave.consent import DENIED_BY_USER, ConsentPolicy, ConsentRequest
from toolweave.plan.executor import PlanRun, TaskEvent, execute_plan, execute_plan_text
from toolweave.plan.ledger import CallLedger
from toolweave.plan.parse import PlanStreamParser
from toolweave.tools import Tool


class Notes:
    """The notes demo server over stdio, with its own count of side-effect calls."""

    def __init__(self, hub: MCPHub, state: Path) -> None:
        self.hub = hub
        self.state = state
        self.tools: dict[str, Tool] = {t.name: t for t in hub.tools}

    def counts(self) -> dict[str, int]:
        return call_counts("notes", self.state)


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notes]:
    state = tmp_path_factory.mktemp("notes-state")
    with MCPHub(demo_server_configs(state, names=["notes"])) as hub:
        yield Notes(hub, state)


def run_text(notes: Notes, text: str, **options: Any) -> PlanRun:
    return anyio.run(lambda: execute_plan_text(text, notes.tools, timeout=10, **options))


def test_the_servers_tools_are_classified_as_the_tests_assume(notes: Notes) -> None:
    assert notes.tools["search_notes"].read_only and notes.tools["list_notes"].read_only
    assert not notes.tools["create_note"].read_only
    assert not notes.tools["delete_note"].read_only


def test_a_streamed_plan_that_breaks_later_runs_none_of_its_side_effects(notes: Notes) -> None:
    before = notes.counts()
    kinds: list[tuple[str, int]] = []

    async def deltas() -> AsyncIterator[str]:
        for line in (
            '1. create_note(title="Held", body="must not be written")\n',
            '2. search_notes(query="Atlas")\n',
            "3. delete_everything()\n",  # not a tool: the plan fails its check
        ):
            yield line
            await anyio.sleep(0.05)

    parser = PlanStreamParser({name: tool.spec for name, tool in notes.tools.items()})

    async def main() -> PlanRun:
        return await execute_plan(
            parser.iter_tasks(deltas()),
            notes.tools,
            timeout=10,
            consent=ConsentPolicy.allow_all(),
            on_event=lambda e: kinds.append((e.kind, e.task.index)),
        )

    run = anyio.run(main)
    assert run.error is not None and run.error.line == 3
    assert notes.counts() == before  # the server never saw create_note
    assert not run.record(1).ran and "fails its check" in run.record(1).observation.text
    assert "Atlas" in run.record(2).observation.text  # the read-only task ran
    assert ("held", 1) in kinds and ("started", 1) not in kinds


def test_consent_decides_each_call_the_server_runs(notes: Notes) -> None:
    asked: list[ConsentRequest] = []

    def answer(request: ConsentRequest) -> bool:
        asked.append(request)
        return request.arguments["title"] == "Approved"

    before = notes.counts().get("create_note", 0)
    run = run_text(
        notes,
        '1. create_note(title="Approved", body="yes")\n'
        '2. create_note(title="Refused", body="no")\n'
        "3. list_notes()\n4. join()",
        consent=ConsentPolicy.ask(answer),
    )
    assert sorted(r.arguments["title"] for r in asked) == ["Approved", "Refused"]
    assert notes.counts().get("create_note", 0) == before + 1
    assert run.record(1).ran and not run.record(1).failed
    refused = run.record(2)
    assert refused.denied and refused.observation.text == DENIED_BY_USER
    titles = [n["title"] for n in run.record(3).observation.structured["notes"]]
    assert "Refused" not in titles  # what the server holds, not only what it counted


def test_without_consent_nothing_reaches_the_server(notes: Notes) -> None:
    before = notes.counts()
    events: list[TaskEvent] = []
    run = run_text(
        notes,
        '1. delete_note(note_id="n1")\n2. read_note(note_id="n1")\n3. join()',
        consent=ConsentPolicy.deny_all(),
        on_event=events.append,
    )
    assert notes.counts() == before
    assert run.record(1).denied and [e.kind for e in events if e.task.index == 1] == [
        "denied",
        "finished",
    ]
    assert not run.record(2).failed  # the note is still there


def test_a_side_effect_repeated_in_a_later_round_runs_once_on_the_server(notes: Notes) -> None:
    ledger = CallLedger()
    plan = '1. create_note(title="Once", body="only once")\n2. join()'
    before = notes.counts().get("create_note", 0)
    first = run_text(notes, plan, ledger=ledger)
    ledger.next_round()
    again = run_text(notes, plan, ledger=ledger)
    assert notes.counts().get("create_note", 0) == before + 1
    assert again.record(1).reused_round == 1
    assert again.record(1).observation == first.record(1).observation
    # A fresh request (a new ledger) is a new decision: it runs again.
    run_text(notes, plan, ledger=CallLedger())
    assert notes.counts().get("create_note", 0) == before + 2
