"""The response decoder behind every toolweave mode but `grammar`.

One greedy loop under the shared call grammar, with what each mode adds:

- `constrained`: every token decoded, one pass each.
- `jump`: tokens the grammar forces are committed without decoding and prefilled with
  the next pass (jump-forward).
- `fast`: once a call's tool is known, its required values are drafted in parallel
  (`values.draft_values`), trusted, and written back in one pass; optional arguments
  and the rest are decoded as in `jump`. Read-only tools get a provisional call first.
- `lossless`: the same drafts are verified in the write-back pass under the real serial
  prefix; the longest prefix that `jump` itself would have written is committed, the
  model's own token is taken at the first mismatch, and drafting resumes at the next
  argument key. A choice is taken from a batched row only past twice the engine's logit
  bound, otherwise on `jump`'s own pass (over KV rewritten as `jump` writes it where a
  verification pass wrote it), so its tokens equal `jump`'s (see docs/architecture.md).
- Forecasts (`fast` and `lossless`, SchemaFill): where the model has a free choice and no
  value draft applies, a draft of what comes next is verified the same way: the opening
  of the next call for the tool `toolweave.drafting.forecast.CallForecast` ranks first, or the
  continuation of the value being written as the request (or an earlier call) continues
  it. The draft's first token is checked against logits already computed, so a wrong
  forecast costs nothing; its length comes from the engine cost table and the running
  acceptance, so a verification pass is only paid when it is expected to save time.

Invariant: the KV of `seq` holds prompt + `tokens[:kv_len]`; `logits` predict the token
after `tokens[kv_len - 1]`; `tokens[kv_len:]` are committed but not yet forwarded.
"""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from toolweave.drafting.forecast import CallForecast
from toolweave.drafting.ngram import AcceptanceRate, draft_length
from toolweave.errors import CallFormatError
from toolweave.events import CallEvent
from toolweave.formats import CallFormat, SyntaxFormat
from toolweave.formats.syntax import CALL_ID, INDEX
from toolweave.native.calibration import CostTable
from toolweave.native.constraints import TokenMatcher, Vocabulary
from toolweave.native.decode.forecasting import Forecaster, RepeatIndex
from toolweave.native.decode.plan import DecodePlan
from toolweave.native.decode.reference import MAX_REWRITE_PASSES, KVDrift, pass_starts, replay
from toolweave.native.decode.values import draft_values
from toolweave.native.decode.verify import verify_draft
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.learning import EngineLearning
from toolweave.native.numerics import LogitBound
from toolweave.native.sampling import Sampler, choose
from toolweave.results import NearTie
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["DecodeTotals", "ResponseDecoder", "ResponseStart", "Speculation"]

_SENTINEL = "__toolweave_arguments__"
_DECODER = json.JSONDecoder()
#: A prefilled token's cost in serial steps when no cost table is at hand (measured
#: 0.27 for SmolLM2 and 0.09 for Gemma 3 on this CPU; only used to split phase times).
_PREFILL_RATIO = 0.25
_LOGITS_BYTES = 8 * 1024 * 1024


def _after_slots(marker: str) -> str:
    """The fixed end of `marker`: its text after the last index or id it holds."""
    return re.split(f"[{INDEX}{CALL_ID}]", marker)[-1].strip()


def _now_ms() -> float:
    return time.perf_counter() * 1000


@dataclass
class DecodeTotals:
    """What the loop did, for CallStats."""

    decoded: int = 0
    prefilled: int = 0
    drafted: int = 0
    accepted: int = 0
    forecast_drafted: int = 0
    forecast_accepted: int = 0
    session_drafted: int = 0
    session_accepted: int = 0
    finish_reason: str = "stop"
    fallbacks: list[str] = field(default_factory=list)
    value_lengths: list[int] = field(default_factory=list)
    phases_ms: dict[str, float] = field(default_factory=dict)
    near_ties: list[NearTie] = field(default_factory=list)

    def add_phase(self, name: str, ms: float) -> None:
        self.phases_ms[name] = self.phases_ms.get(name, 0.0) + ms


@dataclass
class _CallState:
    """Per-call bookkeeping: where it starts in the text, its tool and its draft."""

    start: int
    spec: ToolSpec | None = None
    drafted: bool = False
    draft_text: str | None = None  # the whole call text as drafted (lossless)
    failed_at: set[int] = field(default_factory=set)
    required_done: bool = False


def _batch_pays(k: int) -> bool:
    return k > 1


def _parallel_pays(spec: ToolSpec, n: int) -> bool:
    return n > 1


@dataclass(frozen=True)
class ResponseStart:
    """Where a response begins: sequence `seq` holds the `prompt_len`-token prompt and
    `logits` predict the first token; `request_text` is the user's words (forecasts
    copy values from them) and `session_texts` the session's earlier messages, oldest
    first (session drafts copy from them)."""

    seq: int
    prompt_len: int
    logits: NDArray[np.float32]
    request_text: str = ""
    session_texts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Speculation:
    """What drafting works with (`constrained` and `jump` use none of it).

    `value_grammar(spec, key, suffixes)` is the grammar of one drafted value; values are
    drafted in `branch_seqs`, `batch_pays(k)` says whether one k-token pass beats k serial
    ones and `parallel_pays(spec, n)` whether drafting n values pays. Forecasts need the
    `forecast` ranking and the engine's `costs`; their acceptance is kept in `learning`.
    `bound` is the engine's logit bound: a verified choice is taken from a batched row only
    where that row decides it.
    """

    costs: CostTable | None = None
    value_grammar: Callable[[ToolSpec, str, Sequence[str]], str] | None = None
    branch_seqs: tuple[int, ...] = ()
    batch_pays: Callable[[int], bool] = _batch_pays
    parallel_pays: Callable[[ToolSpec, int], bool] = _parallel_pays
    forecast: CallForecast | None = None
    learning: EngineLearning = field(default_factory=EngineLearning)
    bound: LogitBound | None = None


class ResponseDecoder:
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
        self._call = _CallState(start=0)
        self._early: list[ToolCall] = []  # final calls handed out before their text was written
        # How calls sit in the response. A built-in format wraps each call in its open and
        # close; a syntax read off a template opens and closes the whole response once
        # (`SyntaxFormat`): a later call's text is read as if it were the first one.
        self._reply_open, self._reply_close = "", ""
        self._between = fmt.separator
        self._call_ends: tuple[str, ...] = (fmt.close or "}",)
        if isinstance(fmt, SyntaxFormat):
            syn = fmt.syntax
            self._reply_open, self._reply_close = syn.open, syn.close
            self._between = syn.separator
            # What ends a call: its closing marker after any index or id it holds.
            ends = {_after_slots(syn.call_close) or "}", _after_slots(fmt.close)} - {""}
            self._call_ends = tuple(sorted(ends))
        self._heads = {name: self._head(name) for name in tools}
        # A syntax writing each call's id by its position has heads per position.
        self._positional = isinstance(fmt, SyntaxFormat) and fmt.syntax.positional
        self._heads_by_index: dict[int, dict[str, tuple[str, str]]] = {0: self._heads}
        # Forecasting: only where verification pays, per the engine's measured pass costs.
        self._forecaster: Forecaster | None = None
        # Session drafts need no ranking: they run wherever a session has a past.
        drafts = spec.forecast is not None or bool(start.session_texts)
        if plan.forecasts and drafts and spec.costs is not None:
            heads = {name: head for name, (head, _) in self._heads.items()}
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
        """The heads and tails of the call being written (by its position, where that
        changes them)."""
        index = len(self.calls) if self._positional else 0
        if index not in self._heads_by_index:
            self._heads_by_index[index] = {name: self._head(name, index) for name in self.tools}
        return self._heads_by_index[index]

    def _head(self, name: str, index: int = 0) -> tuple[str, str]:
        """(text up to the first argument key, text after the last argument) of a call
        written at position `index` of the response."""
        call = ToolCall(name, {_SENTINEL: 0})
        if index and isinstance(self.fmt, SyntaxFormat):
            text = self.fmt.serialize_call_at(call, index)
        else:
            text = self.fmt.serialize_call(call)
        marker = json.dumps(_SENTINEL) + ":0"
        i = text.index(marker)
        tail = text[i + len(marker) :]
        if self._reply_close and tail.endswith(self._reply_close):
            tail = tail[: -len(self._reply_close)]  # the call's own end, not the response's
        return text[:i], tail

    def text(self) -> str:
        return self._text

    def _call_text(self, full: str) -> str:
        t = full[self._call.start :]
        sep = self._between
        if self.calls and sep and t.startswith(sep):
            t = t[len(sep) :]
        if not self.calls:
            return t
        if isinstance(self.fmt, SyntaxFormat):
            return self._reply_open + t  # as the first call reads, for the heads
        return t.lstrip()

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
        yield CallEvent("tokens", _now_ms(), tuple(tokens), decoded)
        yield from self._track()

    def _track(self) -> Iterator[CallEvent]:
        """Notice the tool name being decided and calls being complete."""
        full = self.text()
        call_text = self._call_text(full)
        if self._call.spec is None:
            for name, (head, _) in self._heads_now().items():
                if call_text.startswith(head):
                    self._call.spec = self.tools[name]
                    yield CallEvent("name", _now_ms(), name=name)
                    break
        if not call_text.rstrip().endswith(self._call_ends):
            return
        try:
            found = self.fmt.parse(full)
        except CallFormatError:
            return
        for c in found[len(self.calls) :]:
            self.calls.append(c)
            if not self._already_emitted(c):
                yield CallEvent("call", _now_ms(), call=c)
            self._call = _CallState(start=len(full))

    def _already_emitted(self, call: ToolCall) -> bool:
        if self._early and self._early[0] == call:
            self._early.pop(0)
            return True
        return False

    def _emit_early(self, call: ToolCall) -> CallEvent:
        self._early.append(call)
        return CallEvent("call", _now_ms(), call=call)

    # ------------------------------------------------------------------ drafting
    def _maybe_draft(self) -> Generator[CallEvent, None, bool]:
        """Generator returning True when it committed tokens from a draft."""
        state = self._call
        spec = state.spec
        vg = self.speculation.value_grammar
        if spec is None or vg is None:
            return False
        if not state.drafted:
            state.drafted = True
            keys = spec.required[: len(self.speculation.branch_seqs)]
            # A provisional call is worth drafting for even when batching does not pay.
            provisional_pays = bool(keys) and bool(spec.read_only and spec.optional)
            parallel = self.speculation.parallel_pays
            if not keys or not (provisional_pays or parallel(spec, len(keys))):
                return False  # decode the values serially, exactly as `jump`
            head, tail = self._heads_now()[spec.name]
            self._flush()  # exactly the pass `jump` makes for these tokens
            t0 = time.perf_counter()
            # What may follow each value in the call grammar: the next required key, or for
            # the last one any optional key or the end of the call. Allowing all of it lets
            # a branch pick the tokens the serial decoder fuses across the boundary (`","`).
            suffixes = [self._continuations(spec, i, tail) for i in range(len(keys))]
            drafts = draft_values(
                self.engine,
                self.vocab,
                seq=self.seq,
                prompt_len=self.prompt_len,
                committed=self.tokens,
                kv_len=self.kv_len,
                logits=self.logits,
                head=head,
                keys=keys,
                grammar_for=lambda key, suffix: vg(spec, key, suffix),
                suffixes=suffixes,
                branch_seqs=self.speculation.branch_seqs,
                batch_pays=self.speculation.batch_pays,
                # `fast` trusts its drafts: under sampling they are its samples. `lossless`
                # drafts greedily (one-hot q) and verifies with the sampling rule.
                sampler=self.sampler if self.plan.trust_drafts else None,
            )
            self.kv_len = len(self.tokens)
            self.logits = drafts.logits
            self.totals.add_phase("values", (time.perf_counter() - t0) * 1000)
            self.totals.value_lengths.extend(drafts.lengths)
            if drafts.values is None:
                self.totals.fallbacks.append(drafts.error or "drafting failed")
                return False  # clean fallback: decode this call as `jump` does
            args_text = ",".join(
                json.dumps(k, ensure_ascii=False) + ":" + drafts.values[k] for k in keys
            )
            required_text = head + args_text
            complete = len(keys) == len(spec.required)
            if complete:
                try:
                    values = {k: json.loads(drafts.values[k]) for k in keys}
                except json.JSONDecodeError:
                    values = None
                if values is not None:
                    call = ToolCall(spec.name, values)
                    if spec.optional and spec.read_only:
                        yield CallEvent("provisional", _now_ms(), call=call)
                    elif not spec.optional and self.plan.trust_drafts:
                        yield self._emit_early(call)
            state.draft_text = required_text + (tail if not spec.optional else "")
            if self.plan.trust_drafts:
                committed = yield from self._write_back(required_text)
                return committed
        if not self.plan.trust_drafts and state.draft_text is not None:
            committed = yield from self._verify_draft()
            return committed
        return False

    @staticmethod
    def _continuations(spec: ToolSpec, i: int, tail: str) -> tuple[str, ...]:
        def key(k: str) -> str:
            return "," + json.dumps(k, ensure_ascii=False) + ":"

        if i < len(spec.required) - 1:
            return (key(spec.required[i + 1]),)
        return (*(key(k) for k in spec.optional), tail)

    def _draft_rest(self, call_text: str) -> str:
        draft = self._call.draft_text or ""
        spec = self._call.spec
        if draft.startswith(call_text):
            return draft[len(call_text) :]
        if spec is None:
            return ""
        for key in spec.required:
            pat = json.dumps(key, ensure_ascii=False) + ":"
            if call_text.endswith(pat) and pat in draft:
                return draft[draft.index(pat) + len(pat) :]
        return ""

    def _write_back(self, required_text: str) -> Generator[CallEvent, None, bool]:
        """`fast`: commit the drafted required arguments without verification."""
        call_text = self._call_text(self.text())
        if not required_text.startswith(call_text):
            return False
        draft = self.engine.tokenize(required_text[len(call_text) :], parse_special=False)
        draft = draft[: self.max_tokens - len(self.tokens)]
        if not draft or self.matcher.accepts_prefix(draft) < len(draft):
            return False
        yield from self._commit(draft, decoded=False, kind="write_back")
        self.totals.drafted += len(draft)
        self.totals.accepted += len(draft)
        self._flush()  # its time counts as the write-back's
        return True

    def _verify_draft(self) -> Generator[CallEvent, None, bool]:
        """`lossless`: verify the draft under the real prefix in one pass."""
        call_text = self._call_text(self.text())
        at = len(self.tokens)
        if at in self._call.failed_at:
            return False
        rest = self._draft_rest(call_text)
        if not rest:
            return False
        draft = self.engine.tokenize(rest, parse_special=False)[: self.max_tokens - at]
        # The next token is a free choice here (no forced tokens): check it first for free.
        self._flush()
        first = self._choice_for(draft[0]) if draft else self._greedy()
        if not draft or first != draft[0]:
            self._call.failed_at.add(at)
            return False
        t0 = time.perf_counter()
        _, stalled = yield from self._verify_tokens(draft, forecast=False)
        self.totals.add_phase("verify", (time.perf_counter() - t0) * 1000)
        if stalled:
            self._call.failed_at.add(len(self.tokens))
        return True

    # ------------------------------------------------------------------ forecasting
    def _maybe_forecast(self) -> Generator[CallEvent, None, bool]:
        """Verify a forecast of the next tokens when that is expected to pay; True when
        tokens were committed.

        Only the model's choices in the draft are uncertain (forced runs are written
        anyway), so the pass asks logits just for the rows before them and the last, and
        the number of choices to verify maximises expected tokens per millisecond under
        the cost table, at the running acceptance of this kind of forecast.
        """
        costs, forecaster = self.speculation.costs, self._forecaster
        assert costs is not None and forecaster is not None
        budget = min(self.engine.n_batch, self.max_tokens - len(self.tokens), 48)
        if budget < 2:
            return False
        source, draft, choices = forecaster.draft(
            self.matcher,
            text=self.text(),
            call_start=self._call.start,
            in_call=self._call.spec is not None,
            calls=self.calls,
            tokens=self.tokens,
            repeats=self._repeats,
            budget=budget,
        )
        if len(choices) < 2 or choices[0] != 0:
            return False  # no choice after the first: forced tokens cost nothing anyway
        self._flush()
        if self._choice_for(draft[0]) != draft[0]:  # free: these logits exist already
            return False

        def tokens_through(k: int) -> int:  # draft tokens in a pass verifying k more choices
            return choices[k + 1] if k + 1 < len(choices) else len(draft)

        record = self.speculation.learning.of(f"forecast:{source}")
        rate = record.rate if record.rate is not None else AcceptanceRate()
        extra = draft_length(
            lambda n: costs.pass_ms(tokens_through(n - 1), n),
            rate.rate,
            max_len=min(len(choices), self._max_rows) - 1,
        )
        if extra == 0:
            return False  # the plain step commits draft[0] anyway
        t0 = time.perf_counter()
        draft = draft[: tokens_through(extra)]
        accepted, _ = yield from self._verify_tokens(draft, forecast=True)
        if source == "session":
            self.totals.session_drafted += len(draft)
            self.totals.session_accepted += accepted
        chosen = sum(1 for i in choices[1 : extra + 1] if i < accepted)
        record.rate = rate.observe(chosen, chosen < extra)
        self.totals.add_phase("forecast", (time.perf_counter() - t0) * 1000)
        return True

    def _verify_tokens(
        self, draft: Sequence[int], *, forecast: bool
    ) -> Generator[CallEvent, None, tuple[int, bool]]:
        """Verify `draft` (its first token is the model's greedy choice) in one pass and
        commit what `verify_draft` accepts plus its correction. Returns (draft tokens
        accepted, whether it stopped with neither a mismatch nor the end)."""
        clean = not self._drift.dirty and self._inexact
        at = self.kv_len
        before = self.matcher.copy() if clean else None
        verdict = verify_draft(
            self.engine,
            self.matcher,
            draft,
            seq=self.seq,
            pos=self.prompt_len + self.kv_len,
            logits=self.logits,
            max_rows=self._max_rows,
            bound=self._bound,
            sampler=self.sampler,
        )
        accepted = verdict.accepted
        if clean and verdict.kept > 0:
            self._drift.mark(at, before)
        if forecast:
            self.totals.forecast_drafted += verdict.drafted
            self.totals.forecast_accepted += len(accepted)
        else:
            self.totals.drafted += verdict.drafted
            self.totals.accepted += len(accepted)
        yield from self._commit(accepted, decoded=False, kind="forecast" if forecast else "verify")
        # Accepted tokens the model chose (not forced) count as decoded, as in `jump`.
        self.totals.prefilled -= verdict.chosen
        self.totals.decoded += verdict.chosen
        # Without fresh logits the last accepted token is forwarded again by `_flush`.
        self.kv_len = len(self.tokens) - (len(accepted) - verdict.kept)
        self.logits = verdict.logits
        if verdict.near_tie is not None:
            self.totals.near_ties.append(NearTie(len(self.tokens), verdict.near_tie))
        if verdict.correction:
            kind = None if verdict.correction_chosen else "skeleton"
            yield from self._commit(
                verdict.correction, decoded=verdict.correction_chosen, kind=kind
            )
        if verdict.end is not None:  # drawn for the next position: the plain step takes it
            self._greedy_key = (id(self.logits), len(self.tokens))
            self._greedy_token = verdict.end
        return len(accepted), verdict.stalled
