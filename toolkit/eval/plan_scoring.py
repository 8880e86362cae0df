"""Planner accuracy: does a plan's DAG match the ground truth's DAG (LLMCompiler, Agent-X)?

A plan is a DAG: a node per call, an edge from task j to task i when i's arguments refer
to ``$j``. Two plans match when some one-to-one pairing of their tasks pairs calls that
match BFCL-style (`toolweave.eval.scoring.match_call`: same tool, each argument equal after
BFCL's string normalisation, optional arguments may be left out) and maps every edge of
one onto an edge of the other. The order of independent tasks does not matter.
"""

from __future__ import annotations

from collections.abc import Mapping

from toolweave.eval.scoring import ExpectedCall, MatchResult, match_call
from toolweave.plan.format import Plan, PlanTask
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["plan_matches"]

#: Beyond this many tasks the pairing search is limited to the written order.
_SEARCH_LIMIT = 8


def plan_matches(plan: Plan, truth: Plan, tools: Mapping[str, ToolSpec]) -> MatchResult:
    """Whether `plan` and `truth` have the same DAG of calls (see module doc)."""
    if not plan.joined:
        return MatchResult(False, "the plan has no join()")
    a, b = plan.tasks, truth.tasks
    if len(a) != len(b):
        return MatchResult(False, f"expected {len(b)} call(s), got {len(a)}")
    fits = [[_fits(x, y, tools) for y in b] for x in a]
    edges_a = _edges(a)
    edges_b = _edges(b)
    if len(edges_a) != len(edges_b):
        return MatchResult(False, f"expected {len(edges_b)} dependencies, got {len(edges_a)}")
    if len(a) > _SEARCH_LIMIT:
        pairing = list(range(len(a)))
        ok = all(fits[i][i] for i in pairing) and _maps(pairing, a, b, edges_a, edges_b)
        return MatchResult(True) if ok else MatchResult(False, "calls differ (written order)")
    if _search([], set(), fits, a, b, edges_a, edges_b):
        return MatchResult(True)
    for i, row in enumerate(fits):
        if not any(row):
            return MatchResult(False, f"task {a[i].index} ({a[i].tool}) matches no expected call")
    return MatchResult(False, "the dependencies differ")


def _fits(task: PlanTask, expected: PlanTask, tools: Mapping[str, ToolSpec]) -> bool:
    spec = tools.get(expected.tool)
    acceptable: dict[str, tuple[object, ...]] = {
        k: (_plain(v),) for k, v in expected.arguments.items()
    }
    if spec is not None:  # optional arguments the truth leaves out may be left out here too
        for key in spec.argument_order:
            if key not in acceptable and key not in spec.required:
                acceptable[key] = ("",)
    want = ExpectedCall(expected.tool, acceptable)
    call = ToolCall(task.tool, {k: _plain(v) for k, v in task.arguments.items()})
    return bool(match_call(call, want, spec))


def _plain(value: object) -> object:
    """References compare by their text (``$2``), so only equal references match."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _edges(tasks: tuple[PlanTask, ...]) -> set[tuple[int, int]]:
    position = {t.index: i for i, t in enumerate(tasks)}
    return {(position[d], i) for i, t in enumerate(tasks) for d in t.dependencies if d in position}


def _maps(
    pairing: list[int],
    a: tuple[PlanTask, ...],
    b: tuple[PlanTask, ...],
    edges_a: set[tuple[int, int]],
    edges_b: set[tuple[int, int]],
) -> bool:
    return {(pairing[x], pairing[y]) for x, y in edges_a} == edges_b


def _search(
    pairing: list[int],
    used: set[int],
    fits: list[list[bool]],
    a: tuple[PlanTask, ...],
    b: tuple[PlanTask, ...],
    edges_a: set[tuple[int, int]],
    edges_b: set[tuple[int, int]],
) -> bool:
    i = len(pairing)
    if i == len(a):
        return _maps(pairing, a, b, edges_a, edges_b)
    for j in range(len(b)):
        if j not in used and fits[i][j]:
            pairing.append(j)
            used.add(j)
            if _search(pairing, used, fits, a, b, edges_a, edges_b):
                return True
            pairing.pop()
            used.discard(j)
    return False
