"""The response decoder behind every toolweave mode but `grammar`.

One greedy loop under the shared call grammar, with what each mode adds:

- `constrained`: every token decoded, one pass each.
- `jump`: tokens the grammar forces are committed without decoding and prefilled with
  the next pass (jump-forward).
- `fast`, `lossless` and forecasts: drafts written back or verified ahead of the plain
  step (`toolweave.native.decode.speculative`, which describes them).

How calls sit in the text is `toolweave.native.decode.layout`; what a decode starts from,
works with and reports is `toolweave.native.decode.records`.

Invariant: the KV of `seq` holds prompt + `tokens[:kv_len]`; `logits` predict the token
after `tokens[kv_len - 1]`; `tokens[kv_len:]` are committed but not yet forwarded.
"""

from __future__ import annotations

import codecs
import json
import time
from collections.abc import Iterator, Mapping, Sequence

from toolweave.errors import CallFormatError
from toolweave.events import CallEvent
from toolweave.formats import CallFormat
from toolweave.native.constraints import TokenMatcher, Vocabulary
from toolweave.native.decode.forecasting import Forecaster, RepeatIndex
from toolweave.native.decode.layout import ARGUMENTS_SENTINEL, CallLayout
from toolweave.native.decode.plan import DecodePlan
from toolweave.native.decode.records import (
    CallState,
    DecodeTotals,
    ResponseStart,
    Speculation,
    now_ms,
)
from toolweave.native.decode.reference import MAX_REWRITE_PASSES, KVDrift, pass_starts, replay
from toolweave.native.decode.speculative import SpeculativeSteps
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.sampling import Sampler, choose
from toolweave.results import NearTie
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["DecodeTotals", "ResponseDecoder", "ResponseStart", "Speculation"]

_SENTINEL = ARGUMENTS_SENTINEL  # the name `toolweave.native.caller` imports it by
_DECODER = json.JSONDecoder()
#: A prefilled token's cost in serial steps when no cost table is at hand (measured
#: 0.27 for SmolLM2 and 0.09 for Gemma 3 on this CPU; only used to split phase times).
_PREFILL_RATIO = 0.25
_LOGITS_BYTES = 8 * 1024 * 1024


class ResponseDecoder(SpeculativeSteps):
    """Decode one response after the prompt as `plan` says; iterate `run()` for events."""

    def __init__(
        self,
        engine: Engine,
        vocab: Vocabulary,
        plan: DecodePlan,
        start: ResponseStart,
        *,
        grammar: str,
        fmt: CallFormat,
        tools: Mapping[str, ToolSpec],
        max_tokens: int,
        speculation: Speculation | None = None,
        sampler: Sampler | None = None,
    ) -> None:
        """`sampler` (temperature > 0) draws every choice instead of taking the argmax:
        forced tokens are taken as they are, verified drafts pass the speculative-sampling
        rule (`Sampler.verify`) and the margin and rewrite rules of greedy verification
        are off (see docs/sampling.md)."""
        self.engine = engine
        self.sampler = sampler
        self.vocab = vocab
        self.plan = plan
        self.matcher = TokenMatcher(vocab, grammar)
        self.fmt = fmt
        self.tools = tools
        self.seq = start.seq
        self.prompt_len = start.prompt_len
        self.logits = start.logits
        self.max_tokens = max_tokens
        self.speculation = spec = speculation or Speculation()
        self.tokens: list[int] = []
        self.kv_len = 0
        # Response text kept incrementally (a token may end inside a UTF-8 character).
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self.totals = DecodeTotals()
        self.calls: list[ToolCall] = []
        self._call = CallState(start=0)
        self._early: list[ToolCall] = []  # final calls handed out before their text was written
        self._layout = CallLayout(fmt, tools)
        # Forecasting: only where verification pays, per the engine's measured pass costs.
        self._forecaster: Forecaster | None = None
        # Session drafts need no ranking: they run wherever a session has a past.
        drafts = spec.forecast is not None or bool(start.session_texts)
        if plan.forecasts and drafts and spec.costs is not None:
            heads = {name: head for name, (head, _) in self._layout.first_heads.items()}
            self._forecaster = Forecaster(
                engine,
                fmt,
                tools,
                heads,
                spec.forecast,
                start.request_text,
                start.session_texts,
            )
        self._repeats = RepeatIndex()  # token pairs, for forecasts from this response itself
        self._kinds: list[str] = []  # per token: the phase its forward pass counts for
        # Logits rows per verification pass: llama.cpp grows its output buffer to hold
        # them all (1 MB a row for Gemma 3's 262k vocabulary), so at most 8 MB of them.
        self._max_rows = max(2, _LOGITS_BYTES // (4 * engine.n_vocab))
        self._greedy_key: tuple[int, int] = (0, -1)
        self._greedy_token = -1
        # KV cells verification passes wrote since the last reference rewrite.
        self._drift = KVDrift()
        # Greedy verification's margin rule; under sampling a batched row is the target.
        self._bound = bound = spec.bound if sampler is None else None
        self._inexact = bound is not None and bound.max_delta > 0

    # ------------------------------------------------------------------ text helpers
    def _heads_now(self) -> dict[str, tuple[str, str]]:
        """The heads and tails of the call being written."""
        return self._layout.heads(len(self.calls))

    def text(self) -> str:
        return self._text

    def _call_text(self, full: str) -> str:
        return self._layout.call_text(full, self._call.start, len(self.calls))

    # ------------------------------------------------------------------ the loop
    def run(self) -> Iterator[CallEvent]:
        while not self.matcher.stopped:
            if len(self.tokens) >= self.max_tokens:
                self.totals.finish_reason = "length"
                return
            if self.plan.jump_forward:
                forced = self.matcher.forced()[: self.max_tokens - len(self.tokens)]
                if forced:
                    yield from self._commit(forced, decoded=False)
                    continue
            if self.plan.draft_values:
                drafted = yield from self._maybe_draft()
                if drafted:
                    continue
            if self._forecaster is not None:
                drafted = yield from self._maybe_forecast()
                if drafted:
                    continue
            self._flush()
            t0 = time.perf_counter()
            token = self._greedy()
            phase = self._phase()
            self.totals.add_phase(phase, (time.perf_counter() - t0) * 1000)
            if self.engine.is_eog(token):
                return
            yield from self._commit([token], decoded=True, kind=phase)

    def _flush(self) -> None:
        """Forward the committed-but-pending tokens (one pass, logits of the last).

        The pass's time is split over the phases of the tokens it carries as the cost
        table prices them: the first token a serial step, each further one a prefilled
        token (so a decoded value token and the skeleton riding with it share the pass).
        """
        pending = self.tokens[self.kv_len :]
        if not pending:
            return
        t0 = time.perf_counter()
        base = self.prompt_len + self.kv_len
        rows = self.engine.forward(
            [
                BatchToken(t, base + i, (self.seq,), i == len(pending) - 1)
                for i, t in enumerate(pending)
            ]
        )
        ms = (time.perf_counter() - t0) * 1000
        costs = self.speculation.costs
        extra = costs.prefill_ratio() if costs is not None else _PREFILL_RATIO
        unit = ms / (1 + extra * (len(pending) - 1))
        for i, kind in enumerate(self._kinds[self.kv_len :]):
            self.totals.add_phase(kind, unit if i == 0 else unit * extra)
        self.logits = rows[0]
        self.kv_len = len(self.tokens)

    def _phase(self) -> str:
        """Where the current call is: choosing its tool ("name"), writing its required
        values ("values") or deciding optional arguments and its end ("optional")."""
        state = self._call
        if state.spec is None:
            return "name"
        if not state.required_done:
            state.required_done = self._required_done(state.spec)
        return "optional" if state.required_done else "values"

    def _required_done(self, spec: ToolSpec) -> bool:
        if not spec.required:
            return True
        call_text = self._call_text(self.text())
        key = json.dumps(spec.required[-1], ensure_ascii=False) + ":"
        at = call_text.find(key)
        if at < 0:
            return False
        try:
            _DECODER.raw_decode(call_text[at + len(key) :])
        except json.JSONDecodeError:
            return False
        return True

    def _greedy(self) -> int:
        """The constrained greedy token for the current logits and grammar state, computed
        once however many drafts look at it.

        Logits computed over KV cells a verification pass wrote may sit up to the bound
        away from `jump`'s: a choice they do not decide is taken only after those cells
        are written again in `jump`'s own passes (`_rewrite`)."""
        key = (id(self.logits), len(self.tokens))
        if self._greedy_key != key and self.sampler is not None:
            self._greedy_key, self._greedy_token = key, self._sampled(None)
        if self._greedy_key != key:
            if self._drift.dirty:
                token, gap = self.matcher.best_with_gap(self.logits)
                bound = self._bound
                if bound is not None and not bound.decides(gap):
                    self._rewrite(gap)
                    token = self.matcher.best(self.logits)
            else:
                token = self.matcher.best(self.logits)
            self._greedy_key, self._greedy_token = (id(self.logits), len(self.tokens)), token
        return self._greedy_token

    def _sampled(self, draft: int | None) -> int:
        """Under sampling: the token the grammar forces here if it forces one (its
        distribution is one-hot), else a draw, or `Sampler.verify` of `draft`."""
        forced = self.matcher.forced()
        if forced:
            return forced[0]
        return choose(self.sampler, self.matcher, self.logits, draft)

    def _choice_for(self, draft: int) -> int:
        """The token taken at this position where a drafter proposes `draft` (drawn once
        per position, like `_greedy`, whichever asks first)."""
        key = (id(self.logits), len(self.tokens))
        if self.sampler is None or self._greedy_key == key:
            return self._greedy()
        self._greedy_key, self._greedy_token = key, self._sampled(draft)
        return self._greedy_token

    def _rewrite(self, gap: float) -> None:
        """Write the cells since the first verified token again as `jump` writes them (one
        pass per chosen token with the forced run after it) and take the last pass's
        logits; the position is logged as a near tie decided on rewritten KV. Past
        `MAX_REWRITE_PASSES` the logits stay and the tie is logged as "drift"."""
        start, clean = self._drift.start, self._drift.matcher
        assert start is not None and clean is not None and self.kv_len == len(self.tokens)
        if self._drift.too_long:
            self.totals.near_ties.append(NearTie(len(self.tokens), gap, "drift"))
            return
        t0 = time.perf_counter()
        region = self.tokens[start : self.kv_len]
        after_first = clean.copy()
        after_first.consume(region[0])
        starts = pass_starts(after_first, region, jump=True)
        if len(starts) > MAX_REWRITE_PASSES:  # dearer than what the drafts saved
            self._drift.too_long = True
            self.totals.near_ties.append(NearTie(len(self.tokens), gap, "drift"))
            return
        self.logits = replay(self.engine, self.seq, self.prompt_len + start, region, starts)
        self._drift.clear()
        self.totals.near_ties.append(NearTie(len(self.tokens), gap, "rewritten"))
        self.totals.add_phase("rewrite", (time.perf_counter() - t0) * 1000)

    def _commit(
        self, tokens: Sequence[int], *, decoded: bool, kind: str | None = None
    ) -> Iterator[CallEvent]:
        """Append `tokens` (forwarded later by `_flush`); `kind` is the phase their
        forward pass counts for: by default the skeleton for tokens written without being
        decoded, the current phase for decoded ones."""
        self.matcher.consume_many(tokens)
        self._kinds.extend([kind or (self._phase() if decoded else "skeleton")] * len(tokens))
        for t in tokens:
            self._repeats.add(self.tokens, t)
            self.tokens.append(t)
        self._text += self._utf8.decode(b"".join(self.engine.token_bytes(t) for t in tokens))
        if decoded:
            self.totals.decoded += len(tokens)
        else:
            self.totals.prefilled += len(tokens)
        yield CallEvent("tokens", now_ms(), tuple(tokens), decoded)
        yield from self._track()

    def _track(self) -> Iterator[CallEvent]:
        """Notice the tool name being decided and calls being complete."""
        full = self.text()
        call_text = self._call_text(full)
        if self._call.spec is None:
            for name, (head, _) in self._heads_now().items():
                if call_text.startswith(head):
                    self._call.spec = self.tools[name]
                    yield CallEvent("name", now_ms(), name=name)
                    break
        if not call_text.rstrip().endswith(self._layout.call_ends):
            return
        try:
            found = self.fmt.parse(full)
        except CallFormatError:
            return
        for c in found[len(self.calls) :]:
            self.calls.append(c)
            if not self._already_emitted(c):
                yield CallEvent("call", now_ms(), call=c)
            self._call = CallState(start=len(full))

    def _already_emitted(self, call: ToolCall) -> bool:
        if self._early and self._early[0] == call:
            self._early.pop(0)
            return True
        return False

    def _emit_early(self, call: ToolCall) -> CallEvent:
        self._early.append(call)
        return CallEvent("call", now_ms(), call=call)
