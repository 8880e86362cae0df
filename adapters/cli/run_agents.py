"""The agents of `toolweave run` on the local model: the plan-out agent and LangChain's.

`run_plan` runs the Planner/executor/Arbiter agent and records what each of its LLM
calls saw and cost (for ``--compare``); `run_agent` runs LangChain's `create_agent` on
`ChatToolweave` with early starts of read-only tools. Beside them: the prompt state
store they share, the demo servers' plan examples nearest a request, the display of a
denied call and the summary of the react agent's messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import BaseTool

    from toolweave.adapters.cli.display import RunTrace
    from toolweave.adapters.mcp.client import MCPHub
    from toolweave.consent import ConsentDecision, ConsentPolicy, ConsentRequest
    from toolweave.events import RunEvent
    from toolweave.native.states.store import StateStore

__all__ = [
    "MAX_STEPS",
    "SYSTEM",
    "LLMCall",
    "demo_examples",
    "denied_to",
    "nearest_examples",
    "react_summary",
    "run_agent",
    "run_plan",
    "state_store",
]

#: Agent graph steps (model and tool nodes) before a run is stopped.
MAX_STEPS = 16
#: One LLM call of the plan-out agent: its messages, "planner" or "arbiter", what the
#: model was bound with (its grammar), and what it cost in this run ("stats", "ms", "text").
LLMCall = tuple[tuple[tuple[str, str], ...], str, dict[str, Any], dict[str, Any]]

SYSTEM = (
    "You are a helpful assistant on the user's computer. Use the tools to look things "
    "up or act, then answer briefly from the tool results."
)


def run_agent(
    tools: list[BaseTool],
    request: str,
    model: str | None,
    mode: str,
    max_tokens: int,
    trace: RunTrace,
    store: StateStore | None = None,
    chat_options: dict[str, Any] | None = None,
) -> tuple[list[BaseMessage], str]:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage

    from toolweave.adapters.langchain.chat_model import ChatToolweave
    from toolweave.adapters.langchain.provisional import ProvisionalToolMiddleware

    chat = ChatToolweave(
        model=model,
        mode=mode,
        max_tokens=max_tokens,
        auto_calls="user_turn",
        observer=trace,
        state_store=store,
        **(chat_options or {}),
    )
    agent = create_agent(
        chat, tools, system_prompt=SYSTEM, middleware=[ProvisionalToolMiddleware(observer=trace)]
    )
    out = agent.invoke({"messages": [HumanMessage(request)]}, {"recursion_limit": MAX_STEPS})
    _keep_last_prompt(chat, store)
    messages: list[BaseMessage] = list(out["messages"])
    last = messages[-1]
    answer = last.content if isinstance(last, AIMessage) and isinstance(last.content, str) else ""
    return messages, answer or "(no answer)"


def state_store(directory: Path, disk_limit: str | None) -> StateStore:
    """The store; `disk_limit` None means the default (the variable, else 4 GiB)."""
    from toolweave.native.states.store import StateStore

    return StateStore(directory, disk_limit=disk_limit)


def _keep_last_prompt(chat: Any, store: StateStore | None) -> None:
    """Save the last prompt's state too (the Arbiter's, or the agent's last message):
    states are otherwise saved when the next prompt takes the slot, and none comes."""
    if store is not None:
        store.save(chat.engine, 0)


def demo_examples() -> list[tuple[str, str]]:
    from toolweave.adapters.demo_servers import plan_examples

    return plan_examples()


def nearest_examples(
    examples: Sequence[tuple[str, str]], request: str, k: int = 2
) -> list[tuple[str, str]]:
    """The `k` examples whose requests are most like `request` (ToolRAG's embedder),
    the most similar last: a tiny Planner copies the example nearest the query."""
    from toolweave.prompting.training import default_embedder

    if len(examples) <= k:
        return list(examples)
    queries = [q for q, _ in examples]
    embedder = default_embedder([*queries, request])
    scores = embedder.embed(queries) @ embedder.embed([request])[0]
    best = sorted(range(len(examples)), key=lambda i: -float(scores[i]))[:k]
    return [examples[i] for i in reversed(best)]


def run_plan(
    hub: MCPHub,
    request: str,
    model: str | None,
    mode: str,
    max_tokens: int,
    examples: Sequence[tuple[str, str]],
    trace: RunTrace,
    store: StateStore | None = None,
    consent: ConsentPolicy | None = None,
    chat_options: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any], list[LLMCall]]:
    from toolweave.adapters.langchain.chat_model import ChatToolweave
    from toolweave.adapters.langchain.plan_agent import PlanOutAgent
    from toolweave.events import ModelDone, PromptCacheEvent

    done: list[dict[str, Any]] = []  # the cost of each model message, in order
    cache_ms = [0.0]  # the state store's prefill before the message being decoded

    def observe(event: RunEvent) -> None:
        trace(event)
        if isinstance(event, PromptCacheEvent):
            cache_ms[0] = event.ms
        elif isinstance(event, ModelDone):
            stats = event.stats
            ms = cache_ms[0] + stats.prompt_ms + stats.total_ms
            done.append({"stats": stats.to_dict(), "ms": ms, "text": event.text})
            cache_ms[0] = 0.0

    chat = ChatToolweave(
        model=model,
        mode=mode,
        max_tokens=max(max_tokens, 256),
        observer=observe,
        state_store=store,
        **(chat_options or {}),
    )
    agent = PlanOutAgent(chat, hub.tools, examples=examples, observer=trace, consent=consent)
    result = agent.run(request)
    _keep_last_prompt(chat, store)
    summary = result.summary()
    # What each LLM call saw and cost, for --compare.
    calls: list[LLMCall] = []
    for r in result.rounds:
        for msgs, kind, bound in (
            (r.planner_messages, "planner", agent.planner_kwargs),
            (r.arbiter_messages, "arbiter", agent.arbiter_kwargs),
        ):
            cost = done[len(calls)] if len(calls) < len(done) else {}
            calls.append((msgs, kind, bound, cost))
    return result.answer, summary, calls


def denied_to(trace: RunTrace) -> Callable[[ConsentRequest, ConsentDecision], None]:
    """Shows a denied call of the react agent's tool node on the display."""
    from toolweave.events import CallDenied

    def show(request: ConsentRequest, decision: ConsentDecision) -> None:
        trace(CallDenied(request.tool, dict(request.arguments), decision.reason, decision.by))

    return show


def react_summary(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    from langchain_core.messages import AIMessage

    ai = [m for m in messages if isinstance(m, AIMessage)]
    stats = [m.response_metadata.get("stats", {}) for m in ai]
    return {
        "model_messages": len(ai),
        "tool_calls": sum(len(m.tool_calls) for m in ai),
        "decode_passes": sum(s.get("decode_passes", 0) for s in stats),
        "decode_ms": sum(s.get("total_ms", 0.0) for s in stats),
    }
