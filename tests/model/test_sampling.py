"""Sampling on the real SmolLM2 model (docs/sampling.md).

The distribution test draws one short call per seed in `lossless` (value drafts verified
by the speculative-sampling rule) and in plain serial sampling (`jump`: every token the
grammar leaves free drawn one step at a time, the ones it forces prefilled), with disjoint
seeds, and compares the two samples of outputs with a
chi-square test of homogeneity at level `ALPHA`. The same test, fed `lossless` with a
deliberately wrong rule (every draft token accepted), must reject: that is its power.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from langchain_core.messages import AIMessage
from numpy.typing import NDArray

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.native.caller import ToolCaller
from toolweave.native.decode.plan import DecodePlan
from toolweave.native.engine import Engine
from toolweave.native.sampling import Sampler
from toolweave.results import CallResult
from toolweave.sampling import Sampling
from toolweave.toolspec import ToolSpec

WEATHER = ToolSpec.from_dict(
    {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
)
QUERY = "What is the weather like in Paris today?"
#: Samples per mode, the sampling settings and the test's level. At 200 samples a wrong
#: acceptance rule scored chi2 = 296 against a critical value of 19, the right one 11
#: against 21; the statistic grows with N: at 60 the wrong rule scores 83 against 14, the
#: right one 5.6 against 18.7.
N = 60
SETTINGS = {"temperature": 1.5, "top_k": 8}
ALPHA = 1e-3
#: Output tokens kept per sample: the call's head (17 forced tokens with SmolLM2's
#: template) and the value's first three tokens, where the model has a real choice
#: at this temperature ("Paris" about three times in four).
MAX_TOKENS = 20


class AlwaysAccept(Sampler):
    """A wrong verification rule: every draft token the grammar allows is taken."""

    def verify(
        self, logits: NDArray[np.float32], allowed: NDArray[np.bool_] | None, draft: int
    ) -> int:
        if allowed is not None and not allowed[draft]:
            return super().verify(logits, allowed, draft)
        return draft


def _caller(engine: Engine) -> ToolCaller:
    # parallel_values: draft the value even where the cost table says it does not pay
    return ToolCaller(engine, [WEATHER], max_tokens=MAX_TOKENS, parallel_values=True)


def _run(caller: ToolCaller, mode: str, sampler: Sampler) -> CallResult:
    result: CallResult | None = None
    for ev in caller._decode_events(QUERY, DecodePlan.for_mode(mode), sampler):
        result = ev.result if ev.kind == "done" else result
    assert result is not None
    return result


Outputs = list[tuple[int, ...]]


def _samples(caller: ToolCaller, mode: str, seeds: range, rule: type[Sampler] = Sampler) -> Outputs:
    out: Outputs = []
    for seed in seeds:
        result = _run(caller, mode, rule(Sampling(**SETTINGS, seed=seed)))
        out.append(result.tokens)
    return out


def chi_square(a: Sequence[object], b: Sequence[object]) -> tuple[float, float, int]:
    """The chi-square homogeneity statistic of two samples of outcomes, the critical
    value at level `ALPHA` and the degrees of freedom. Outcomes seen fewer than 10
    times in both samples together are pooled into one category."""
    ca, cb = Counter(a), Counter(b)
    total = ca + cb
    common = [k for k, n in total.items() if n >= 10]
    rows = [[ca[k] for k in common], [cb[k] for k in common]]
    rest = [len(a) - sum(rows[0]), len(b) - sum(rows[1])]
    if sum(rest) >= 10:
        rows[0].append(rest[0])
        rows[1].append(rest[1])
    table = np.array(rows, dtype=float)
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    stat = float(((table - expected) ** 2 / expected).sum())
    df = max(1, table.shape[1] - 1)
    return stat, _chi2_quantile(df, ALPHA), df


def _chi2_quantile(df: int, alpha: float) -> float:
    """The upper `alpha` quantile of chi-square with `df` degrees of freedom (Wilson and
    Hilferty's cube-root normal approximation; within 1% for df >= 2 at alpha 1e-3)."""
    z = _normal_quantile(1 - alpha)
    h = 2 / (9 * df)
    return float(df * (1 - h + z * math.sqrt(h)) ** 3)


def _normal_quantile(p: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(100):  # bisection on the normal CDF
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
            lo = mid
        else:
            hi = mid
    return lo


@pytest.fixture(scope="module")
def plain(engine: Engine) -> Outputs:
    """Plain serial sampling in `jump`, seeds 0..N-1: `constrained` draws the same free
    tokens, and also steps through the 17 forced ones, which have no choice to draw."""
    return _samples(_caller(engine), "jump", range(N))


@pytest.mark.slow
def test_lossless_has_the_distribution_of_plain_sampling(engine: Engine, plain: Outputs) -> None:
    caller = _caller(engine)
    lossless = _samples(caller, "lossless", range(N, 2 * N))
    stat, critical, df = chi_square(plain, lossless)
    print(f"right rule: chi2={stat:.1f} critical={critical:.1f} df={df}")
    assert len(set(plain)) > 1, "the settings must leave the model a real choice"
    check = _run(caller, "lossless", Sampler(Sampling(**SETTINGS, seed=0)))
    assert check.stats.drafted_tokens > 0, "lossless must have verified drafts here"
    assert stat < critical, (stat, critical, df)


@pytest.mark.slow
def test_the_distribution_test_rejects_a_wrong_acceptance_rule(
    engine: Engine, plain: Outputs
) -> None:
    wrong = _samples(_caller(engine), "lossless", range(N, 2 * N), AlwaysAccept)
    stat, critical, df = chi_square(plain, wrong)
    print(f"wrong rule: chi2={stat:.1f} critical={critical:.1f} df={df}")
    assert stat > critical, (stat, critical, df)


@pytest.mark.parametrize("mode", ["constrained", "jump", "fast", "lossless"])
def test_same_seed_same_tokens_and_the_call_stays_valid(engine: Engine, mode: str) -> None:
    caller = ToolCaller(engine, [WEATHER], max_tokens=48, parallel_values=True)
    runs = [caller.call(QUERY, mode, sampling=Sampling(temperature=1.5, seed=s)) for s in range(8)]
    again = caller.call(QUERY, mode, sampling=Sampling(temperature=1.5, seed=0))
    assert again.tokens == runs[0].tokens
    assert len({r.tokens for r in runs}) > 1, "different seeds should give different outputs"
    for r in runs:
        if r.finish_reason == "length":
            continue
        # the skeleton is forced: whatever was drawn, the call is valid for the schema
        assert not r.invalid and len(r.calls) == 1, r.text
        assert r.calls[0].name == "get_weather"
        assert isinstance(r.calls[0].arguments["city"], str)
        assert r.stats.logit_bound is None and not r.stats.near_ties


def test_temperature_zero_is_greedy(engine: Engine) -> None:
    caller = ToolCaller(engine, [WEATHER], max_tokens=48)
    greedy = caller.call(QUERY, "lossless")
    zero = caller.call(QUERY, "lossless", sampling=Sampling(temperature=0.0, top_k=3, seed=9))
    assert zero.tokens == greedy.tokens


def test_chat_model_checks_its_sampling_settings() -> None:
    with pytest.raises(ValueError, match="top_p"):
        ChatToolweave(temperature=0.5, top_p=2.0)
    with pytest.raises(ValueError, match="temperature"):
        ChatToolweave(temperature=-1.0)


def test_grammar_mode_refuses_sampling(engine: Engine) -> None:
    caller = ToolCaller(engine, [WEATHER], max_tokens=48)
    with pytest.raises(ValueError, match="greedily"):
        caller.call(QUERY, "grammar", sampling=Sampling(temperature=0.5))


def test_chat_model_samples_a_tool_call_end_to_end() -> None:
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        return "sunny"

    model = ChatToolweave(temperature=0.7, seed=1, max_tokens=48)
    assert model._identifying_params["temperature"] == 0.7
    assert model._get_ls_params()["ls_temperature"] == 0.7
    bound = model.bind_tools([get_weather], tool_choice="get_weather")
    first = bound.invoke(QUERY)
    second = bound.invoke(QUERY)
    assert isinstance(first, AIMessage) and first.tool_calls
    assert first.tool_calls[0]["name"] == "get_weather"
    assert isinstance(first.tool_calls[0]["args"]["city"], str)
    assert second.tool_calls[0]["args"] == first.tool_calls[0]["args"]  # same seed
    text = model.invoke("Say hello.", temperature=1.0, seed=3)
    assert text.content == model.invoke("Say hello.", temperature=1.0, seed=3).content
