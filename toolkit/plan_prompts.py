"""Prompts of the plan-out agent (LLMCompiler / TinyAgent style) and the Arbiter's reply.

The Planner sees the tools, the plan format and a few examples, and writes a whole
plan at once; the Arbiter sees the request, the plan and the observations and decides
``Finish(answer)`` or ``Replan``. A replanning Planner sees the previous rounds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from toolweave.toolspec import ToolSpec

__all__ = [
    "ArbiterDecision",
    "arbiter_messages",
    "parse_arbiter",
    "planner_messages",
    "tool_signature",
]

PLANNER_RULES = (
    "You plan the tool calls that answer the user's request. Write one call per line as "
    '"N. tool(argument=value, ...)" with Python values, numbering from 1. Use $N for the '
    "result of call N. Put independent calls on separate lines so they run in parallel. "
    'End the plan with "N. join()". Use only these tools:'
)

ARBITER_RULES = (
    "You check whether the tool results answer the user's request. Reply with one "
    'line "Thought: ..." and then either "Action: Finish(" followed by your answer to '
    'the user, written from the results, and ")", or "Action: Replan" when the results '
    "do not answer the request."
)


def tool_signature(spec: ToolSpec) -> str:
    """``name(arg: type, opt: type = optional): description`` on one line."""
    params = []
    for key in spec.argument_order:
        schema = spec.property_schema(key)
        kind = schema.get("type", "any")
        if "enum" in schema:
            kind = " | ".join(json.dumps(v) for v in schema["enum"])
        params.append(f"{key}: {kind}" + ("" if key in spec.required else " = optional"))
    return f"{spec.name}({', '.join(params)}): {spec.description}"


def planner_messages(
    tools: Sequence[ToolSpec],
    query: str,
    *,
    examples: Sequence[tuple[str, str]] = (),
    previous: Sequence[tuple[str, str]] = (),
) -> list[tuple[str, str]]:
    """(role, text) messages for the Planner; `examples` are (query, plan) pairs and
    `previous` the (plan, observations) of earlier rounds of this request."""
    system = PLANNER_RULES + "\n" + "\n".join(f"- {tool_signature(t)}" for t in tools)
    msgs: list[tuple[str, str]] = [("system", system)]
    for q, plan in examples:
        msgs += [("user", q), ("assistant", plan)]
    text = query
    if previous:
        rounds = "\n\n".join(f"Plan:\n{p}\nResults:\n{o}" for p, o in previous)
        text = f"{query}\n\nEarlier attempts did not finish the request:\n{rounds}\nNew plan:"
    msgs.append(("user", text))
    return msgs


#: One worked Arbiter exchange (a different domain from any demo request, so a model
#: that copies it is caught by tests rather than looking right).
ARBITER_EXAMPLE = (
    "Request: When does the library open on Saturday?\n\nPlan:\n"
    '1. opening_hours(place="city library", day="Saturday")\n2. join()\n\nResults:\n'
    '1. opening_hours(place="city library", day="Saturday")\n'
    'Observation: {"opens": "09:00", "closes": "14:00"}',
    "Thought: The results give Saturday's opening hours.\n"
    "Action: Finish(The city library opens at 09:00 on Saturday and closes at 14:00.)",
)


def arbiter_messages(query: str, plan: str, observations: str) -> list[tuple[str, str]]:
    """(role, text) messages for the Arbiter."""
    return [
        ("system", ARBITER_RULES),
        ("user", ARBITER_EXAMPLE[0]),
        ("assistant", ARBITER_EXAMPLE[1]),
        ("user", f"Request: {query}\n\nPlan:\n{plan}\n\nResults:\n{observations}"),
    ]


@dataclass(frozen=True)
class ArbiterDecision:
    """``finish`` with an answer, or not (replan); `thought` as written."""

    finish: bool
    answer: str
    thought: str


_ACTION = re.compile(r"Action:\s*(Finish\((?P<answer>.*)\)|Replan)", re.S)
_THOUGHT = re.compile(r"Thought:\s*(?P<thought>[^\n]*)")


def parse_arbiter(text: str) -> ArbiterDecision:
    """Read an Arbiter reply; anything without a Finish action means replan."""
    thought = _THOUGHT.search(text)
    action = _ACTION.search(text)
    said = thought.group("thought").strip() if thought else ""
    if action and action.group("answer") is not None:
        return ArbiterDecision(True, action.group("answer").strip(), said)
    return ArbiterDecision(False, "", said)
