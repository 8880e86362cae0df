"""Prompts of the plan-out agent (LLMCompiler / TinyAgent style) and the Arbiter's reply.

The Planner sees the tools, the plan format and a few examples, and writes a whole
plan at once; the Arbiter sees the request, the plan and the observations and decides
``Finish(answer)`` or ``Replan``. A replanning Planner sees the previous rounds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from toolweave.toolspec import ToolSpec

__all__ = [
    "ARBITER_EXAMPLES",
    "arbiter_messages",
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


#: Worked Arbiter exchanges: a finish, a replan after a tool error, a finish from two
#: results and a finish after an action. Their domains differ from every demo request,
#: so a model that copies an example is caught by tests rather than looking right. They
#: are most of the Arbiter's prompt and never change, so their KV state is cached.
ARBITER_EXAMPLES: tuple[tuple[str, str], ...] = (
    (
        "Request: When does the library open on Saturday?\n\nPlan:\n"
        '1. opening_hours(place="city library", day="Saturday")\n2. join()\n\nResults:\n'
        '1. opening_hours(place="city library", day="Saturday")\n'
        'Observation: {"opens": "09:00", "closes": "14:00"}',
        "Thought: The results give Saturday's opening hours.\n"
        "Action: Finish(The city library opens at 09:00 on Saturday and closes at 14:00.)",
    ),
    (
        "Request: Book a table for two at Luigi's tonight at 8.\n\nPlan:\n"
        '1. find_restaurant(name="Luigi\'s")\n'
        '2. book_table(restaurant=$1, people=2, time="20:00")\n3. join()\n\nResults:\n'
        '1. find_restaurant(name="Luigi\'s")\nObservation: {"id": "r-17"}\n'
        '2. book_table(restaurant="r-17", people=2, time="20:00")\n'
        "Observation: Error: no table is free at 20:00",
        "Thought: The booking failed because 20:00 is full, so the request is not done.\n"
        "Action: Replan",
    ),
    (
        "Request: How long is the train from Turin to Milan, and what does a ticket cost?"
        '\n\nPlan:\n1. train_duration(origin="Turin", destination="Milan")\n'
        '2. ticket_price(origin="Turin", destination="Milan")\n3. join()\n\nResults:\n'
        '1. train_duration(origin="Turin", destination="Milan")\n'
        'Observation: {"minutes": 55}\n'
        '2. ticket_price(origin="Turin", destination="Milan")\n'
        'Observation: {"price": 13.5, "currency": "EUR"}',
        "Thought: The results give both the duration and the price.\n"
        "Action: Finish(The train from Turin to Milan takes 55 minutes and a ticket costs "
        "13.50 euros.)",
    ),
    (
        "Request: Turn off the kitchen lights.\n\nPlan:\n"
        '1. set_light(room="kitchen", on=False)\n2. join()\n\nResults:\n'
        '1. set_light(room="kitchen", on=False)\nObservation: {"room": "kitchen", "on": false}',
        "Thought: The light tool confirms the kitchen lights are off.\n"
        "Action: Finish(The kitchen lights are now off.)",
    ),
)
#: The first worked exchange (kept for callers that show one).
ARBITER_EXAMPLE = ARBITER_EXAMPLES[0]


def arbiter_messages(query: str, plan: str, observations: str) -> list[tuple[str, str]]:
    """(role, text) messages for the Arbiter: rules, the worked exchanges, the request."""
    msgs: list[tuple[str, str]] = [("system", ARBITER_RULES)]
    for question, answer in ARBITER_EXAMPLES:
        msgs += [("user", question), ("assistant", answer)]
    msgs.append(("user", f"Request: {query}\n\nPlan:\n{plan}\n\nResults:\n{observations}"))
    return msgs
