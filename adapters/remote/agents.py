"""`toolweave run --model openai:URL`: both agents on a remote chat model.

The plan-out agent and LangChain's `create_agent` loop run unchanged on the remote
model; MCP, consent, the call ledger and the display are the same as in-process. What
needs the local engine cannot run: `check_remote_options` refuses the options that
would then silently do nothing (``--mode``, ``--chat-template``, ``--compare``) and
names the ones it ignores (the prompt-state cache options: the server keeps its own).
`RemoteTrace` shows each remote model message on the live display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage

from toolweave.events import ModelStart, Note, Observer

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.outputs import LLMResult
    from langchain_core.tools import BaseTool

    from toolweave.consent import ConsentPolicy
    from toolweave.tools import Tool

__all__ = [
    "IGNORED_OPTIONS",
    "REFUSED_OPTIONS",
    "RemoteTrace",
    "check_remote_options",
    "react_summary",
    "run_remote_plan",
    "run_remote_react",
]

#: Options refused with a remote model, and why (running anyway would mislead).
REFUSED_OPTIONS: dict[str, str] = {
    "--mode": "the server decides how it decodes (e.g. toolweave serve --mode)",
    "--chat-template": "the server applies its own chat template",
    "--compare": "the baseline decodes again on the local engine",
}
#: Options ignored with a remote model: they only save work of the local engine.
IGNORED_OPTIONS = ("--prompt-cache", "--no-prompt-cache", "--cache-limit")
#: Longest model text shown on one display line.
MAX_SHOWN = 300


def check_remote_options(given: Mapping[str, Any]) -> list[str]:
    """Check `run`'s options (flag -> value; None or False when not given) against a
    remote model: a `ValueError` names a refused one, the result holds one notice
    per ignored one."""
    refused = [flag for flag in REFUSED_OPTIONS if given.get(flag) not in (None, False)]
    if refused:
        why = "; ".join(f"{flag}: {REFUSED_OPTIONS[flag]}" for flag in refused)
        raise ValueError(f"{', '.join(refused)} cannot be used with a remote model ({why})")
    ignored = [flag for flag in IGNORED_OPTIONS if given.get(flag) not in (None, False)]
    return [
        f"ignored with a remote model: {flag} (prompt states are kept by the server)"
        for flag in ignored
    ]


class RemoteTrace(BaseCallbackHandler):
    """Shows each remote model message on `observer`: its start, then its calls or
    text and the tokens the server counted."""

    def __init__(self, observer: Observer, label: str = "remote") -> None:
        self.observer = observer
        self.label = label

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        self.observer(ModelStart(self.label))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                if isinstance(message, AIMessage):
                    self.observer(Note(_message_line(message)))


def run_remote_react(
    chat: BaseChatModel,
    tools: Sequence[BaseTool],
    request: str,
    observer: Observer,
    *,
    system: str,
    max_steps: int,
) -> tuple[list[BaseMessage], str, dict[str, Any]]:
    """LangChain's agent loop on `chat`: its messages, the answer and a summary."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from toolweave.adapters.langchain.provisional import ProvisionalToolMiddleware

    # The middleware starts nothing early on a remote model; it shows each tool's run.
    agent = create_agent(
        chat,
        list(tools),
        system_prompt=system,
        middleware=[ProvisionalToolMiddleware(observer=observer)],
    )
    config: Any = {"recursion_limit": max_steps, "callbacks": [RemoteTrace(observer)]}
    out = agent.invoke({"messages": [HumanMessage(request)]}, config)
    messages: list[BaseMessage] = list(out["messages"])
    last = messages[-1] if messages else None
    answer = last.content if isinstance(last, AIMessage) and isinstance(last.content, str) else ""
    return messages, answer or "(no answer)", react_summary(messages)


def run_remote_plan(
    chat: BaseChatModel,
    tools: Sequence[Tool],
    request: str,
    observer: Observer,
    *,
    examples: Sequence[tuple[str, str]] = (),
    consent: ConsentPolicy | None = None,
) -> tuple[str, dict[str, Any]]:
    """The plan-out agent on `chat` (its free-text plans are parsed): answer, summary."""
    from toolweave.adapters.langchain.plan_agent import PlanOutAgent

    agent = PlanOutAgent(chat, tools, examples=examples, observer=observer, consent=consent)
    result = agent.run(request)
    return result.answer, result.summary()


def react_summary(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """Model messages, tool calls and the tokens the server counted."""
    ai = [m for m in messages if isinstance(m, AIMessage)]
    usage: list[Mapping[str, Any]] = [m.usage_metadata or {} for m in ai]
    return {
        "model_messages": len(ai),
        "tool_calls": sum(len(m.tool_calls) for m in ai),
        "prompt_tokens": sum(u.get("input_tokens", 0) for u in usage),
        "output_tokens": sum(u.get("output_tokens", 0) for u in usage),
    }


def _message_line(message: AIMessage) -> str:
    usage: Mapping[str, Any] = message.usage_metadata or {}
    tokens = (
        f"{usage.get('input_tokens', 0)} prompt tokens, {usage.get('output_tokens', 0)} "
        "output tokens"
        if usage
        else "no token counts"
    )
    if message.tool_calls:
        calls = ", ".join(f"{c['name']}({_args(c['args'])})" for c in message.tool_calls)
        return f"  message done ({tokens}): calls {calls[:MAX_SHOWN]}"
    text = message.content if isinstance(message.content, str) else str(message.content)
    return f"  message done ({tokens})\n  says: {' '.join(text.split())[:MAX_SHOWN]}"


def _args(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())
