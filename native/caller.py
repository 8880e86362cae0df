"""`ToolCaller`: one set of tools on one engine, answering requests with tool calls.

It owns the prompt (the model's chat template), the shared call grammar, and the
dispatch to a decoding mode. Sequence 0 holds the conversation; consecutive requests
reuse the longest common prompt prefix already in the KV cache.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from toolweave.drafting.forecast import CallForecast, ToolRanking
from toolweave.errors import CallFormatError, ConstraintError, ToolSpecError
from toolweave.events import CallEvent
from toolweave.formats import (
    CallFormat,
    SyntaxFormat,
    detect_call_format,
    format_for_chat_template,
    get_format,
)
from toolweave.formats.syntax import CALL_ID, INDEX
from toolweave.grammar.call import call_grammar, syntax_grammar_gap, value_grammar
from toolweave.grammar.syntax_call import RAW_LAYOUTS, call_parts
from toolweave.modes import check_mode
from toolweave.native.calibration import CostTable, engine_costs
from toolweave.native.chat import chat_text, chat_tokens
from toolweave.native.constraints import TokenMatcher, Vocabulary, vocabulary_for
from toolweave.native.decode.plan import DecodePlan
from toolweave.native.decode.response import _SENTINEL as ARGUMENTS_SENTINEL
from toolweave.native.decode.response import ResponseDecoder, ResponseStart, Speculation
from toolweave.native.decode.values import parallel_pays
from toolweave.native.engine import Engine
from toolweave.native.learning import engine_learning
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
from toolweave.results import CallResult, CallStats, InvalidCall
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


def template_format(template: str | None) -> CallFormat:
    """The call format a chat template's model writes: its own syntax read off the
    template (`detect_call_format`) where that is not a built-in format and the call
    grammar covers it (layouts json, named-json, xml and python without slots), else the
    format picked by name (`format_for_chat_template`)."""
    picked = format_for_chat_template(template)
    if template is None:
        return picked
    try:
        detected = detect_call_format(template)
    except Exception:  # no syntax read off the template: the picked format, as always
        return picked
    if isinstance(detected, SyntaxFormat) and syntax_grammar_gap(detected.syntax) is None:
        return detected
    return picked


def uses_template_tools(template: str | None, fmt: CallFormat) -> bool:
    """Whether a caller decoding `fmt` describes its tools through `template`'s ``tools``
    variable: the template lists them, and writes calls in `fmt`'s syntax (so the prompt
    the model reads shows the calls the grammar lets it write)."""
    if template is None or not template_renders_tools(template):
        return False
    try:
        own = detect_call_format(template)
    except Exception:  # the template writes no calls toolweave can read
        return False
    probe = ToolCall("probe_tool", {"probe_argument": "value"})
    try:
        return own.serialize_call(probe) == fmt.serialize_call(probe)
    except Exception:  # a format that cannot write the probe call writes another syntax
        return False


class _DecoderFormat(SyntaxFormat):
    """A syntax whose arguments are not one JSON object (xml, python), as the response
    decoder reads formats: it finds a call's head (the text before its first argument)
    and tail by writing a call whose one argument is a sentinel and looking for that
    argument as JSON (``"<sentinel>":0``). This view writes that call as head + the JSON
    sentinel + tail, and everything else as the format itself does."""

    def __init__(self, fmt: SyntaxFormat) -> None:
        super().__init__(fmt.syntax, fmt.name, tuple(fmt.tools.values()))

    def serialize_call(self, call: ToolCall) -> str:
        if list(call.arguments) != [ARGUMENTS_SENTINEL]:
            return super().serialize_call(call)
        head, tail = call_parts(self, call.name)
        marker = json.dumps(ARGUMENTS_SENTINEL) + ":0"
        return self.syntax.open + head + marker + tail + self.syntax.close


def json_arguments(fmt: CallFormat) -> bool:
    """Whether `fmt` writes a call's arguments as one JSON object: what `fast` value
    drafts and their write-back are built for."""
    syntax = fmt.syntax if isinstance(fmt, SyntaxFormat) else None
    return syntax is None or syntax.layout not in RAW_LAYOUTS


def special_tokens(engine: Engine, vocab: Vocabulary, fmt: SyntaxFormat) -> dict[str, int]:
    """The special tokens (text -> id) the engine's tokenizer writes, from plain text,
    inside `fmt`'s markers: llguidance matches such a token only as itself, never as
    its text, so the call grammar must ask for the token there (Gemma 4's
    ``<|tool_call>`` and ``<|"|>`` on its vocabulary)."""
    s = fmt.syntax
    markers = [s.open, s.close, s.call_open, s.call_close, s.separator, s.name_close]
    markers += [s.key_open, s.key_close, s.value_close, s.string_open, s.string_close]
    markers += [s.other_open, s.arg_separator]
    found: dict[str, int] = {}
    for marker in markers:
        text = marker.replace(INDEX, "0").replace(CALL_ID, "id")
        if not text.strip():
            continue
        for token in engine.tokenize(text, parse_special=False):
            if vocab.tokenizer.is_special_token(token):
                found[engine.token_bytes(token).decode("utf-8", errors="replace")] = token
    return found


#: Tokens per argument value assumed before any value was seen (BFCL-like calls).
TYPICAL_VALUE_TOKENS = 6.0


class ToolCaller:
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
        self._decoder_fmt: CallFormat = self.fmt
        if isinstance(self.fmt, SyntaxFormat) and not json_arguments(self.fmt):
            self._decoder_fmt = _DecoderFormat(self.fmt)
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
        self._ranking: ToolRanking | None = None
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
        """The prompt's tokens: the template's control tokens, every message as text."""
        return chat_tokens(
            self.engine,
            self.messages(request),
            template=self.chat_template,
            tools=self.prompt_tools,
        )

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

    def _speculation(self, plan: DecodePlan, request_text: str) -> Speculation:
        """What `plan`'s drafting works with on this engine (nothing without drafts)."""
        if not (plan.draft_values or plan.forecasts):
            return Speculation()
        costs = self.costs()
        forecast: CallForecast | None = None
        if plan.forecasts and self.forecast:
            forecast = CallForecast.for_request(self.ranking(), request_text)

        def batch_pays(k: int) -> bool:
            return costs.pass_ms(k, k, sequences=True) < k * costs.serial_step_ms

        def values_pay(spec: ToolSpec, n: int) -> bool:
            if self.parallel_values is not None:
                return self.parallel_values and n > 0
            return parallel_pays(costs, n, self._value_tokens)

        branch_seqs: tuple[int, ...] = ()
        if plan.draft_values:
            branch_seqs = tuple(range(1, min(self.engine.n_seq_max, 8)))
            if self.seq in branch_seqs:
                raise ConstraintError("the caller's sequence collides with value branches")
        return Speculation(
            costs=costs,
            # Value drafts are JSON values written back as JSON members: for a syntax
            # writing each argument apart (xml, python) `fast` and `lossless` decode the
            # values as `jump` does (forecasts, verified, still run).
            value_grammar=self._value_grammar if json_arguments(self.fmt) else None,
            branch_seqs=branch_seqs,
            batch_pays=batch_pays,
            parallel_pays=values_pay,
            forecast=forecast,
            learning=engine_learning(self.engine),
            # A batch-invariant engine's rows equal its serial steps: nothing to bound.
            bound=None if self.engine.batch_invariant else engine_bound(self.engine),
        )

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
            for n in totals.value_lengths:  # running estimate of value length, for planning
                self._value_tokens = 0.8 * self._value_tokens + 0.2 * n
        phases = dict(totals.phases_ms)
        if t_final is not None:
            phases["time_to_final_call"] = t_final
        stats = CallStats(
            forward_passes=passes,
            decode_passes=passes - 1 - prefill_passes,
            prefill_tokens=len(prompt) + totals.prefilled,
            decoded_tokens=totals.decoded,
            output_tokens=len(decoder.tokens),
            prompt_tokens=len(prompt),
            prompt_ms=prompt_ms,
            cached_tokens=pre.reused,
            time_to_tool_ms=t_tool,
            total_ms=total_ms,
            phases_ms=phases,
            drafted_tokens=totals.drafted,
            accepted_tokens=totals.accepted,
            forecast_drafted_tokens=totals.forecast_drafted,
            forecast_accepted_tokens=totals.forecast_accepted,
            session_drafted_tokens=totals.session_drafted,
            session_accepted_tokens=totals.session_accepted,
            logit_bound=None
            if speculation.bound is None or sampler is not None
            else speculation.bound.bound,
            near_ties=tuple(totals.near_ties),
        )
        result = self._result(
            plan.mode, decoder.tokens, totals.finish_reason, stats, provisional, decoder.calls
        )
        yield CallEvent("done", total_ms, result=result)

    def ranking(self) -> ToolRanking:
        """BM25 over this caller's tools (built on first use)."""
        if self._ranking is None:
            self._ranking = ToolRanking(self.tools)
        return self._ranking

    def costs(self) -> CostTable:
        """The engine cost table (measured once per engine, quickly, on first use)."""
        if self._costs is None:
            self._costs = engine_costs(self.engine)
        return self._costs

    def _value_grammar(self, spec: ToolSpec, key: str, suffix: Sequence[str]) -> str:
        return value_grammar(spec, key, suffix=suffix)

    def _result(
        self,
        mode: str,
        tokens: Sequence[int],
        reason: str,
        stats: CallStats,
        provisional: Sequence[ToolCall] = (),
        complete: Sequence[ToolCall] = (),
    ) -> CallResult:
        """`complete`: the calls the decoder saw finished; when the output is cut at
        max_tokens inside a later call, so the text no longer parses, those are kept
        (checked like any call) instead of losing them with the cut one."""
        text = self.engine.detokenize(tokens)
        calls, invalid = self.validate_text(text)
        if reason == "length":
            if not calls and complete:
                calls, invalid = self._checked(complete, text)
            invalid.append(InvalidCall(text=text, error="output truncated at max_tokens"))
        return CallResult(
            mode=mode,
            calls=tuple(calls),
            text=text,
            tokens=tuple(tokens),
            stats=stats,
            provisional=tuple(provisional),
            invalid=tuple(invalid),
            finish_reason=reason,
        )

    def validate_text(self, text: str) -> tuple[list[ToolCall], list[InvalidCall]]:
        """Parse `text` in this caller's format; split valid calls from invalid ones."""
        try:
            parsed = self.fmt.parse(text)
        except CallFormatError as exc:
            return [], [InvalidCall(text=text, error=str(exc))]
        return self._checked(parsed, text)

    def _checked(
        self, parsed: Sequence[ToolCall], text: str
    ) -> tuple[list[ToolCall], list[InvalidCall]]:
        """`parsed` split into calls of known tools with valid arguments and the rest."""
        calls: list[ToolCall] = []
        invalid: list[InvalidCall] = []
        for c in parsed:
            spec = self.by_name.get(c.name)
            if spec is None:
                invalid.append(
                    InvalidCall(text=text, error=f"unknown tool {c.name!r}", name=c.name)
                )
                continue
            try:
                spec.validate_call(c.arguments)
            except ToolSpecError as exc:
                invalid.append(InvalidCall(text=text, error=str(exc), name=c.name))
                continue
            calls.append(c)
        return calls, invalid
