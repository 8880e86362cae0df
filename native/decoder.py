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
  argument key. Its tokens equal `jump`'s wherever a batched pass computes the same
  logits as a serial one (bit-identical on SmolLM2 Q4_1 here; see tests and DESIGN.md).

Invariant: the KV of `seq` holds prompt + `tokens[:kv_len]`; `logits` predict the token
after `tokens[kv_len - 1]`; `tokens[kv_len:]` are committed but not yet forwarded.
"""

from __future__ import annotations

import codecs
import json
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from toolweave.errors import CallFormatError
from toolweave.formats import CallFormat
from toolweave.native.constraints import TokenMatcher, Vocabulary
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.values import draft_values
from toolweave.results import CallEvent
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["DecodeTotals", "ResponseDecoder"]

_SENTINEL = "__toolweave_arguments__"


def _now_ms() -> float:
    return time.perf_counter() * 1000


@dataclass
class DecodeTotals:
    """What the loop did, for CallStats."""

    decoded: int = 0
    prefilled: int = 0
    drafted: int = 0
    accepted: int = 0
    finish_reason: str = "stop"
    fallbacks: list[str] = field(default_factory=list)
    value_lengths: list[int] = field(default_factory=list)
    phases_ms: dict[str, float] = field(default_factory=dict)

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


class ResponseDecoder:
    """Decode one response after the prompt; iterate `run()` for events."""

    def __init__(
        self,
        engine: Engine,
        vocab: Vocabulary,
        *,
        grammar: str,
        fmt: CallFormat,
        tools: Mapping[str, ToolSpec],
        seq: int,
        prompt_len: int,
        logits: NDArray[np.float32],
        mode: str,
        max_tokens: int,
        value_grammar: Callable[[ToolSpec, str, Sequence[str]], str] | None = None,
        branch_seqs: Sequence[int] = (),
        batch_pays: Callable[[int], bool] = lambda k: k > 1,
        parallel_pays: Callable[[ToolSpec, int], bool] = lambda spec, n: n > 1,
    ) -> None:
        self.engine = engine
        self.vocab = vocab
        self.matcher = TokenMatcher(vocab, grammar)
        self.fmt = fmt
        self.tools = tools
        self.seq = seq
        self.prompt_len = prompt_len
        self.logits = logits
        self.mode = mode
        self.jump = mode != "constrained"
        self.max_tokens = max_tokens
        self.value_grammar = value_grammar
        self.branch_seqs = tuple(branch_seqs)
        self.batch_pays = batch_pays
        self.parallel_pays = parallel_pays
        self.tokens: list[int] = []
        self.kv_len = 0
        # Response text kept incrementally (a token may end inside a UTF-8 character).
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self.totals = DecodeTotals()
        self.calls: list[ToolCall] = []
        self._call = _CallState(start=0)
        self._early: list[ToolCall] = []  # final calls handed out before their text was written
        self._heads = {name: self._head(name) for name in tools}

    # ------------------------------------------------------------------ text helpers
    def _head(self, name: str) -> tuple[str, str]:
        """(text up to the first argument key, text after the last argument) of a call."""
        text = self.fmt.serialize_call(ToolCall(name, {_SENTINEL: 0}))
        marker = json.dumps(_SENTINEL) + ":0"
        i = text.index(marker)
        return text[:i], text[i + len(marker) :]

    def text(self) -> str:
        return self._text

    def _call_text(self, full: str) -> str:
        t = full[self._call.start :]
        sep = self.fmt.separator
        if self.calls and sep and t.startswith(sep):
            t = t[len(sep) :]
        return t.lstrip() if self.calls else t

    # ------------------------------------------------------------------ the loop
    def run(self) -> Iterator[CallEvent]:
        while not self.matcher.stopped:
            if len(self.tokens) >= self.max_tokens:
                self.totals.finish_reason = "length"
                return
            if self.jump:
                forced = self.matcher.forced()[: self.max_tokens - len(self.tokens)]
                if forced:
                    yield from self._commit(forced, decoded=False)
                    continue
            if self.mode in ("fast", "lossless"):
                drafted = yield from self._maybe_draft()
                if drafted:
                    continue
            self._flush()
            token = self.matcher.best(self.logits)
            if self.engine.is_eog(token):
                return
            yield from self._commit([token], decoded=True)

    def _flush(self) -> None:
        """Forward the committed-but-pending tokens (one pass, logits of the last)."""
        pending = self.tokens[self.kv_len :]
        if not pending:
            return
        base = self.prompt_len + self.kv_len
        rows = self.engine.forward(
            [
                BatchToken(t, base + i, (self.seq,), i == len(pending) - 1)
                for i, t in enumerate(pending)
            ]
        )
        self.logits = rows[0]
        self.kv_len = len(self.tokens)

    def _commit(self, tokens: Sequence[int], *, decoded: bool) -> Iterator[CallEvent]:
        self.matcher.consume_many(tokens)
        self.tokens.extend(tokens)
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
            for name, (head, _) in self._heads.items():
                if call_text.startswith(head):
                    self._call.spec = self.tools[name]
                    yield CallEvent("name", _now_ms(), name=name)
                    break
        if not call_text.rstrip().endswith(self.fmt.close or "}"):
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
        if spec is None or self.value_grammar is None:
            return False
        if not state.drafted:
            state.drafted = True
            keys = spec.required[: len(self.branch_seqs)]
            # A provisional call is worth drafting for even when batching does not pay.
            provisional_pays = bool(keys) and bool(spec.read_only and spec.optional)
            if not keys or not (provisional_pays or self.parallel_pays(spec, len(keys))):
                return False  # decode the values serially, exactly as `jump`
            head, tail = self._heads[spec.name]
            t0 = time.perf_counter()
            self._flush()  # exactly the pass `jump` makes for these tokens
            vg = self.value_grammar
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
                branch_seqs=self.branch_seqs,
                batch_pays=self.batch_pays,
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
                    elif not spec.optional and self.mode == "fast":
                        yield self._emit_early(call)
            state.draft_text = required_text + (tail if not spec.optional else "")
            if self.mode == "fast":
                committed = yield from self._write_back(required_text)
                return committed
        if self.mode == "lossless" and state.draft_text is not None:
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
        t0 = time.perf_counter()
        yield from self._commit(draft, decoded=False)
        self.totals.drafted += len(draft)
        self.totals.accepted += len(draft)
        self._flush()
        self.totals.add_phase("write_back", (time.perf_counter() - t0) * 1000)
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
        first = self.matcher.best(self.logits)
        if not draft or first != draft[0]:
            self._call.failed_at.add(at)
            return False
        t0 = time.perf_counter()
        base = self.prompt_len + self.kv_len
        rows = self.engine.forward(
            [BatchToken(t, base + i, (self.seq,), True) for i, t in enumerate(draft)]
        )
        probe = self.matcher.copy()
        accepted: list[int] = []
        correction: list[int] = []
        correction_decoded = False
        decoded_choices = 0
        prev = self.logits
        j = 0
        while j < len(draft) and not probe.stopped:
            forced = probe.forced()
            if forced:
                if list(draft[j : j + len(forced)]) != forced:
                    correction = forced
                    break
                probe.consume_many(forced)
                accepted.extend(forced)
                j += len(forced)
                prev = rows[j - 1]
                continue
            tok = probe.best(prev)
            if self.engine.is_eog(tok):
                break
            if tok != draft[j]:
                correction = [tok]
                correction_decoded = True
                break
            probe.consume(tok)
            accepted.append(tok)
            decoded_choices += 1
            j += 1
            prev = rows[j - 1]
        self.engine.seq_remove(self.seq, base + len(accepted))
        self.totals.drafted += len(draft)
        self.totals.accepted += len(accepted)
        yield from self._commit(accepted, decoded=False)
        # Accepted tokens the model chose (not forced) count as decoded, as in `jump`.
        self.totals.prefilled -= decoded_choices
        self.totals.decoded += decoded_choices
        self.kv_len = len(self.tokens)
        self.logits = prev
        if correction:
            yield from self._commit(correction, decoded=correction_decoded)
        self.totals.add_phase("verify", (time.perf_counter() - t0) * 1000)
        if not correction and j < len(draft) and not probe.stopped:
            self._call.failed_at.add(len(self.tokens))
        return True
