"""ExSpec's n-gram table and draft-length rule: pure, checked against brute force."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolweave.drafting.ngram import AcceptanceRate, NgramTable, draft_length

tokens = st.integers(min_value=0, max_value=5)  # a small alphabet, so keys repeat
streams = st.lists(st.lists(tokens, max_size=30), max_size=4)
acceptances = st.floats(min_value=0.0, max_value=1.0)


def reference(streams: list[list[int]], n: int) -> dict[tuple[int, ...], int]:
    """Most frequent follower per key; ties to the latest occurrence (the documented rule)."""
    counts: dict[tuple[int, ...], dict[int, int]] = {}
    latest: dict[tuple[int, ...], dict[int, int]] = {}
    pos = 0
    for s in streams:
        for i in range(len(s) - n + 1):
            key, f = tuple(s[i : i + n - 1]), s[i + n - 1]
            counts.setdefault(key, {}).setdefault(f, 0)
            counts[key][f] += 1
            latest.setdefault(key, {})[f] = pos
            pos += 1
    return {
        key: max(fs, key=lambda f, key=key: (fs[f], latest[key][f])) for key, fs in counts.items()
    }


@given(streams, st.integers(min_value=2, max_value=4))
def test_lookup_returns_the_most_frequent_follower(data: list[list[int]], n: int) -> None:
    table = NgramTable.build(data, n=n)
    expected = reference(data, n)
    assert dict(table.next_token) == expected
    for key, follower in expected.items():
        assert table.lookup([9, 9, *key]) == follower  # only the last n-1 tokens count
    assert table.lookup([7] * (n - 1)) is None  # 7 is outside the alphabet
    assert table.lookup([0] * (n - 2)) is None  # too short a context
    assert table.source_tokens == sum(map(len, data))
    assert table.size_bytes == len(table) * n * 4
    followers: dict[tuple[int, ...], set[int]] = {}
    for s in data:
        for i in range(len(s) - n + 1):
            followers.setdefault(tuple(s[i : i + n - 1]), set()).add(s[i + n - 1])
    assert table.uncertain == {key for key, fs in followers.items() if len(fs) > 1}
    for key, fs in followers.items():
        assert table.certain(list(key)) == (len(fs) == 1)


def test_ties_go_to_the_latest_occurrence() -> None:
    table = NgramTable.build([[1, 2, 3, 1, 2, 4], [1, 2, 5]])
    assert table.lookup([1, 2]) == 5  # three followers seen once each: the query's wins
    assert not table.certain([1, 2]) and table.certain([2, 3]) and not table.certain([9, 9])
    assert table.draft([1, 2], 3) == [5] and table.draft([1, 2], 3, certain_only=True) == []
    assert table.draft([3, 1], 3) == [2, 5] and table.draft([3, 1], 3, certain_only=True) == [2]
    assert NgramTable.build([[1, 2, 3, 1, 2, 3, 1, 2, 4]]).lookup([1, 2]) == 3
    assert NgramTable.build([[1, 2], [3, 4]]).lookup([2, 3]) is None  # no cross-stream window


@given(streams, st.lists(tokens, max_size=4), st.integers(min_value=0, max_value=12))
def test_draft_chains_lookups_until_the_first_miss(
    data: list[list[int]], context: list[int], max_len: int
) -> None:
    table = NgramTable.build(data)
    draft = table.draft(context, max_len)
    window = list(context)
    for token in draft:
        assert table.lookup(window) == token
        window.append(token)
    assert len(draft) <= max_len
    if len(draft) < max_len:
        assert table.lookup(window) is None
    sure = table.draft(context, max_len, certain_only=True)
    assert draft[: len(sure)] == sure  # a prefix of the full draft...
    window = list(context)
    for token in sure:  # ...made of certain keys only
        assert table.certain(window)
        window.append(token)
    if len(sure) < len(draft):
        assert not table.certain(window)


@given(st.lists(tokens, max_size=6), st.integers(min_value=0, max_value=8))
def test_an_empty_table_drafts_nothing(context: list[int], max_len: int) -> None:
    for table in (NgramTable.build([]), NgramTable.build([[1, 2], [3]])):
        assert len(table) == 0 and table.size_bytes == 0
        assert table.draft(context, max_len) == []


def test_build_rejects_n_below_two() -> None:
    with pytest.raises(ValueError):
        NgramTable.build([[1, 2, 3]], n=1)


# ---------------------------------------------------------------------- draft length
SERIAL = 8.0
#: SmolLM2 on a 2-core CPU: k tokens with logits for all cost 1.9/2.8/4.3 steps.
MEASURED = {1: 8.0, 2: 15.2, 3: 19.0, 4: 22.4, 5: 26.0, 6: 29.0, 7: 31.6, 8: 34.4, 9: 37.0}


@given(acceptances, st.integers(min_value=0, max_value=8))
def test_draft_length_is_zero_when_passes_cost_as_much_as_serial_steps(
    a: float, max_len: int
) -> None:
    assert draft_length(lambda n: n * SERIAL, a, max_len=max_len) == 0


# From 0.1: below it a**8 vanishes next to 1 in floating point, so the last draft
# token's gain is not representable and k=max_len-1 ties (plain wins ties).
@given(st.floats(min_value=0.1, max_value=1.0), st.integers(min_value=1, max_value=8))
def test_draft_length_is_positive_when_passes_are_cheap(a: float, max_len: int) -> None:
    k = draft_length(lambda n: SERIAL, a, max_len=max_len)  # a flat cost: any hit is free
    assert k == max_len


@given(acceptances, acceptances, st.integers(min_value=0, max_value=8))
def test_draft_length_grows_with_acceptance(a: float, b: float, max_len: int) -> None:
    lo, hi = sorted((a, b))
    assert draft_length(MEASURED, lo, max_len=max_len) <= draft_length(
        MEASURED, hi, max_len=max_len
    )


def test_draft_length_on_measured_costs() -> None:
    assert draft_length(MEASURED, 0.0) == 0
    assert draft_length(MEASURED, 0.6) == 0  # the multi-token tax beats the expected gain
    assert draft_length(MEASURED, 0.9, max_len=1) == 0  # one draft token never pays here
    assert draft_length(MEASURED, 0.9) > 2
    assert draft_length(MEASURED, 1.0) == 8
    with pytest.raises(ValueError):
        draft_length(MEASURED, 1.5)
    with pytest.raises(ValueError):
        draft_length({1: 0.0}, 0.5, max_len=0)


@given(st.lists(st.booleans(), max_size=40))
def test_acceptance_rate_follows_observations(hits: list[bool]) -> None:
    rate = AcceptanceRate()
    for hit in hits:
        before = rate.rate
        rate = rate.observe(int(hit), not hit)
        assert 0.0 <= rate.rate <= 1.0
        assert (rate.rate >= before) if hit else (rate.rate <= before)
    acc, obs = 3.6, 4.0  # the default prior: 0.9 worth 4 observations
    for hit in (1, 1, 1, 0):
        acc, obs = acc * 0.9 + hit, obs * 0.9 + 1
    three_then_miss = AcceptanceRate().observe(3, True)
    assert (three_then_miss.accepted, three_then_miss.observed) == pytest.approx((acc, obs))


def test_context_rates_stop_drafting_where_drafts_keep_failing() -> None:
    from toolweave.drafting.ngram import AcceptanceRate, ContextRates

    overall = AcceptanceRate()  # 0.9
    contexts = ContextRates(prior=2.0, max_contexts=2)
    unseen = (0.9 * 2 + 0.5) / 3  # the overall rate, shrunk towards 0.5
    assert contexts.rate((1, 2), overall) == pytest.approx(unseen)
    for _ in range(3):
        contexts.observe((1, 2), overall, 0, True)
    assert contexts.rate((1, 2), overall) < 0.35
    costs = {1: 10.0, 2: 14.0, 3: 18.0, 4: 22.0}
    assert draft_length(costs, contexts.rate((1, 2), overall), max_len=3) == 0
    assert draft_length(costs, contexts.rate((5, 6), overall), max_len=3) > 0
    contexts.observe((3, 4), overall, 2, False)
    contexts.observe((7, 8), overall, 2, False)  # over max_contexts: the oldest goes
    assert len(contexts) == 2
    assert contexts.rate((1, 2), overall) == pytest.approx(unseen)
    with pytest.raises(ValueError):
        ContextRates(prior=0)
