"""`ToolCaller`: one set of tools on one engine, answering requests with tool calls.

It owns the prompt (the model's chat template), the shared call grammar, and the
dispatch to a decoding mode. Sequence 0 holds the conversation; consecutive requests
reuse the longest common prompt prefix already in the KV cache. The call format's helpers
are in `caller_format` (re-exported here), what drafting works with in `caller_drafting`,
and the checked calls and stats of a result in `caller_result`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from toolweave.errors import ConstraintError, ToolSpecError
from toolweave.events import CallEvent
from toolweave.formats import CallFormat, SyntaxFormat, get_format
from toolweave.grammar.call import call_grammar
from toolweave.modes import check_mode
from toolweave.native.calibration import CostTable
from toolweave.native.caller_drafting import CallerDrafting
from toolweave.native.caller_format import (
    decoder_format,
    json_arguments,
    special_tokens,
    template_format,
    uses_template_tools,
)
from toolweave.native.caller_result import call_result, call_stats, parsed_calls
from toolweave.native.chat import chat_text, chat_tokens
from toolweave.native.constraints import TokenMatcher, vocabulary_for
from toolweave.native.decode.plan import DecodePlan
from toolweave.native.decode.response import ResponseDecoder, ResponseStart
from toolweave.native.engine import Engine
from toolweave.native.numerics import engine_bound
from toolweave.native.sampling import Sampler
from toolweave.native.states.prefill import prefill_prompt
from toolweave.prompting.chat_template import (
    Message,
    template_renders_tools,
    template_tool_messages,
    tool_messages,
)
from toolweave.prompting.conversation import request_text as conversation_request_text
from toolweave.prompting.conversation import session_texts
from toolweave.prompting.template_file import ChatTemplateError
from toolweave.results import CallResult, InvalidCall
from toolweave.sampling import Sampling
from toolweave.toolspec import ToolCall, ToolSpec

if TYPE_CHECKING:
    from toolweave.native.baselines.grammar import GrammarBaseline

__all__ = [
    "CallEvent",
    "ToolCaller",
    "json_arguments",
    "session_texts",
    "special_tokens",
    "template_format",
    "uses_template_tools",
]


#: Tokens per argument value assumed before any value was seen (BFCL-like calls).
TYPICAL_VALUE_TOKENS = 6.0


class ToolCaller(CallerDrafting):
    """Answer requests with calls to `tools` on `engine`, in any decoding mode."""

    def __init__(
        self,
        engine: Engine,
        tools: Sequence[ToolSpec],
        *,
        fmt: CallFormat | str | None = None,
        max_calls: int | None = 1,
        max_tokens: int = 512,
        system: str | None = None,
        seq: int = 0,
        costs: CostTable | None = None,
        parallel_values: bool | None = None,
        forecast: bool | None = None,
        chat_template: str | None = None,
        session_drafts: bool = True,
        template_tools: bool | None = None,
    ) -> None:
        """`chat_template` (a Jinja template's text) replaces the engine's chat template
        for this caller's prompts, and gives the call format when `fmt` is None: the
        syntax read off the template where the call grammar covers it, else the format
        picked by name (`template_format`); where the vocabulary writes a marker of the
        syntax as a special token, the grammar asks for that token (`special_tokens`).
        In a syntax writing each argument apart (xml, python) `fast`
        and `lossless` draft no values: they decode them as `jump` does.
        `session_drafts`: in `fast` and `lossless`, draft argument text from the
        conversation's earlier messages (verified, so the output is unchanged).
        `template_tools`: describe the tools through the template's own ``tools`` variable
        (the prompt the model was trained on) instead of toolweave's tool prompt. None:
        where no `fmt` is given, the template lists tools and it writes calls in the syntax
        this caller decodes
        (`uses_template_tools`); SmolLM2's and Gemma 3's templates list none, so their
        prompts stay toolweave's. False: toolweave's tool prompt on every template."""
        if not tools:
            raise ToolSpecError(None, "at least one tool is needed")
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ToolSpecError(None, "duplicate tool names")
        if chat_template is not None and not chat_template.strip():
            raise ChatTemplateError("chat_template is empty: pass the template's text or None")
        self.engine = engine
        self.chat_template: str | None = (
            chat_template if chat_template is not None else engine.chat_template
        )
        self.tools = tuple(tools)
        self.by_name = {t.name: t for t in self.tools}
        if isinstance(fmt, str):
            fmt = get_format(fmt)
        self.vocab = vocabulary_for(engine)
        self.fmt: CallFormat = fmt or template_format(self.chat_template)
        # Read off the template only when asked to decide (None): it renders the template.
        auto = template_tools is None and fmt is None
        auto = auto and uses_template_tools(self.chat_template, self.fmt)
        #: Special tokens the syntax's markers are written with (text -> id).
        self._special: dict[str, int] = {}
        if isinstance(self.fmt, SyntaxFormat):  # xml values typed by these tools' schemas
            self.fmt = self.fmt.with_tools(self.tools)
            self._special = special_tokens(engine, self.vocab, self.fmt)
        # What the response decoder is given: the format itself, or for xml and python
        # the view that shows it where a call's arguments start and end.
        self._decoder_fmt: CallFormat = decoder_format(self.fmt)
        if template_tools and not template_renders_tools(self.chat_template):
            raise ChatTemplateError(
                "template_tools=True, but the chat template does not list the tools it is "
                "given in its `tools` variable"
            )
        self.template_tools: bool = auto if template_tools is None else template_tools
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.system = system
        self.seq = seq
        self.grammar = call_grammar(
            self.fmt, self.tools, max_calls=max_calls, special_tokens=self._special
        )
        TokenMatcher(self.vocab, self.grammar)  # fail early on a grammar llguidance rejects
        self._grammar_baseline: GrammarBaseline | None = None
        self._costs: CostTable | None = costs
        self._value_tokens = TYPICAL_VALUE_TOKENS
        # None: draft values in parallel when the cost table says it pays; True/False force it.
        self.parallel_values = parallel_values
        # SchemaFill forecasts in `fast` and `lossless` (verified, so output is unchanged).
        # None: only on the exact engine. Where batched rows differ from serial steps,
        # SmolLM2 and Gemma 3 leave most verified choices within twice the logit bound,
        # and the serial steps those need made `lossless` x0.79 slower in total time with
        # forecasts than without (`toolweave bench fastpath`, 100 BFCL calls, SmolLM2).
        self.forecast = engine.batch_invariant if forecast is None else forecast
        self.session_drafts = session_drafts
        self._prompt_memo: tuple[tuple[str, str | None], tuple[int, ...]] | None = None
        self._ranking = None
        if not engine.batch_invariant:
            # Measured now, while the KV cache is likely empty (see `engine_bound`).
            engine_bound(engine)

    # ------------------------------------------------------------------ prompt
    def messages(self, request: str | Sequence[Message]) -> list[dict[str, object]]:
        """The prompt's messages: with `template_tools` the request alone (the template
        lists `prompt_tools`), else toolweave's tool prompt first."""
        if self.template_tools:
            return template_tool_messages(request, system=self.system)
        return tool_messages(self.tools, self.fmt, request, system=self.system)

    @property
    def prompt_tools(self) -> tuple[ToolSpec, ...] | None:
        """The tools given to the template's ``tools`` variable (None: none are)."""
        return self.tools if self.template_tools else None

    def prompt_text(self, request: str | Sequence[Message]) -> str:
        return chat_text(
            self.engine,
            self.messages(request),
            template=self.chat_template,
            tools=self.prompt_tools,
        )

    def prompt_tokens(self, request: str | Sequence[Message]) -> list[int]:
        """The prompt's tokens: the template's control tokens, every message as text.

        The latest prompt's tokens are kept (a chat model asks for them to restore its
        state and again to decode), by the messages' JSON text in their key order."""
        messages = self.messages(request)
        try:
            key: tuple[str, str | None] | None = (
                json.dumps(messages, ensure_ascii=False, allow_nan=False),
                self.chat_template,
            )
        except (TypeError, ValueError):  # not plain JSON: render it every time
            key = None
        memo = self._prompt_memo
        if key is not None and memo is not None and memo[0] == key:
            return list(memo[1])
        tokens = chat_tokens(
            self.engine, messages, template=self.chat_template, tools=self.prompt_tools
        )
        if key is not None:
            self._prompt_memo = (key, tuple(tokens))
        return tokens

    # ------------------------------------------------------------------ decoding
    def call(
        self,
        request: str | Sequence[Message],
        mode: str = "constrained",
        *,
        sampling: Sampling | None = None,
    ) -> CallResult:
        """Answer `request` with tool calls decoded in `mode` (greedy unless `sampling`
        has a temperature above 0: docs/sampling.md)."""
        result: CallResult | None = None
        for ev in self.events(request, mode, sampling=sampling):
            if ev.kind == "done":
                result = ev.result
        if result is None:  # pragma: no cover - events() always ends with 'done'
            raise ConstraintError("decoder ended without a result")
        return result

    def events(
        self,
        request: str | Sequence[Message],
        mode: str = "constrained",
        *,
        sampling: Sampling | None = None,
    ) -> Iterator[CallEvent]:
        """Decode `request`, yielding events as they happen; the last one is 'done'."""
        sampler = None if sampling is None or sampling.greedy else Sampler(sampling)
        if check_mode(mode) == "grammar" and sampler is not None:
            raise ValueError("mode 'grammar' decodes greedily: sample in another mode")
        if mode == "grammar":  # the one baseline, outside the response decoder
            from toolweave.native.baselines.grammar import GrammarBaseline

            if self._grammar_baseline is None:
                self._grammar_baseline = GrammarBaseline(self.engine)
            result = self._grammar_baseline.call(self, request)
            yield CallEvent("done", result.stats.total_ms, result=result)
            return
        yield from self._decode_events(request, DecodePlan.for_mode(mode), sampler)

    def _decode_events(
        self, request: str | Sequence[Message], plan: DecodePlan, sampler: Sampler | None = None
    ) -> Iterator[CallEvent]:
        eng = self.engine
        prompt = self.prompt_tokens(request)
        request_text = conversation_request_text(request)
        with eng.lock:
            speculation = self._speculation(plan, request_text)
            passes0 = eng.counters.forward_passes
            pre = prefill_prompt(eng, self.seq, prompt, max_tokens=self.max_tokens)
            t0, logits, prompt_ms = pre.t0, pre.logits, pre.prompt_ms
            # Every prompt pass but the last one (which every mode pays) is prefill.
            prefill_passes = eng.counters.forward_passes - passes0 - 1
            decoder = ResponseDecoder(
                eng,
                self.vocab,
                plan,
                ResponseStart(
                    self.seq,
                    len(prompt),
                    logits,
                    request_text,
                    session_texts(request) if self.session_drafts and plan.forecasts else (),
                ),
                grammar=self.grammar,
                fmt=self._decoder_fmt,
                tools=self.by_name,
                max_tokens=self.max_tokens,
                speculation=speculation,
                sampler=sampler,
            )
            t_tool: float | None = None
            t_final: float | None = None
            provisional: list[ToolCall] = []
            run = decoder.run()
            kept = 0  # response tokens left cached after the prompt
            try:
                for ev in run:
                    ev = dataclasses.replace(ev, t_ms=ev.t_ms - t0 * 1000)
                    if ev.kind == "provisional" and ev.call is not None:
                        provisional.append(ev.call)
                    if ev.kind in ("provisional", "call") and t_tool is None:
                        t_tool = ev.t_ms
                    if ev.kind == "call" and t_final is None:
                        t_final = ev.t_ms
                    yield ev
                # The response stays cached after its prompt (the decoder's invariant: the
                # sequence holds prompt + tokens[:kv_len]): the next prompt of an agent
                # repeats the call, and only what follows it is prefilled.
                kept = decoder.kv_len
            finally:  # also when the consumer stops early: close the drafts under the lock
                run.close()
                eng.seq_remove(self.seq, len(prompt) + kept)
                eng.seq_tokens[self.seq] = [*prompt, *decoder.tokens[:kept]]
            total_ms = (time.perf_counter() - t0) * 1000
            passes = eng.counters.forward_passes - passes0
            totals = decoder.totals
            self._learn_value_lengths(totals.value_lengths)
        bound = speculation.bound
        stats = call_stats(
            totals,
            passes=passes,
            prefill_passes=prefill_passes,
            prompt_tokens=len(prompt),
            output_tokens=len(decoder.tokens),
            prompt_ms=prompt_ms,
            cached_tokens=pre.reused,
            time_to_tool_ms=t_tool,
            time_to_final_ms=t_final,
            total_ms=total_ms,
            logit_bound=None if bound is None or sampler is not None else bound.bound,
        )
        result = call_result(
            self.fmt,
            self.by_name,
            plan.mode,
            eng.detokenize(decoder.tokens),
            decoder.tokens,
            totals.finish_reason,
            stats,
            provisional,
            decoder.calls,
        )
        yield CallEvent("done", total_ms, result=result)

    def validate_text(self, text: str) -> tuple[list[ToolCall], list[InvalidCall]]:
        """Parse `text` in this caller's format; split valid calls from invalid ones."""
        return parsed_calls(self.fmt, self.by_name, text)
