"""ExSpec's draft model: an n-gram lookup table over the few-shot examples and the query.

Agent outputs (plans, Arbiter decisions) copy most of their tokens from the examples and
the query in their prompt (Agent-X, section 3.2). `NgramTable` maps the last n-1 tokens
to the token that most often followed them in those texts; chained lookups give a draft
that the model verifies in one pass (`toolweave.native.decode.exspec`). Everything here is
pure: token ids in, token ids out.

`draft_length` decides how much of a draft is worth verifying, from the measured cost of
a k-token pass and a running acceptance rate (`AcceptanceRate`): on a CPU where a
4-token verification costs about 2.8 serial steps, a draft pays only when most of it is
accepted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

__all__ = ["AcceptanceRate", "ContextRates", "NgramTable", "draft_length"]

#: Bytes of one packed int32 token id, the unit of `NgramTable.size_bytes`.
_TOKEN_BYTES = 4


@dataclass(frozen=True)
class NgramTable:
    """Key: the previous ``n - 1`` tokens; value: the token that most often followed them.

    Ties between equally frequent followers go to the one seen most recently (the
    streams are read in the order given, so the query, passed last, wins ties against
    the examples). A key is *uncertain* when it was seen with different followers: in
    plans that is a slot the examples fill differently (an argument value), where the
    table's guess is right far less often (measured on SmolLM2 plans: 59% against 93%
    for keys with one follower). Build it with `NgramTable.build`.
    """

    n: int
    next_token: Mapping[tuple[int, ...], int]
    uncertain: frozenset[tuple[int, ...]] = frozenset()
    source_tokens: int = 0
    build_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ValueError(f"an n-gram table needs n >= 2, got {self.n}")
        object.__setattr__(self, "next_token", MappingProxyType(dict(self.next_token)))
        object.__setattr__(self, "uncertain", frozenset(self.uncertain))

    @classmethod
    def build(cls, token_streams: Sequence[Sequence[int]], n: int = 3) -> NgramTable:
        """Slide a window of `n` tokens over each stream (windows never span two streams)."""
        if n < 2:
            raise ValueError(f"an n-gram table needs n >= 2, got {n}")
        t0 = time.perf_counter()
        # key -> follower -> (count, position of its latest occurrence)
        seen: dict[tuple[int, ...], dict[int, tuple[int, int]]] = {}
        position = 0
        total = 0
        for stream in token_streams:
            tokens = [int(t) for t in stream]
            total += len(tokens)
            for i in range(len(tokens) - n + 1):
                followers = seen.setdefault(tuple(tokens[i : i + n - 1]), {})
                follower = tokens[i + n - 1]
                count = followers.get(follower, (0, 0))[0]
                followers[follower] = (count + 1, position)
                position += 1
        table = {
            key: max(followers.items(), key=lambda item: item[1])[0]
            for key, followers in seen.items()
        }
        uncertain = frozenset(key for key, followers in seen.items() if len(followers) > 1)
        build_ms = (time.perf_counter() - t0) * 1000
        return cls(
            n=n, next_token=table, uncertain=uncertain, source_tokens=total, build_ms=build_ms
        )

    @property
    def context_len(self) -> int:
        """How many trailing tokens a lookup reads (n - 1)."""
        return self.n - 1

    def __len__(self) -> int:
        return len(self.next_token)

    @property
    def size_bytes(self) -> int:
        """Size as packed int32 arrays (n ids per entry): what the table really holds,
        without Python's object overhead."""
        return len(self.next_token) * self.n * _TOKEN_BYTES

    def lookup(self, context: Sequence[int]) -> int | None:
        """The token predicted after `context` (its last n-1 tokens), or None."""
        if len(context) < self.n - 1:
            return None
        return self.next_token.get(tuple(context[len(context) - self.n + 1 :]))

    def certain(self, context: Sequence[int]) -> bool:
        """Whether the table has an entry for `context` that never had another follower."""
        key = tuple(context[max(0, len(context) - self.n + 1) :])
        return key in self.next_token and key not in self.uncertain

    def draft(
        self, context: Sequence[int], max_len: int, *, certain_only: bool = False
    ) -> list[int]:
        """Up to `max_len` tokens, each looked up after the previous ones; stops at the
        first miss (so an empty list when the table has no entry for `context`), and with
        `certain_only` also before the first token of an uncertain key."""
        window = list(context[max(0, len(context) - self.n + 1) :])
        out: list[int] = []
        while len(out) < max_len:
            token = self.lookup(window)
            if token is None or (certain_only and tuple(window) in self.uncertain):
                break
            out.append(token)
            window = [*window[1:], token]
        return out


@dataclass(frozen=True)
class AcceptanceRate:
    """Running probability that a drafted token matches the model's greedy token, given
    that the draft tokens before it did (the geometric model `draft_length` assumes).

    The default start is a prior of 0.9 worth 4 observations (`accepted / observed`):
    drafts of certain keys are mostly accepted, and a few mismatches stop drafting.
    Every observation first scales the counts by `decay`, so the rate follows the part
    of the output being written (copying an example versus free text), not the whole
    history.
    """

    accepted: float = 3.6
    observed: float = 4.0
    decay: float = 0.9

    def __post_init__(self) -> None:
        if not 0 < self.decay <= 1:
            raise ValueError("decay must be in (0, 1]")
        if self.observed <= 0 or not 0 <= self.accepted <= self.observed:
            raise ValueError("need observed > 0 and 0 <= accepted <= observed")

    @property
    def rate(self) -> float:
        return self.accepted / self.observed

    def observe(self, accepted: int, rejected: bool) -> AcceptanceRate:
        """Record `accepted` matching draft tokens, then a mismatch if `rejected`."""
        acc, obs = self.accepted, self.observed
        for hit in [True] * accepted + ([False] if rejected else []):
            acc = acc * self.decay + hit
            obs = obs * self.decay + 1
        return replace(self, accepted=acc, observed=obs)


class ContextRates:
    """Acceptance per draft context (the n-1 tokens a draft starts from), on top of an
    output kind's overall `AcceptanceRate`.

    A context's estimate starts at the overall rate worth `prior` observations plus one
    observation at 0.5 (an unseen context is less certain than the output's average: a
    long draft from it would be priced as if most of it passed), and then follows what
    drafts from that context did. Where the examples make a choice one way
    and the model another (an Arbiter's "Finish" against its "Replan"), drafts from that
    context keep failing at their first token; its own estimate stops them there while
    drafts elsewhere go on. At most `max_contexts` are kept (the oldest go first).
    """

    def __init__(self, *, prior: float = 2.0, max_contexts: int = 4096) -> None:
        if prior <= 0 or max_contexts < 1:
            raise ValueError("need prior > 0 and max_contexts >= 1")
        self.prior = prior
        self.max_contexts = max_contexts
        self._rates: dict[tuple[int, ...], AcceptanceRate] = {}

    def __len__(self) -> int:
        return len(self._rates)

    def _get(self, context: Sequence[int], overall: AcceptanceRate) -> AcceptanceRate:
        known = self._rates.get(tuple(context))
        if known is not None:
            return known
        return AcceptanceRate(overall.rate * self.prior + 0.5, self.prior + 1, overall.decay)

    def rate(self, context: Sequence[int], overall: AcceptanceRate) -> float:
        """The acceptance to expect for a draft from `context`."""
        return self._get(context, overall).rate

    def observe(
        self, context: Sequence[int], overall: AcceptanceRate, accepted: int, rejected: bool
    ) -> None:
        """Record a draft from `context` (see `AcceptanceRate.observe`)."""
        key = tuple(context)
        updated = self._get(key, overall).observe(accepted, rejected)
        self._rates.pop(key, None)
        self._rates[key] = updated
        while len(self._rates) > self.max_contexts:
            del self._rates[next(iter(self._rates))]


PassCost = Callable[[int], float] | Mapping[int, float]


def draft_length(pass_ms: PassCost, acceptance: float, *, max_len: int = 8) -> int:
    """The draft length k in 0..max_len that maximises expected tokens per millisecond.

    `pass_ms(n)` (a callable or a mapping) is the cost of one pass of n tokens with logits
    for every row in the decoding sequence; n=1 is a plain serial step. A pass verifying
    k drafted tokens yields ``1 + a + ... + a**k`` tokens on average for a per-token
    acceptance `a` (the matched prefix plus the model's own next token). k=0 (plain
    decoding) wins ties, so drafting happens only when it is expected to pay.
    """
    if not 0 <= acceptance <= 1 or math.isnan(acceptance):
        raise ValueError(f"acceptance must be in [0, 1], got {acceptance}")
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    cost = pass_ms.__getitem__ if isinstance(pass_ms, Mapping) else pass_ms
    best_k = 0
    best_rate = 1.0 / _positive(cost(1), 1)
    expected = 1.0
    term = 1.0
    for k in range(1, max_len + 1):
        term *= acceptance
        expected += term
        rate = expected / _positive(cost(k + 1), k + 1)
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k


def _positive(ms: float, n: int) -> float:
    if not ms > 0:
        raise ValueError(f"the cost of a {n}-token pass must be positive, got {ms}")
    return ms
