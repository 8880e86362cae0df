"""The speculative steps of the response decoder (`SpeculativeSteps`, mixed into
`toolweave.native.decode.response.ResponseDecoder`): drafts written or verified ahead of
its plain greedy step.

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
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from toolweave.drafting.ngram import AcceptanceRate, draft_length
from toolweave.events import CallEvent
from toolweave.native.constraints import TokenMatcher, Vocabulary
from toolweave.native.decode.forecasting import Forecaster, RepeatIndex
from toolweave.native.decode.plan import DecodePlan
from toolweave.native.decode.records import CallState, DecodeTotals, Speculation, now_ms
from toolweave.native.decode.reference import KVDrift
from toolweave.native.decode.values import draft_values
from toolweave.native.decode.verify import verify_draft
from toolweave.native.engine import Engine
from toolweave.native.numerics import LogitBound
from toolweave.native.sampling import Sampler
from toolweave.results import NearTie
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["SpeculativeSteps"]


class SpeculativeSteps:
    """Value drafts (`fast`, `lossless`) and forecasts: a mixin over the decoder state
    declared below; the decoder defines the steps declared under TYPE_CHECKING."""

    engine: Engine
    vocab: Vocabulary
    plan: DecodePlan
    matcher: TokenMatcher
    seq: int
    prompt_len: int
    logits: NDArray[np.float32]
    max_tokens: int
    speculation: Speculation
    sampler: Sampler | None
    tokens: list[int]
    kv_len: int
    totals: DecodeTotals
    calls: list[ToolCall]
    _call: CallState
    _forecaster: Forecaster | None
    _repeats: RepeatIndex
    _max_rows: int
    _greedy_key: tuple[int, int]
    _greedy_token: int
    _drift: KVDrift
    _bound: LogitBound | None
    _inexact: bool

    if TYPE_CHECKING:

        def text(self) -> str: ...
        def _heads_now(self) -> dict[str, tuple[str, str]]: ...
        def _call_text(self, full: str) -> str: ...
        def _flush(self) -> None: ...
        def _greedy(self) -> int: ...
        def _choice_for(self, draft: int) -> int: ...
        def _commit(
            self, tokens: Sequence[int], *, decoded: bool, kind: str | None = None
        ) -> Iterator[CallEvent]: ...
        def _emit_early(self, call: ToolCall) -> CallEvent: ...

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
                        yield CallEvent("provisional", now_ms(), call=call)
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
