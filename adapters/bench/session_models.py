"""The chat models `toolweave bench session` compares, each behind one `SessionConfig`.

- ``chat_llama_cpp``: langchain-community's `ChatLlamaCpp` at its best settings, with
  llama-cpp-python's `LlamaDiskCache` (`native.baselines.chat_llama_cpp`);
- ``grammar``: llama-cpp-python's `create_chat_completion` under the JSON schema of the
  tools (`GrammarChat`), on toolweave's tool prompt;
- ``constrained``: `ChatToolweave(mode="constrained")` with no state reuse;
- ``toolweave``: `ChatToolweave` as shipped (mode ``lossless``, saved prompt states,
  session drafts);
- ``no_session_drafts``: the same without drafts from the session's past, to measure
  what those add on later turns;
- ``early_tools``: ``toolweave`` in an agent with `ProvisionalToolMiddleware` (the README's
  agent quick start): read-only tools start on the decoder's provisional or final call,
  while the message is still being written.

`TurnPolicy` is the same agent policy for all of them: the model call after the user's
message must call a tool, the call after the tool results answers in text. Every config
reports running totals of prompt tokens prefilled and decode passes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, PrivateAttr

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.messages import split_system, template_messages
from toolweave.adapters.langchain.provisional import ProvisionalToolMiddleware
from toolweave.errors import CallFormatError, ToolweaveError
from toolweave.events import ModelDone, ModelStart, PromptCacheEvent, ToolStart
from toolweave.formats import format_for_chat_template, get_format
from toolweave.native.baselines.chat_llama_cpp import GrammarCompletions, chat_llama_cpp
from toolweave.native.baselines.grammar import call_schema
from toolweave.native.caller import ToolCaller
from toolweave.native.states.store import StateStore
from toolweave.toolspec import ToolSpec

__all__ = ["CONFIGS", "GrammarChat", "SessionConfig", "TurnPolicy", "make_config"]

CONFIGS = (
    "chat_llama_cpp",
    "grammar",
    "constrained",
    "toolweave",
    "no_session_drafts",
    "early_tools",
)


@dataclass
class SessionConfig:
    """One configuration: its chat model, its running totals (prompt tokens prefilled,
    decode passes) and whether a forced call must name its tool (`ChatLlamaCpp` takes
    only a tool name as ``tool_choice``); `drafts` gives running totals of session-draft
    tokens verified and accepted (zero where there are none); `settle` waits for work
    a turn left running in the background (toolweave's state saves), between turns and
    untimed, so it never runs during another configuration's turn. `tools_in_template`:
    a configuration that names its tool renders the bound tools through a chat template
    with tool support, so they stay bound for the answer too. `middleware` is added to
    the agent's; `early_starts` collects the perf_counter times of tools it started
    early (`ProvisionalToolMiddleware`)."""

    name: str
    chat: BaseChatModel
    totals: Callable[[], tuple[int, int]]
    names_tool: bool = False
    tools_in_template: bool = False
    close: Callable[[], None] = field(default=lambda: None)
    drafts: Callable[[], tuple[int, int]] = field(default=lambda: (0, 0))
    settle: Callable[[], None] = field(default=lambda: None)
    prefill_ms: Callable[[], float] = field(default=lambda: 0.0)
    middleware: tuple[AgentMiddleware, ...] = ()
    early_starts: list[float] = field(default_factory=list)


class _Meter:
    """ChatToolweave's observer: prompt tokens it prefilled, the milliseconds that took
    (a restored state's restore and prefill, then the decoder's own prompt prefill) and
    its decode passes."""

    def __init__(self) -> None:
        self.prefilled = 0
        self.prefilled_ms = 0.0
        self.decode_passes = 0
        self.session_drafted = 0
        self.session_accepted = 0
        self._restored: PromptCacheEvent | None = None

    def __call__(self, event: object) -> None:
        if isinstance(event, ModelStart):
            self._restored = None
        elif isinstance(event, PromptCacheEvent):
            self._restored = event
        elif isinstance(event, ModelDone):
            s = event.stats
            if self._restored is not None:  # the store prefilled, the decoder reran one
                self.prefilled += self._restored.prefilled
                self.prefilled_ms += self._restored.ms
            else:
                self.prefilled += s.prompt_tokens - s.cached_tokens
            self.prefilled_ms += s.prompt_ms
            self.decode_passes += s.decode_passes
            self.session_drafted += s.session_drafted_tokens
            self.session_accepted += s.session_accepted_tokens

    def totals(self) -> tuple[int, int]:
        return self.prefilled, self.decode_passes

    def drafts(self) -> tuple[int, int]:
        return self.session_drafted, self.session_accepted

    def prefill_ms(self) -> float:
        return self.prefilled_ms


class GrammarChat(BaseChatModel):
    """llama-cpp-python's `create_chat_completion` as a LangChain chat model: a forced
    tool call under the JSON schema of the bound tools, on toolweave's tool prompt
    (`ToolCaller.messages`); with ``tool_choice="none"`` a text answer on that prompt,
    without tools a text answer on the model's chat template."""

    engine: Any
    completions: Any
    max_tokens: int = 256
    model_config = ConfigDict(arbitrary_types_allowed=True)
    _callers: dict[str, ToolCaller] = PrivateAttr(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "llama-cpp-python-grammar"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _caller(self, specs: list[ToolSpec], system: str | None) -> ToolCaller:
        key = repr(([s.to_dict() for s in specs], system))
        if key not in self._callers:
            self._callers[key] = ToolCaller(
                self.engine, specs, max_tokens=self.max_tokens, system=system
            )
        return self._callers[key]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        system, rest = split_system(messages)
        tools = kwargs.get("tools") or []
        choice = kwargs.get("tool_choice")
        if not tools or choice in (None, "auto"):
            fmt = format_for_chat_template(self.engine.chat_template)
            msgs = template_messages(rest, fmt)
            if system:
                msgs.insert(0, {"role": "system", "content": system})
            done = self.completions.complete(msgs, None, self.max_tokens)
            message = AIMessage(content=done.text)
            return ChatResult(generations=[ChatGeneration(message=message)])
        caller = self._caller([ToolSpec.from_dict(t["function"]) for t in tools], system)
        msgs = caller.messages(template_messages(rest, caller.fmt))
        if choice == "none":  # an answer with the tools still described, no grammar
            done = self.completions.complete(msgs, None, self.max_tokens)
            message = AIMessage(content=done.text)
        else:
            done = self.completions.complete(msgs, call_schema(caller), self.max_tokens)
            try:
                calls = get_format("json").parse(done.text)
            except CallFormatError:
                calls = []
            tool_calls = [
                {"name": c.name, "args": dict(c.arguments), "id": f"call_{i}"}
                for i, c in enumerate(calls)
            ]
            message = AIMessage(content="" if calls else done.text, tool_calls=tool_calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _with_call_text(message: Any) -> Any:
    """An assistant message whose only content is its tool calls, with the calls written
    as JSON text too: ChatLlamaCpp sends such a message's content as None, which chat
    templates that add the content to a string (SmolLM2's, many others) cannot render."""
    if not isinstance(message, AIMessage) or not message.tool_calls or message.content:
        return message
    text = json.dumps(
        [{"name": c["name"], "arguments": c["args"]} for c in message.tool_calls],
        ensure_ascii=False,
    )
    return message.model_copy(update={"content": text})


class TurnPolicy(AgentMiddleware):
    """The same turn for every configuration: after the user's message the model must
    call a tool (named by `expected` where the model takes only a name), after the tool
    results it answers in text (``tool_choice="none"``: the tools stay in the prompt of
    a configuration that describes them, as in OpenAI's API; `ChatLlamaCpp`, whose
    prompt holds no tools and which takes only a tool's name, answers with none bound,
    unless `tools_in_template`: then its template describes them and they stay bound,
    with no tool forced)."""

    def __init__(
        self,
        names_tool: bool,
        expected: Callable[[], str | None],
        tools_in_template: bool = False,
    ) -> None:
        super().__init__()
        self.names_tool = names_tool
        self.expected = expected
        self.tools_in_template = tools_in_template

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        if self.names_tool and not self.tools_in_template:
            request = request.override(messages=[_with_call_text(m) for m in request.messages])
        last = request.messages[-1] if request.messages else None
        if isinstance(last, HumanMessage):
            name = self.expected() if self.names_tool else None
            # ChatLlamaCpp passes a bare name on to llama-cpp-python, which then ignores
            # it and answers in text: only the OpenAI dict form forces the call.
            choice: Any = {"type": "function", "function": {"name": name}} if name else "any"
            return handler(request.override(tool_choice=choice))
        if self.names_tool:
            # ChatLlamaCpp takes no "none": without a forced name it decodes free text.
            tools = request.tools if self.tools_in_template else []
            return handler(request.override(tools=tools, tool_choice=None))
        return handler(request.override(tool_choice="none"))


def make_config(
    name: str,
    model_path: Path,
    *,
    n_ctx: int,
    max_tokens: int,
    llama_threads: int,
    state_dir: Path,
    chat_template: str | None = None,
    exact: bool = False,
) -> SessionConfig:
    """Build configuration `name` (one of `CONFIGS`) on `model_path`; its saved states
    (where it has any) live in ``state_dir/name``. `chat_template` (Jinja text) replaces
    the GGUF's template; ``grammar`` renders toolweave's own tool prompt and takes none.
    `exact`: ChatToolweave on the exact engine (``batch_invariant=True``)."""
    if name == "chat_llama_cpp":
        chat, perf = chat_llama_cpp(
            model_path,
            n_ctx=n_ctx,
            n_threads=llama_threads,
            max_tokens=max_tokens,
            # No LlamaDiskCache: it saves a state after every call, which made Gemma 3's
            # turns 2-3x slower; its prompt is short and its live prefix is reused anyway.
            disk_cache=None,
            chat_template=chat_template,
        )
        return SessionConfig(
            name,
            chat,
            perf.totals,
            names_tool=True,
            tools_in_template=chat_template is not None,
            close=chat.client.close,
            prefill_ms=perf.prefill_ms,
        )
    if name == "grammar":
        if chat_template is not None:
            raise ToolweaveError("the grammar configuration takes no chat template")
        probe = ChatToolweave(model=str(model_path), n_ctx=n_ctx, state_store=None)
        completions = GrammarCompletions(model_path, n_ctx=n_ctx, n_threads=llama_threads)
        chat = GrammarChat(engine=probe.engine, completions=completions, max_tokens=max_tokens)
        return SessionConfig(
            name,
            chat,
            completions.perf.totals,
            close=completions.close,
            prefill_ms=completions.perf.prefill_ms,
        )
    meter = _Meter()
    if name == "constrained":
        tw = ChatToolweave(
            model=str(model_path),
            mode="constrained",
            n_ctx=n_ctx,
            max_tokens=max_tokens,
            reuse_prompt_cache=False,
            state_store=None,
            observer=meter,
            private_engine=True,
            chat_template=chat_template,
            batch_invariant=exact,
        )
        return SessionConfig(
            name, tw, meter.totals, close=tw.close_engine, prefill_ms=meter.prefill_ms
        )
    if name in ("toolweave", "no_session_drafts", "early_tools"):
        # Its defaults; the default store's settings, in the bench's directory. An engine
        # of its own: another configuration's turn must not leave it its live KV cache.
        store = StateStore(state_dir / name)
        tw = ChatToolweave(
            model=str(model_path),
            n_ctx=n_ctx,
            max_tokens=max_tokens,
            state_store=store,
            observer=meter,
            session_drafts=name != "no_session_drafts",
            private_engine=True,
            chat_template=chat_template,
            batch_invariant=exact,
        )

        def close() -> None:
            store.close()
            tw.close_engine()

        early: list[float] = []
        middleware: tuple[AgentMiddleware, ...] = ()
        if name == "early_tools":

            def started(event: object) -> None:
                if isinstance(event, ToolStart) and event.early:
                    early.append(time.perf_counter())

            middleware = (ProvisionalToolMiddleware(observer=started),)
        return SessionConfig(
            name,
            tw,
            meter.totals,
            close=close,
            drafts=meter.drafts,
            settle=store.flush,
            prefill_ms=meter.prefill_ms,
            middleware=middleware,
            early_starts=early,
        )
    raise ValueError(f"unknown configuration {name!r} (known: {', '.join(CONFIGS)})")
