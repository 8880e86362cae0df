"""PromptWeaver on the workload's split: clustering, ordering, selection, messages."""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass
from itertools import groupby, pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolweave.eval.workload import PlanRequest, load_workload, tool_themes
from toolweave.prompting.clusters import coactivation_matrix, nmf
from toolweave.prompting.combinations import (
    Prefix,
    coverage,
    coverage_fraction,
    select_combinations,
)
from toolweave.prompting.promptweaver import PromptWeaver, fit_weavers, training_sequences
from toolweave.toolspec import ToolSpec

Key = tuple[str, ...]


@pytest.fixture(scope="module")
def train() -> list[PlanRequest]:
    return list(load_workload("train"))


@pytest.fixture(scope="module")
def test_split() -> list[PlanRequest]:
    return list(load_workload("test"))


@pytest.fixture(scope="module")
def weavers(train: list[PlanRequest]) -> dict[Key, PromptWeaver]:
    return fit_weavers(train, themes=tool_themes())


def _by_key(requests: list[PlanRequest]) -> dict[Key, list[PlanRequest]]:
    out: dict[Key, list[PlanRequest]] = {}
    for request in requests:
        out.setdefault(request.theme, []).append(request)
    return out


@dataclass(frozen=True)
class _Request:
    id: str
    request_text: str
    plan_text: str
    tools_used: tuple[str, ...]
    tools: tuple[ToolSpec, ...] = ()


def _spec(name: str) -> ToolSpec:
    return ToolSpec.from_dict({"name": name, "description": f"does {name}", "parameters": {}})


def test_coactivation_matrix_counts_pairs_and_uses() -> None:
    matrix = coactivation_matrix([["a", "b"], ["b", "c", "b"], ["b"], ["zzz"]], ["a", "b", "c"])
    assert matrix.tolist() == [[1, 1, 0], [1, 3, 1], [0, 1, 1]]


def test_nmf_lowers_the_error_and_is_deterministic(train: list[PlanRequest]) -> None:
    requests = _by_key(train)[("VehicleControlAPI",)]
    used = sorted({name for r in requests for name in r.tools_used})
    matrix = coactivation_matrix([r.tools_used for r in requests], used)
    errors = []
    for iterations in (0, 1, 10, 100, 500):
        w, h = nmf(matrix, 5, iterations=iterations, seed=3)
        assert (w >= 0).all() and (h >= 0).all()
        errors.append(float(np.linalg.norm(matrix - w @ h)))
    assert all(b <= a + 1e-9 for a, b in pairwise(errors)), errors
    assert errors[-1] < 0.5 * errors[0]
    first, again = nmf(matrix, 5, seed=3), nmf(matrix, 5, seed=3)
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])
    with pytest.raises(ValueError):
        nmf(-matrix, 2)


def test_fit_finds_planted_clusters() -> None:
    names = ["a", "b", "c", "d", "e", "unused"]
    themes = {"a": "x", "b": "x", "c": "y", "d": "y", "e": "x"}
    plans = [("a", "b")] * 6 + [("c", "d")] * 4 + [("e",)] * 2 + [("a",), ("c",)]
    requests = [
        _Request(f"r{i}", f"query {i}" + "!" * i, f"plan {i}", used) for i, used in enumerate(plans)
    ]
    weaver = PromptWeaver.fit([_spec(n) for n in names], requests, themes=themes, n_clusters=3)
    assert [c.tools for c in weaver.clusters] == [("a", "b"), ("e",), ("c", "d")]
    assert [c.theme for c in weaver.clusters] == ["x", "x", "y"]
    # The shortest request using exactly the cluster's tools.
    assert weaver.clusters[0].example == ("query 0", "plan 0")
    assert weaver.singles["a"] == ("query 12" + "!" * 12, "plan 12")
    assert weaver.singles["b"] == ("query 0", "plan 0")  # no single-tool request: a pair
    assert "unused" not in weaver.singles and weaver.unclustered == ("unused",)
    assert weaver.activated(["d", "a", "nope"]) == (0, 2)


def test_clusters_partition_the_used_tools(
    weavers: dict[Key, PromptWeaver], train: list[PlanRequest]
) -> None:
    for key, requests in _by_key(train).items():
        weaver = weavers[key]
        used = {name for r in requests for name in r.tools_used}
        clustered = [name for c in weaver.clusters for name in c.tools]
        assert len(clustered) == len(set(clustered)) and set(clustered) <= used
        assert len(weaver.clusters) >= 2, key
        order = [spec.name for spec in weaver.catalogue]
        for cluster in weaver.clusters:
            assert list(cluster.tools) == sorted(cluster.tools, key=order.index)
        assert set(weaver.unclustered) == set(order) - set(clustered)
        assert set(weaver.singles) == used  # a dropped cluster's tools keep their singles


def test_each_cluster_example_uses_its_tools(
    weavers: dict[Key, PromptWeaver], train: list[PlanRequest]
) -> None:
    exact = 0
    for key, requests in _by_key(train).items():
        by_id = {r.id: r for r in requests}
        for cluster in weavers[key].clusters:
            source = by_id[cluster.example_id]
            assert cluster.example == (source.request_text, source.plan_text)
            assert set(source.tools_used) == set(cluster.example_tools) <= set(cluster.tools)
            matching = [r for r in requests if set(r.tools_used) == set(cluster.tools)]
            if matching:
                exact += 1
                assert cluster.example_tools == cluster.tools
                size = len(source.request_text) + len(source.plan_text)
                assert size == min(len(r.request_text) + len(r.plan_text) for r in matching)
            else:  # fallback: the largest subset of the cluster some plan used
                inside = [r for r in requests if set(r.tools_used) <= set(cluster.tools)]
                assert len(cluster.example_tools) == max(len(set(r.tools_used)) for r in inside)
    assert exact >= 30


def test_same_theme_clusters_sit_together_most_frequent_first(
    weavers: dict[Key, PromptWeaver], train: list[PlanRequest]
) -> None:
    for key, requests in _by_key(train).items():
        weaver = weavers[key]
        runs = [theme for theme, _ in groupby(c.theme for c in weaver.clusters)]
        assert len(runs) == len(set(runs)), key
        for theme in runs:
            counts = [
                sum(1 for r in requests if set(c.tools) & set(r.tools_used))
                for c in weaver.clusters
                if c.theme == theme
            ]
            assert counts == sorted(counts, reverse=True), key


def test_single_examples_prefer_one_tool(
    weavers: dict[Key, PromptWeaver], train: list[PlanRequest]
) -> None:
    for key, requests in _by_key(train).items():
        for name, example in weavers[key].singles.items():
            source = next(r for r in requests if (r.request_text, r.plan_text) == example)
            assert name in source.tools_used
            alone = [r for r in requests if set(r.tools_used) == {name}]
            assert len(set(source.tools_used)) == 1 if alone else len(set(source.tools_used)) > 1


def test_catalogue_is_the_union_of_offered_tools(
    weavers: dict[Key, PromptWeaver], train: list[PlanRequest]
) -> None:
    for request in train:
        names = [spec.name for spec in weavers[request.theme].catalogue]
        offered = [spec.name for spec in request.tools]
        assert [n for n in names if n in offered] == offered


def test_coverage_reads_the_longest_stored_prefix() -> None:
    sequences: list[Prefix] = [("k", (0, 1, 2)), ("k", (0, 2)), ("j", (0,)), ("k", ())]
    stored: list[Prefix] = [("k", (0,)), ("k", (0, 1, 2)), ("j", (1,))]
    assert coverage(sequences, stored) == 3 + 1 + 0
    assert coverage_fraction(sequences, stored) == 4 / 6
    assert coverage_fraction([], stored) == 0.0


def test_select_combinations_on_a_known_case() -> None:
    sequences: list[Prefix] = [("k", (0, 1))] * 3 + [("k", (1,))] * 2 + [("j", (0,))]
    assert select_combinations(sequences, 2) == [("k", (0,)), ("k", (0, 1))]
    assert select_combinations(sequences, 10) == [
        ("k", (0,)),
        ("k", (0, 1)),
        ("k", (1,)),
        ("j", (0,)),
    ]
    assert select_combinations(sequences, 0) == []


_sequences = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.lists(st.integers(0, 5), max_size=4, unique=True).map(lambda ids: tuple(sorted(ids))),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(sequences=_sequences, budget=st.integers(0, 12), data=st.data())
def test_greedy_selection_properties(
    sequences: list[tuple[Hashable, tuple[int, ...]]], budget: int, data: st.DataObject
) -> None:
    chosen = select_combinations(sequences, budget)
    assert len(chosen) <= budget and len(set(chosen)) == len(chosen)
    held = set(chosen)
    assert all(len(ids) == 1 or (key, ids[:-1]) in held for key, ids in chosen)
    everything = {(k, ids[:end]) for k, ids in sequences for end in range(1, len(ids) + 1)}
    assert held <= everything
    assert len(chosen) == min(budget, len(everything))
    more = select_combinations(sequences, budget + 1)
    assert coverage(sequences, more) >= coverage(sequences, chosen)
    # A random parent-closed selection of the same size never covers more.
    picked: set[Prefix] = set()
    while len(picked) < len(chosen):
        frontier = sorted(
            (
                p
                for p in everything
                if p not in picked and (len(p[1]) == 1 or (p[0], p[1][:-1]) in picked)
            ),
            key=repr,
        )
        picked.add(data.draw(st.sampled_from(frontier)))
    assert coverage(sequences, chosen) >= coverage(sequences, picked)


def test_greedy_coverage_on_the_workload(
    weavers: dict[Key, PromptWeaver], train: list[PlanRequest], test_split: list[PlanRequest]
) -> None:
    train_sequences = training_sequences(weavers, train)
    test_sequences = training_sequences(weavers, test_split)
    chosen = select_combinations(train_sequences, 160)
    scores = [coverage_fraction(test_sequences, chosen[:budget]) for budget in (0, 10, 40, 160)]
    assert scores[0] == 0 and scores == sorted(scores) and scores[-1] > 0.5
    with pytest.raises(KeyError):
        training_sequences({}, train[:1])


def test_messages_keep_the_cached_prefix_first(
    weavers: dict[Key, PromptWeaver], test_split: list[PlanRequest]
) -> None:
    for key, requests in _by_key(test_split).items():
        weaver = weavers[key]
        static = weaver.static_messages()
        assert len(static) == 1 and static[0][0] == "system"
        for spec in weaver.catalogue:
            assert f"- {spec.name}(" in static[0][1]
        for request in requests:
            tools = request.tools_used
            # A dynamic example equal to a cluster's example is not repeated.
            shared = [weaver.clusters[c].example for c in weaver.activated(tools)][:1]
            dynamic = [*shared, ("another query", "1. join()")]
            messages = weaver.messages(request.request_text, tools, dynamic)
            assert messages[0] == static[0]
            prefix = weaver.prefix_messages(weaver.activated(tools))
            assert messages[: len(prefix)] == prefix
            # Every stored block sequence of the layout is a prefix of the messages.
            layout = weaver.layout(tools)
            assert layout[: len(weaver.activated(tools))] == weaver.activated(tools)
            for end in range(len(layout) + 1):
                prefix = weaver.prefix_messages(layout[:end])
                assert messages[: len(prefix)] == prefix
            assert messages[-1] == ("user", request.request_text)
            pairs = list(zip(messages[1:-1:2], messages[2:-1:2], strict=True))
            assert all(u[0] == "user" and a[0] == "assistant" for u, a in pairs)
            examples = [(u[1], a[1]) for u, a in pairs]
            assert len(examples) == len(set(examples))
            assert examples[-1] == ("another query", "1. join()")
            singles = [weaver.singles[n] for n in tools if n in weaver.singles]
            assert all(example in examples for example in singles)


def test_round_trips_through_json(weavers: dict[Key, PromptWeaver]) -> None:
    for weaver in weavers.values():
        again = PromptWeaver.from_dict(json.loads(json.dumps(weaver.to_dict())))
        assert again == weaver
        assert again.static_messages() == weaver.static_messages()
        assert again.messages("q", ["cd", "ls"]) == weaver.messages("q", ["cd", "ls"])
    with pytest.raises(ValueError):
        PromptWeaver.from_dict({"format": "other"})
