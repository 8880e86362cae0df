"""Parallel argument values (SchemaWeaver): the skeleton pass and batched value decoding.

Given the tokens committed so far for a call whose tool is known, every required argument
gets its own sequence: the shared prefix is shared (sequence copy or multi-sequence
tokens, never prefilled twice), the branch text `<head>"key":` is prefilled in one
skeleton pass for all branches, and then every unfinished value advances in one batched
pass per step, each under its own type grammar. The values are drafts: `fast` trusts them,
`lossless` verifies them under the real serial prefix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from toolweave.errors import ConstraintError
from toolweave.native.calibration import CostTable
from toolweave.native.constraints import TokenMatcher, Vocabulary
from toolweave.native.engine import BatchToken, Engine
from toolweave.native.sampling import Sampler, choose

__all__ = ["Branch", "ValueDrafts", "draft_values", "parallel_pays"]

_JSON = json.JSONDecoder()

#: A value that has not ended after this many tokens is abandoned (fallback to serial):
#: past it the branch is most likely looping, and every further pass is wasted.
MAX_VALUE_TOKENS = 48
#: Tokens of a branch's `"key":` text, for planning.
KEY_TOKENS = 3


def parallel_pays(costs: CostTable, n_values: int, value_tokens: float) -> bool:
    """Whether drafting `n_values` values side by side beats decoding them one after
    another, by the engine's measured cost table: a skeleton pass, `value_tokens` batched
    passes and one write-back (or verification) pass, against serial steps."""
    if n_values < 2:
        return False
    steps = max(1, round(value_tokens))
    serial = n_values * steps * costs.serial_step_ms
    skeleton = costs.pass_ms(n_values * KEY_TOKENS, n_values)
    values = steps * costs.pass_ms(n_values, n_values, sequences=True)
    write_back = costs.pass_ms(n_values * (steps + KEY_TOKENS), 1)
    return skeleton + values + write_back < serial


@dataclass
class Branch:
    """One required argument decoded in its own sequence."""

    key: str
    seq: int
    matcher: TokenMatcher
    lead: str = ""  # start of the value the grammar forces, prefilled with the key
    base: int = 0  # committed tokens shared with sequence 0
    pos: int = 0
    rest: list[int] = field(default_factory=list)  # key tokens prefilled by the skeleton pass
    tokens: list[int] = field(default_factory=list)  # value tokens decoded
    done: bool = False
    logits: NDArray[np.float32] | None = None

    def raw(self, engine: Engine) -> str:
        return self.lead + engine.detokenize(self.tokens)

    def value_end(self, engine: Engine) -> int | None:
        """Where the JSON value ends in the branch text, once text after it was decoded
        (so a number cannot grow any more); None while it is unfinished."""
        raw = self.raw(engine)
        try:
            _, end = _JSON.raw_decode(raw)
        except json.JSONDecodeError:
            return None
        return end if end < len(raw) else None

    def text(self, engine: Engine) -> str:
        """The value's JSON text, without what the branch decoded after it."""
        raw = self.raw(engine)
        end = self.value_end(engine)
        return raw if end is None else raw[:end]


@dataclass(frozen=True)
class ValueDrafts:
    """The drafted values in schema order, and what drafting cost."""

    values: dict[str, str] | None  # key -> JSON text of the value; None when drafting failed
    error: str | None
    lengths: list[int]  # tokens decoded per value
    passes: int
    skeleton_tokens: int
    kv_tokens: list[int]  # committed tokens now in sequence 0's KV (pending flushed)
    logits: NDArray[np.float32]  # sequence 0's logits after kv_tokens


def _text_prefix_len(engine: Engine, tokens: Sequence[int], text: str, limit: int) -> int:
    """Largest m <= limit with detokenize(tokens[:m]) a prefix of text."""
    m = min(limit, len(tokens))
    while m > 0 and not text.startswith(engine.detokenize(tokens[:m])):
        m -= 1
    return m


def draft_values(
    engine: Engine,
    vocab: Vocabulary,
    *,
    seq: int,
    prompt_len: int,
    committed: Sequence[int],
    kv_len: int,
    logits: NDArray[np.float32],
    head: str,
    keys: Sequence[str],
    grammar_for: Callable[[str, Sequence[str]], str],
    suffixes: Sequence[Sequence[str]],
    branch_seqs: Sequence[int],
    batch_pays: Callable[[int], bool],
    sampler: Sampler | None = None,
) -> ValueDrafts:
    """Decode the values of `keys` side by side; see the module docstring.

    `committed` are the response tokens so far (the first `kv_len` are in the KV of `seq`,
    `logits` belong to the last of those); `head` is the call text up to the first key.
    `batch_pays(k)` says whether one k-token pass beats k serial passes on this engine.
    With a `sampler` each value token is drawn (under its branch's grammar) instead of
    taken greedily: `fast`'s values under sampling.
    """
    if len(branch_seqs) < len(keys):
        raise ConstraintError(f"{len(keys)} values need {len(keys)} free sequences")
    branches: list[Branch] = []
    try:  # every branch copied so far is freed, whatever pass stops the request
        for key, suffix, bseq in zip(keys, suffixes, branch_seqs, strict=False):
            br = _branch(engine, vocab, key, grammar_for(key, suffix), bseq, head, committed)
            br.pos = prompt_len + br.base
            branches.append(br)
            engine.seq_remove(bseq)
            engine.seq_copy(seq, bseq, 0, prompt_len + min(br.base, kv_len))
        skeleton_tokens, seq0_logits = _skeleton_pass(
            engine, branches, seq, prompt_len, committed, kv_len, logits
        )
        passes = 1 if skeleton_tokens else 0
        try:
            passes += _decode_values(engine, branches, batch_pays, sampler)
            values: dict[str, str] | None = {b.key: b.text(engine) for b in branches}
            error = None
        except ConstraintError as exc:  # a value the grammar or the token limit cut short
            values, error = None, str(exc)
    finally:
        for b in branches:
            engine.seq_remove(b.seq)
    return ValueDrafts(
        values=values,
        error=error,
        lengths=[len(b.tokens) for b in branches],
        passes=passes,
        skeleton_tokens=skeleton_tokens,
        kv_tokens=list(committed),
        logits=seq0_logits,
    )


def _branch(
    engine: Engine,
    vocab: Vocabulary,
    key: str,
    grammar: str,
    bseq: int,
    head: str,
    committed: Sequence[int],
) -> Branch:
    """The branch of `key` in `bseq`: the committed tokens it shares with sequence 0
    (`base`) and the key tokens it adds (`rest`); no KV is written."""
    matcher = TokenMatcher(vocab, grammar)
    # The forced start of the value (a string's quote) is written with the key, so
    # the branch tokenizes `":"` as the serial decoder's jump-forward does.
    lead = matcher.forced_text()
    lead_tokens = engine.tokenize(lead, parse_special=False) if lead else []
    if lead_tokens and matcher.accepts_prefix(lead_tokens) == len(lead_tokens):
        matcher.consume_many(lead_tokens)
    else:
        lead = ""
    text = head + json.dumps(key, ensure_ascii=False) + ":" + lead
    base = _text_prefix_len(engine, committed, text, len(committed))
    rest = engine.tokenize(text[len(engine.detokenize(committed[:base])) :], parse_special=False)
    if not rest and base < len(committed):
        base -= 1  # need a token to ask logits from
        rest = engine.tokenize(
            text[len(engine.detokenize(committed[:base])) :], parse_special=False
        )
    br = Branch(key, bseq, matcher, lead=lead, base=base, rest=rest)
    br.done = matcher.stopped
    return br


def _skeleton_pass(
    engine: Engine,
    branches: list[Branch],
    seq: int,
    prompt_len: int,
    committed: Sequence[int],
    kv_len: int,
    logits: NDArray[np.float32],
) -> tuple[int, NDArray[np.float32]]:
    """Pending committed tokens (shared by seq 0 and every branch whose base covers them)
    and each branch's own key tokens in one pass, logits at each branch's last token.
    Returns the pass's tokens (0: no pass) and sequence 0's logits after it."""
    items: list[BatchToken] = []
    owners: list[tuple[str | None, list[Branch]]] = []
    pending = list(committed[kv_len:])
    for i, tok in enumerate(pending):
        idx = kv_len + i
        ids = (seq, *(b.seq for b in branches if b.base > idx))
        last_pending = i == len(pending) - 1
        wants = [b for b in branches if b.base == idx + 1 and not b.rest]
        flag = last_pending or bool(wants)
        items.append(BatchToken(tok, prompt_len + idx, ids, flag))
        if flag:
            owners.append(("seq0" if last_pending else None, wants))
    for b in branches:
        for j, tok in enumerate(b.rest):
            last = j == len(b.rest) - 1
            items.append(BatchToken(tok, b.pos + j, (b.seq,), last))
            if last:
                owners.append((None, [b]))
        b.pos += len(b.rest)
    seq0_logits = logits
    if items:
        rows = engine.forward(items)
        for row, (tag, owned) in zip(rows, owners, strict=True):
            if tag == "seq0":
                seq0_logits = row
            for b in owned:
                b.logits = row
    for b in branches:
        if b.logits is None:  # branch continues exactly from sequence 0's last token
            b.logits = seq0_logits
    return len(items), seq0_logits


def _decode_values(
    engine: Engine,
    branches: list[Branch],
    batch_pays: Callable[[int], bool],
    sampler: Sampler | None = None,
) -> int:
    """Advance every unfinished value one token per pass; returns the passes run."""
    passes = 0
    active = [b for b in branches if not b.done]
    while active:
        step: list[tuple[Branch, int]] = []
        for b in active:
            assert b.logits is not None
            tok = choose(sampler, b.matcher, b.logits)
            if engine.is_eog(tok):
                if not b.matcher.accepting:
                    raise ConstraintError(f"value of {b.key!r} ended without its closing text")
                b.done = True
                continue
            b.matcher.consume(tok)
            b.tokens.append(tok)
            if b.matcher.stopped or b.value_end(engine) is not None:
                b.done = True
            elif len(b.tokens) >= MAX_VALUE_TOKENS:
                raise ConstraintError(
                    f"value of {b.key!r} did not end in {MAX_VALUE_TOKENS} tokens"
                )
            else:
                step.append((b, tok))
        active = [b for b, _ in step]
        if not step:
            break
        groups = [step] if batch_pays(len(step)) else [[s] for s in step]
        for group in groups:
            rows = engine.forward([BatchToken(t, b.pos, (b.seq,), True) for b, t in group])
            passes += 1
            for row, (b, _) in zip(rows, group, strict=True):
                b.logits = row
                b.pos += 1
    return passes
