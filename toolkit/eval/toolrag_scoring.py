"""How well ToolRAG selects tools and retrieves examples, against the tools plans used.

The measures behind the defaults in ``docs/toolrag.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolweave.prompting.example_store import ExampleStore
from toolweave.prompting.tool_selector import DEFAULT_TAU, ToolSelector, threshold
from toolweave.prompting.training import LabeledRequest

__all__ = [
    "RetrievalScore",
    "SelectionScore",
    "retrieval_score",
    "score_selection",
    "selection_scores",
]


@dataclass(frozen=True)
class SelectionScore:
    """Tool selection against the tools each plan used, micro-averaged over requests.

    ``full_recall`` is the share of requests whose used tools were all selected.
    """

    recall: float
    precision: float
    full_recall: float
    mean_selected: float


@dataclass(frozen=True)
class RetrievalScore:
    """Retrieved examples against the tools each plan used, averaged over requests.

    ``jaccard``: mean Jaccard similarity of each example's tools with the used tools
    (0 for a request that got no example);
    ``coverage``: share of used tools found in the union of the K examples' tools;
    ``exact``: share of requests with an example using exactly the used tools;
    ``returned``: mean number of examples returned (the tool filter may leave < K).
    """

    jaccard: float
    coverage: float
    exact: float
    returned: float


def score_selection(
    selections: Sequence[Iterable[str]], requests: Sequence[LabeledRequest]
) -> SelectionScore:
    """Score one tool list per request."""
    hits = used_total = selected_total = complete = 0
    for chosen, request in zip(selections, requests, strict=True):
        picked, used = set(chosen), set(request.tools_used)
        hits += len(picked & used)
        used_total += len(used)
        selected_total += len(picked)
        complete += used <= picked
    count = max(len(requests), 1)
    return SelectionScore(
        recall=hits / max(used_total, 1),
        precision=hits / max(selected_total, 1),
        full_recall=complete / count,
        mean_selected=selected_total / count,
    )


def selection_scores(
    selector: ToolSelector, requests: Sequence[LabeledRequest], taus: Sequence[float]
) -> dict[float, SelectionScore]:
    """`score_selection` of ``selector.select`` over each request's catalogue, per tau."""
    probabilities = [
        selector.predict_proba(r.request_text, [t.name for t in r.tools]) for r in requests
    ]
    return {
        tau: score_selection([threshold(p, tau) for p in probabilities], requests) for tau in taus
    }


def retrieval_score(
    store: ExampleStore,
    requests: Sequence[LabeledRequest],
    k: int,
    selector: ToolSelector | None = None,
    tau: float = DEFAULT_TAU,
) -> RetrievalScore:
    """Score `ExampleStore.top_k` for each request, among examples using only the tools
    ``selector`` picks at ``tau`` (without a selector: the request's whole catalogue)."""
    jaccard = coverage = exact = returned = 0.0
    for request in requests:
        catalogue = [t.name for t in request.tools]
        allowed = (
            catalogue if selector is None else selector.select(request.request_text, tau, catalogue)
        )
        matches = store.top_k(request.request_text, allowed, k)
        used = frozenset(request.tools_used)
        found = [m.example.tools for m in matches]
        if found:
            jaccard += sum(len(t & used) / len(t | used) for t in found) / len(found)
        coverage += len(used & frozenset().union(*found)) / len(used)
        exact += any(t == used for t in found)
        returned += len(found)
    count = max(len(requests), 1)
    return RetrievalScore(jaccard / count, coverage / count, exact / count, returned / count)
