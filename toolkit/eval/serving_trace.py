"""A replay trace of consecutive agent requests built from BFCL v4 multi-turn conversations.

An agent does not continue a chat: before every action it rebuilds one request from fixed
rules, the tool catalogue, the user's requests so far and a sliding window of its last
actions with their observations (Tandem's GUI agent does the same with the screen). Each
ground-truth call of a conversation is one step: the request that should produce it.
Consecutive requests share the rules, the tools and the requests, and diverge where the
window starts once it slides, or where a new user request is appended.

BFCL records no observations (they come from running its Python backends), so by default
each action's observation is a deterministic placeholder (`placeholder_observation`);
pass `observe` to use real results. Everything here is pure: message lists and texts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolweave.eval.bfcl_multi_turn import MultiTurnCase
from toolweave.prompting.chat_template import Message, render_chat
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = [
    "DEFAULT_RULES",
    "AgentAction",
    "TraceStep",
    "agent_messages",
    "conversation_steps",
    "placeholder_observation",
    "render_trace",
    "replay_trace",
    "tool_catalogue",
]

DEFAULT_RULES = (
    "You are a tool-using agent. You complete the user's requests by calling the tools "
    "below, one call per reply.\n"
    "Rules:\n"
    "1. Reply with exactly one tool call as compact JSON: "
    '{"name":"tool_name","arguments":{...}}. No other text.\n'
    "2. Use only the tools listed and only their parameters; take argument values from "
    "the requests and from earlier observations, never invent them.\n"
    "3. Work on the latest request; earlier requests are context and are already done.\n"
    "4. Read the recent actions and their observations before choosing the next call; do "
    "not repeat a call that already succeeded.\n"
    "5. When an observation reports an error, fix the arguments or choose another tool."
)


@dataclass(frozen=True)
class AgentAction:
    """One action the agent took and what it observed."""

    call: ToolCall
    observation: str

    def render(self) -> str:
        args = json.dumps(dict(self.call.arguments), ensure_ascii=False, separators=(",", ":"))
        return f"{self.call.name}({args}) -> {self.observation}"


@dataclass(frozen=True)
class TraceStep:
    """One request of the trace: the messages sent and the call expected back."""

    session: str
    turn: int
    action: int
    messages: tuple[Message, ...]
    expected: ToolCall


def placeholder_observation(call: ToolCall) -> str:
    """A deterministic stand-in for a tool result (BFCL records none)."""
    return json.dumps({"tool": call.name, "status": "ok"}, separators=(",", ":"))


def _summary(tool: ToolSpec) -> str:
    # BFCL prefixes every description with its class blurb; keep the tool's own part.
    text = tool.description.split("Tool description:", 1)[-1].strip()
    return text.split("\n", 1)[0]


def _signature(tool: ToolSpec) -> str:
    props: dict[str, Any] = dict(tool.parameters.get("properties", {}))
    required = set(tool.required)
    parts = []
    for name, schema in props.items():
        kind = schema.get("type", "any") if isinstance(schema, dict) else "any"
        parts.append(f"{name}: {kind}" if name in required else f"{name}?: {kind}")
    return f"{tool.name}({', '.join(parts)})"


def tool_catalogue(tools: Sequence[ToolSpec]) -> str:
    """One line per tool: signature (``?`` marks optional parameters) and description."""
    return "\n".join(f"- {_signature(t)}: {_summary(t)}" for t in tools)


def agent_messages(
    case: MultiTurnCase,
    turn: int,
    history: Sequence[AgentAction],
    *,
    window: int = 3,
    rules: str = DEFAULT_RULES,
) -> list[dict[str, str]]:
    """The request the agent sends before its next action in `turn` of `case`.

    System: rules and the tools offered at `turn`. User: every request up to `turn`,
    then the last `window` actions of `history` with their observations.
    """
    if window < 0:
        raise ValueError("window must be >= 0")
    system = f"{rules}\n\nTools:\n{tool_catalogue(case.tools_at(turn))}"
    requests = [
        str(m.get("content", ""))
        for t in case.turns[: turn + 1]
        for m in t
        if m.get("role") == "user"
    ]
    lines = ["Requests (the last one is current):"]
    lines += [f"{i + 1}. {text}" for i, text in enumerate(requests)]
    recent = list(history)[-window:] if window else []
    lines.append("")
    if recent:
        first = len(history) - len(recent) + 1
        lines.append(f"Recent actions (last {len(recent)} of {len(history)}):")
        lines += [f"{first + i}. {a.render()}" for i, a in enumerate(recent)]
    else:
        lines.append("Recent actions: none yet.")
    lines.append("")
    lines.append("Next call:")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def conversation_steps(
    case: MultiTurnCase,
    *,
    window: int = 3,
    rules: str = DEFAULT_RULES,
    observe: Callable[[ToolCall], str] = placeholder_observation,
) -> list[TraceStep]:
    """One step per ground-truth call of `case`, in order."""
    steps: list[TraceStep] = []
    history: list[AgentAction] = []
    for turn, calls in enumerate(case.ground_truth):
        for call in calls:
            messages = agent_messages(case, turn, history, window=window, rules=rules)
            steps.append(TraceStep(case.id, turn, len(history), tuple(messages), call))
            history.append(AgentAction(call, observe(call)))
    return steps


def replay_trace(
    cases: Iterable[MultiTurnCase],
    *,
    steps: int | None = None,
    interleave: int = 1,
    window: int = 3,
    rules: str = DEFAULT_RULES,
    observe: Callable[[ToolCall], str] = placeholder_observation,
) -> list[TraceStep]:
    """Requests of `interleave` agents running at once, each working through conversations.

    Agents take turns, one request each; an agent that finishes its conversation takes
    the next one from `cases`. Stops after `steps` requests (all of them when None).
    """
    if interleave < 1:
        raise ValueError("interleave must be >= 1")
    pending = iter(cases)
    slots: list[list[TraceStep]] = []
    for _ in range(interleave):
        queue = _next_queue(pending, window, rules, observe)
        if queue is None:
            break
        slots.append(queue)
    out: list[TraceStep] = []
    while slots and (steps is None or len(out) < steps):
        for i in range(len(slots)):
            queue = slots[i]
            if steps is not None and len(out) >= steps:
                break
            if not queue:
                continue
            out.append(queue.pop(0))
            if not queue:
                slots[i] = _next_queue(pending, window, rules, observe) or []
        slots = [q for q in slots if q]
    return out


def _next_queue(
    pending: Iterable[MultiTurnCase],
    window: int,
    rules: str,
    observe: Callable[[ToolCall], str],
) -> list[TraceStep] | None:
    for case in pending:
        queue = conversation_steps(case, window=window, rules=rules, observe=observe)
        if queue:
            return queue
    return None


def render_trace(
    steps: Sequence[TraceStep],
    template: str | None,
    *,
    bos_token: str = "",
    eos_token: str = "",
) -> list[str]:
    """Each step's request as prompt text, rendered with the model's chat template."""
    return [
        render_chat(template, s.messages, bos_token=bos_token, eos_token=eos_token) for s in steps
    ]
