"""How `ChatToolweave` decodes one request: `ChatDecoding`, the mixin that plans the
request, renders its prompt, starts it from the state store and runs the decoder it
asks for (a tool caller, greedy or sampled text, text under a JSON-schema or bound
grammar), with the engine lock held from the first decision to the 'done' event; and
the small helpers those decoders are given (the sampler, the JSON answer's grammar, the
tokens that would open a call)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage

from toolweave.adapters.langchain.caches import CallerCache
from toolweave.adapters.langchain.chat_states import PromptStates, conversation_session
from toolweave.adapters.langchain.messages import message_text, split_system, template_messages
from toolweave.adapters.langchain.request_plan import (
    RequestPlan,
    calls_since_user,
    plan_request,
    repeats,
)
from toolweave.errors import ToolweaveError
from toolweave.events import CallEvent
from toolweave.grammar.call import arguments_schema
from toolweave.native.caller import ToolCaller, template_format
from toolweave.native.chat import chat_tokens
from toolweave.native.decode.exspec import exspec_table, generate_with_exspec
from toolweave.native.decode.text import first_token, generate_text
from toolweave.native.engine import Engine
from toolweave.native.sampling import Sampler
from toolweave.sampling import Sampling
from toolweave.toolspec import ToolSpec

__all__ = ["ChatDecoding"]


class ChatDecoding(PromptStates):
    """The decoding side of `ChatToolweave`: a mixin over the model's fields and
    settings declared below (for type checking only, so that pydantic takes none of
    them for a field of its own)."""

    if TYPE_CHECKING:
        model: str | None
        mode: str
        stop: list[str] | None
        auto_calls: Literal["model", "user_turn"]
        call_format: str | None
        chat_template: str | None
        session_drafts: bool
        template_tools: bool | None
        _callers: CallerCache

        @property
        def engine(self) -> Engine: ...

        def sampling_for(self, kwargs: Mapping[str, Any]) -> Sampling: ...

        def max_calls_for(self, parallel_tool_calls: bool | None) -> int | None: ...

    def _caller(
        self, specs: Sequence[ToolSpec], system: str | None, max_calls: int | None
    ) -> ToolCaller:
        return self._callers.get(
            specs,
            system,
            max_calls,
            lambda: ToolCaller(
                self.engine,
                specs,
                fmt=self.call_format,
                max_calls=max_calls,
                max_tokens=self.max_tokens,
                system=system,
                chat_template=self.chat_template,
                session_drafts=self.session_drafts,
                template_tools=self.template_tools,
            ),
        )

    def _render(self, system: str | None, messages: Sequence[BaseMessage]) -> list[int]:
        eng = self.engine
        template = self.chat_template
        fmt = template_format(template if template is not None else eng.chat_template)
        msgs = template_messages(messages, fmt)
        if system:
            msgs.insert(0, {"role": "system", "content": system})
        return chat_tokens(eng, msgs, template=template)

    def _grammar_text(
        self,
        prompt: list[int],
        plan: RequestPlan,
        rest: Sequence[BaseMessage],
        kwargs: Mapping[str, Any],
    ) -> Iterator[CallEvent]:
        """Text under a bound grammar. With ``bind(exspec=[example texts])`` and a mode
        past `constrained`, ExSpec drafts from an n-gram table of those examples and the
        last user message, verified so the tokens equal plain greedy decoding's."""
        examples = kwargs.get("exspec")
        grammar = plan.extra["grammar"]
        sampler = _sampler(self.sampling_for(kwargs))
        if examples is None or self.mode == "constrained":
            return generate_text(
                self.engine, prompt, max_tokens=self.max_tokens, grammar=grammar, sampler=sampler
            )
        if isinstance(examples, str) or not all(isinstance(e, str) for e in examples):
            raise ToolweaveError("bind(exspec=...) takes a list of example texts")
        query = next((message_text(m) for m in reversed(rest) if isinstance(m, HumanMessage)), "")
        table = exspec_table(self.engine, list(examples), query)
        return generate_with_exspec(
            self.engine,
            prompt,
            table=table,
            max_tokens=self.max_tokens,
            grammar=grammar,
            learn=f"grammar:{hashlib.sha1(grammar.encode()).hexdigest()[:12]}",
            sampler=sampler,
        )

    def _decode(
        self,
        messages: Sequence[BaseMessage],
        emit: Callable[[CallEvent, ToolCaller | None], None],
        **kwargs: Any,
    ) -> None:
        """Decode the whole response on this thread, handing each event to `emit`.

        The engine lock is held from the first decision to the 'done' event (the
        decision and the decoding see the same cache) by this plain call, never by a
        suspended generator."""
        eng = self.engine
        restored: list[int] = []  # prompt tokens the state store supplied, if it ran
        with eng.lock:
            for ev, caller in self._events(messages, restored, **kwargs):
                if ev.result is not None and restored:
                    # The store filled the sequence just before the decoder looked: only
                    # what it restored was read from a cache, not what it prefilled.
                    stats = dataclasses.replace(ev.result.stats, cached_tokens=restored[-1])
                    ev = dataclasses.replace(ev, result=dataclasses.replace(ev.result, stats=stats))
                emit(ev, caller)
        store = self.store
        if restored and store is not None:
            # The prompt and the response kept after it: what this session's next prompt
            # extends, saved off the request path (and on disk for a new process).
            store.save_later(eng, 0)

    def _events(
        self, messages: Sequence[BaseMessage], restored: list[int], **kwargs: Any
    ) -> Iterator[tuple[CallEvent, ToolCaller | None]]:
        """Decode the response; events of the tool caller (None for text and JSON).
        Only `_decode` drives it, with the engine lock held."""
        plan = plan_request(
            kwargs.get("tools"),
            kwargs.get("tool_choice"),
            kwargs.get("response_format"),
            kwargs.get("grammar"),
        )
        if kwargs.get("model") not in (None, self.model):
            raise ToolweaveError(
                "a per-call 'model' is not supported: make another ChatToolweave(model=...)"
            )
        system, rest = split_system(messages)
        session = conversation_session(system, rest)
        eng = self.engine
        max_calls = self.max_calls_for(kwargs.get("parallel_tool_calls"))
        stop = [*(self.stop or ()), *(kwargs.get("stop") or ())]
        sampling = self.sampling_for(kwargs)
        if not self.reuse_prompt_cache:
            eng.seq_remove(0)
        if plan.kind == "text" and not plan.specs:
            prompt = self._render(system, rest)
            self._restore(eng, prompt, restored, session)
            sampler = _sampler(sampling)
            for ev in generate_text(
                eng, prompt, max_tokens=self.max_tokens, stop=stop, sampler=sampler
            ):
                yield ev, None
            return
        if plan.kind == "grammar":  # text under a caller's grammar (model.bind(grammar=))
            prompt = self._render(system, rest)
            self._restore(eng, prompt, restored, session)
            yield from ((ev, None) for ev in self._grammar_text(prompt, plan, rest, kwargs))
            return
        if plan.kind == "json" and plan.schema is not None and not plan.specs:
            prompt = self._render(system, rest)
            self._restore(eng, prompt, restored, session)
            grammar = _json_grammar(plan.schema)
            sampler = _sampler(sampling)
            for ev in generate_text(
                eng, prompt, max_tokens=self.max_tokens, grammar=grammar, sampler=sampler
            ):
                yield ev, None
            return
        caller = self._caller(plan.specs, system, max_calls)
        msgs = template_messages(rest, caller.fmt, tool_calls=caller.template_tools)
        if self._stores_states:
            self._restore(eng, caller.prompt_tokens(msgs), restored, session)
        # tool_choice "none" with tools bound: a text (or JSON) answer on the tool prompt.
        text = plan.kind in ("text", "json") or (
            plan.kind == "auto" and not self._wants_call(caller, rest, msgs)
        )
        if not text and plan.kind == "auto" and self.auto_calls == "user_turn":
            earlier = calls_since_user(rest)
            if earlier:
                # After tool results: a call repeating one already answered would
                # loop; the model answers in text instead (events held until known).
                held = list(caller.events(msgs, self.mode, sampling=sampling))
                result = held[-1].result
                if result is None or not repeats(result, earlier):
                    yield from ((ev, caller) for ev in held)
                    return
                text = True
        if text and plan.schema is not None:
            # Tools and a structured response bound together: the answer is the JSON.
            grammar = _json_grammar(plan.schema)
            for ev in generate_text(
                eng,
                caller.prompt_tokens(msgs),
                max_tokens=self.max_tokens,
                grammar=grammar,
                sampler=_sampler(sampling),
            ):
                yield ev, None
            return
        if text:
            # A text answer: it may not open a tool call, and stops if it writes one.
            opener = caller.fmt.open
            for ev in generate_text(
                eng,
                caller.prompt_tokens(msgs),
                max_tokens=self.max_tokens,
                stop=[*stop, opener] if opener else stop,
                not_first=_opening_tokens(eng, opener),
                sampler=_sampler(sampling),
            ):
                yield ev, None
            return
        for ev in caller.events(msgs, self.mode, sampling=sampling):
            yield ev, caller

    def _wants_call(
        self, caller: ToolCaller, rest: Sequence[BaseMessage], msgs: list[dict[str, Any]]
    ) -> bool:
        if self.auto_calls == "user_turn" and rest and isinstance(rest[-1], HumanMessage):
            return True
        eng = self.engine
        piece = eng.detokenize([first_token(eng, caller.prompt_tokens(msgs))]).lstrip()
        opener = (caller.fmt.open or "{").lstrip()
        return bool(piece) and (opener.startswith(piece) or piece.startswith(opener))


def _sampler(sampling: Sampling) -> Sampler | None:
    """A fresh sampler for one decode (None: greedy)."""
    return None if sampling.greedy else Sampler(sampling)


def _json_grammar(schema: Mapping[str, Any]) -> str:
    """The grammar of a JSON answer to `schema`, bounded like every call's arguments."""
    spec = ToolSpec.from_dict({"name": "output", "parameters": schema})
    return "start: %json " + json.dumps(arguments_schema(spec))


def _opening_tokens(engine: Engine, opener: str) -> list[int]:
    """Tokens that would begin `opener` (as the first token of a response)."""
    if not opener:
        return []
    first = engine.tokenize(opener, parse_special=True)[:1]
    return first
