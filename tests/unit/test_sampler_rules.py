"""The sampling settings and the sampler, without a model (docs/sampling.md)."""

from __future__ import annotations

import numpy as np
import pytest

from toolweave.native.sampling import Sampler, choose
from toolweave.sampling import Sampling

LOGITS = np.array([2.0, 1.0, 0.5, 0.0, -1.0, -np.inf], dtype=np.float32)


@pytest.mark.parametrize(
    ("settings", "word"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"seed": 1.5}, "seed"),
        ({"seed": True}, "seed"),
    ],
)
def test_bad_settings_raise_one_line_errors(settings: dict[str, object], word: str) -> None:
    with pytest.raises(ValueError, match=word) as info:
        Sampling(**settings)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_defaults_are_greedy_and_of_reads_options() -> None:
    assert Sampling().greedy and Sampling(top_k=5, seed=1).greedy
    s = Sampling.of({"temperature": 0.7, "top_p": None, "seed": 3, "tools": []})
    assert s == Sampling(temperature=0.7, seed=3) and not s.greedy
    assert s.replace(top_k=4, seed=None) == Sampling(temperature=0.7, top_k=4, seed=3)
    with pytest.raises(ValueError, match="greedy"):
        Sampler(Sampling())


def _exact(sampling: Sampling, logits: np.ndarray, allowed: np.ndarray | None = None) -> dict:
    ids, probs = Sampler(sampling).distribution(logits, allowed)
    assert probs.sum() == pytest.approx(1.0)
    return {int(i): float(p) for i, p in zip(ids, probs, strict=True)}


def test_chain_order_mask_top_k_top_p_temperature() -> None:
    allowed = np.array([False, True, True, True, True, True])
    dist = _exact(Sampling(temperature=1.0), LOGITS, allowed)
    assert set(dist) == {1, 2, 3, 4}  # masked and -inf tokens cannot be drawn
    assert set(_exact(Sampling(temperature=1.0, top_k=2), LOGITS)) == {0, 1}
    # top-p at temperature 1: p(0)=0.56, p(0)+p(1)=0.77 reaches 0.6
    assert set(_exact(Sampling(temperature=1.0, top_p=0.6), LOGITS)) == {0, 1}
    # ... and the temperature applies after it: a high one does not widen the nucleus
    assert set(_exact(Sampling(temperature=50.0, top_p=0.6), LOGITS)) == {0, 1}
    hot = _exact(Sampling(temperature=2.0, top_k=2), LOGITS)
    assert hot[0] / hot[1] == pytest.approx(np.exp(0.5))
    one = np.array([False, False, True, False, False, False])
    assert _exact(Sampling(temperature=1.0), LOGITS, one) == {2: 1.0}


def test_same_seed_same_draws() -> None:
    a = Sampler(Sampling(temperature=1.0, seed=5))
    b = Sampler(Sampling(temperature=1.0, seed=5))
    draws = [a.draw(LOGITS) for _ in range(50)]
    assert draws == [b.draw(LOGITS) for _ in range(50)]
    assert len(set(draws)) > 1
    assert choose(None, None, LOGITS) == 0  # no sampler: the argmax


def test_verify_follows_the_speculative_sampling_rule() -> None:
    """For a one-hot draft d the rule gives d with probability p(d) and otherwise p
    without d, renormalised: in total exactly p. Checked on 40,000 draws."""
    sampler = Sampler(Sampling(temperature=1.0, seed=0))
    _, p = sampler.distribution(LOGITS)
    n = 40_000
    for draft in (0, 3):
        counts = np.bincount([sampler.verify(LOGITS, None, draft) for _ in range(n)], minlength=5)
        freq = counts[:5] / n
        assert np.abs(freq - p).max() < 4 * np.sqrt(p * (1 - p) / n).max()
