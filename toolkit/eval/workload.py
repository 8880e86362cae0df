"""The plan-out workload: BFCL v4 multi-turn user turns with ground-truth plans.

Every user turn whose ground truth is a non-empty call sequence becomes a
`PlanRequest`: the turn's text, the earlier turns as chat history, the catalogue of the
conversation's tool classes (its *theme*) and the ground-truth calls written as an
LLMCompiler `Plan` (one task per call, in order, then ``join()``). The plans carry no
``$N`` references: BFCL's calls take literal values, and whether a value was read from
an earlier result cannot be told without running the tools.

The four multi-turn categories are variants of the same 200 scenarios (``base_7``,
``long_context_7``, ... share classes and call path), so the train/test split hashes
the scenario number: all variants of a conversation land on the same side. A request
that repeats an earlier one of its scenario (same query, same plan; the long-context
variant mostly repeats the base one) is kept once, from the first category listed.
A ground truth that its own tool schemas reject (one BFCL turn passes a string
``ticket_id`` where the schema says integer) is skipped and listed in ``skipped``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from toolweave.eval.bfcl import CaseList
from toolweave.eval.bfcl_data import Message, bfcl_data_dir
from toolweave.eval.bfcl_multi_turn import (
    FUNC_DOC_FILES,
    MULTI_TURN_CATEGORIES,
    MultiTurnCase,
    load_class_tools,
    load_multi_turn,
)
from toolweave.plan.format import Plan, PlanError, PlanTask, format_plan
from toolweave.plan.parse import parse_plan
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = [
    "SPLITS",
    "TRAIN_FRACTION",
    "WORKLOAD_CATEGORIES",
    "PlanRequest",
    "WorkloadStats",
    "load_workload",
    "split_of",
    "tool_themes",
    "workload_stats",
]

WORKLOAD_CATEGORIES = MULTI_TURN_CATEGORIES
SPLITS = ("train", "test", "all")
TRAIN_FRACTION = 0.7
_SPLIT_SALT = "toolweave-workload-v1"


@dataclass(frozen=True)
class PlanRequest:
    """One user turn to plan for, with its ground-truth plan.

    ``conversation_id`` is the BFCL entry id and ``scenario`` the number its category
    variants share; ``theme`` names the involved tool classes, ``tools`` their
    catalogue as offered at this turn. ``history`` holds the earlier turns: each user
    message, then an assistant message with that turn's ground-truth plan text when it
    had calls. ``tools_used`` lists the plan's tools in order of first use.
    """

    id: str
    conversation_id: str
    scenario: int
    category: str
    turn: int
    theme: tuple[str, ...]
    query: str
    history: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    plan: Plan
    tools_used: tuple[str, ...]

    def __hash__(self) -> int:
        return hash(self.id)

    @cached_property
    def plan_text(self) -> str:
        """The plan in canonical LLMCompiler form (`format_plan`)."""
        return format_plan(self.plan)

    @property
    def request_text(self) -> str:
        """The user text this plan answers: the user turns since the last turn that had
        calls (a turn left without calls, e.g. to ask for a missing value, is still
        pending), then ``query``; equal to ``query`` in most turns."""
        pending = [self.query]
        for message in reversed(self.history):
            if message["role"] != "user":
                break
            pending.insert(0, message["content"])
        return "\n".join(pending)

    @property
    def tool_map(self) -> dict[str, ToolSpec]:
        """The catalogue by tool name, as `parse_plan` takes it."""
        return {tool.name: tool for tool in self.tools}

    @property
    def split(self) -> str:
        """``"train"`` or ``"test"``."""
        return split_of(self.scenario)


@dataclass(frozen=True)
class WorkloadStats:
    """Counts describing a list of requests."""

    requests: int
    conversations: int
    scenarios: int
    tools: int
    themes: int
    calls: int
    by_category: Mapping[str, int]


def split_of(scenario: int) -> str:
    """The split of a scenario: a salted SHA-256 of its number against `TRAIN_FRACTION`."""
    digest = hashlib.sha256(f"{_SPLIT_SALT}:{scenario}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return "train" if fraction < TRAIN_FRACTION else "test"


def load_workload(
    split: str = "all",
    limit: int | None = None,
    *,
    categories: Sequence[str] = WORKLOAD_CATEGORIES,
    data_dir: str | os.PathLike[str] | None = None,
) -> CaseList[PlanRequest]:
    """The requests of ``split`` (``"train"``, ``"test"`` or ``"all"``), at most ``limit``.

    Order is fixed: categories as listed, then BFCL's entry order, then turn order.
    ``skipped`` maps the id of each turn left out of the split to the reason. Raises
    ValueError for an unknown split and `DatasetError` for an unknown category.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (known: {', '.join(SPLITS)})")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    requests, skipped = _load(tuple(categories), bfcl_data_dir(data_dir))
    chosen = [r for r in requests if split in ("all", r.split)]
    left_out = {
        key: reason
        for key, reason in skipped.items()
        if split in ("all", split_of(_scenario(key.split(":")[0])))
    }
    return CaseList(chosen[:limit] if limit is not None else chosen, left_out)


def workload_stats(requests: Iterable[PlanRequest]) -> WorkloadStats:
    """Count requests, conversations, scenarios, distinct tools used, themes and calls."""
    items = list(requests)
    by_category: dict[str, int] = {}
    for request in items:
        by_category[request.category] = by_category.get(request.category, 0) + 1
    return WorkloadStats(
        requests=len(items),
        conversations=len({r.conversation_id for r in items}),
        scenarios=len({r.scenario for r in items}),
        tools=len({name for r in items for name in r.tools_used}),
        themes=len({r.theme for r in items}),
        calls=sum(len(r.plan.tasks) for r in items),
        by_category=by_category,
    )


def tool_themes(*, data_dir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Map every multi-turn tool name to its BFCL class (its theme)."""
    return {
        tool.name: class_name
        for class_name in FUNC_DOC_FILES
        for tool in load_class_tools(class_name, data_dir=data_dir)
    }


@lru_cache(maxsize=8)
def _load(
    categories: tuple[str, ...], root: Path
) -> tuple[tuple[PlanRequest, ...], dict[str, str]]:
    requests: list[PlanRequest] = []
    skipped: dict[str, str] = {}
    seen: set[tuple[int, str, str]] = set()
    for category in categories:
        for case in load_multi_turn(category, data_dir=root):
            for request in _requests(case, skipped):
                key = (request.scenario, request.query, request.plan_text)
                if key not in seen:
                    seen.add(key)
                    requests.append(request)
    return tuple(requests), skipped


def _requests(case: MultiTurnCase, skipped: dict[str, str]) -> Iterable[PlanRequest]:
    scenario = _scenario(case.id)
    history: list[Message] = []
    for turn, (messages, calls) in enumerate(zip(case.turns, case.ground_truth, strict=True)):
        query = "\n".join(m["content"] for m in messages if m["role"] == "user").strip()
        tools = tuple(t for t in case.tools_at(turn) if t.name not in case.excluded_functions)
        written = _plan(calls, {t.name: t for t in tools}) if calls else None
        plan = None
        if written is not None:
            try:
                plan = parse_plan(format_plan(written), {t.name: t for t in tools})
            except PlanError as exc:
                skipped[f"{case.id}:{turn}"] = str(exc)
        # A turn without user text (miss_func hands over held-back tools) answers the
        # previous request, which the base variant already holds.
        if plan is not None and query:
            yield PlanRequest(
                id=f"{case.id}:{turn}",
                conversation_id=case.id,
                scenario=scenario,
                category=case.category,
                turn=turn,
                theme=case.involved_classes,
                query=query,
                history=tuple(history),
                tools=tools,
                plan=plan,
                tools_used=tuple(dict.fromkeys(call.name for call in calls)),
            )
        if query:
            history.append({"role": "user", "content": query})
        if written is not None:
            history.append({"role": "assistant", "content": format_plan(written)})


def _plan(calls: Sequence[ToolCall], tools: Mapping[str, ToolSpec]) -> Plan:
    tasks = []
    for index, call in enumerate(calls, start=1):
        spec = tools.get(call.name)
        arguments = spec.canonical_arguments(call.arguments) if spec else dict(call.arguments)
        tasks.append(PlanTask(index=index, tool=call.name, arguments=arguments))
    return Plan(tuple(tasks))


def _scenario(case_id: str) -> int:
    tail = case_id.rsplit("_", 1)[-1]
    if not tail.isdigit():
        raise ValueError(f"BFCL multi-turn id without a scenario number: {case_id!r}")
    return int(tail)
