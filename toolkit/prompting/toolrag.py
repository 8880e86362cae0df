"""ToolRAG (TinyAgent): pick the tools a query needs, then the examples that use only them.

Two parts, both trained on the training split of the workload:

- `ToolSelector`: a multi-label classifier giving P(tool | query) for every tool, one
  L2-regularised logistic regression per tool over the query's embedding (one-vs-rest,
  plain numpy). A tool's regression only sees the training queries whose catalogue
  offered that tool, and at run time only the tools of the current catalogue are
  scored. `select` keeps the tools with probability >= tau, and at least the best one.
- `ExampleStore`: (query, plan, tools, embedding) entries; `top_k` ranks by cosine
  similarity the examples whose tools are all among the selected ones.

`ToolRAG` chains the two. Measured justification of the defaults: ``docs/toolrag.md``.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from toolweave.prompting.embedding import (
    Embedder,
    HashedTfidf,
    SerializableEmbedder,
    embedder_from_dict,
)
from toolweave.toolspec import ToolSpec

__all__ = [
    "DEFAULT_K",
    "DEFAULT_TAU",
    "ExampleMatch",
    "ExampleStore",
    "LabeledRequest",
    "RetrievalScore",
    "SelectionScore",
    "ToolExample",
    "ToolRAG",
    "ToolRAGResult",
    "ToolSelector",
    "default_embedder",
    "retrieval_score",
    "score_selection",
    "selection_scores",
    "tool_text",
    "training_corpus",
]

DEFAULT_TAU = 0.1
DEFAULT_K = 3
_FORMAT = "toolweave-toolrag-v1"


class LabeledRequest(Protocol):
    """A training request: its text, the tools its plan used, the catalogue it offered.

    `toolweave.eval.workload.PlanRequest` is one. ``request_text`` is what ToolRAG reads
    (the query, with any earlier user turns still waiting for calls); ``plan_text`` and
    ``id`` are what `ExampleStore` keeps.
    """

    @property
    def id(self) -> str: ...

    @property
    def request_text(self) -> str: ...

    @property
    def plan_text(self) -> str: ...

    @property
    def tools_used(self) -> Sequence[str]: ...

    @property
    def tools(self) -> Sequence[ToolSpec]: ...


def tool_text(spec: ToolSpec) -> str:
    """A tool as text: its name in words, its description, its arguments' descriptions."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", spec.name).replace("_", " ")
    properties: Mapping[str, Any] = spec.parameters.get("properties", {})
    arguments = [
        f"{key.replace('_', ' ')}: {schema.get('description', '')}"
        for key, schema in properties.items()
        if isinstance(schema, Mapping)
    ]
    return "\n".join([name, spec.description, *arguments])


def default_embedder(corpus: Iterable[str]) -> HashedTfidf:
    """The measured default: hashed TF-IDF over words 1-2 and characters 3-5, fitted."""
    return HashedTfidf().fit(corpus)


def training_corpus(requests: Iterable[LabeledRequest]) -> list[str]:
    """The texts an embedder's statistics come from: request texts, then `tool_text` of
    every tool offered."""
    items = list(requests)
    specs = {spec.name: spec for item in items for spec in item.tools}
    return [item.request_text for item in items] + [tool_text(specs[n]) for n in sorted(specs)]


class ToolSelector:
    """P(tool | query) per tool from one-vs-rest logistic regressions; see the module doc.

    Build with `fit` or `load`. ``weights`` is ``dim x tools``, ``bias`` one per tool.
    """

    def __init__(
        self,
        embedder: Embedder,
        tools: Sequence[str],
        weights: np.ndarray,
        bias: np.ndarray,
    ) -> None:
        if weights.shape[1] != len(tools) or bias.shape != (len(tools),):
            raise ValueError("weights and bias need one column per tool")
        self.embedder = embedder
        self.tools = tuple(tools)
        self.weights = weights.astype(np.float32)
        self.bias = bias.astype(np.float32)
        self._column = {name: i for i, name in enumerate(self.tools)}

    @classmethod
    def fit(
        cls,
        requests: Iterable[LabeledRequest],
        embedder: Embedder | None = None,
        *,
        l2: float = 1e-4,
        iterations: int = 200,
        description_weight: float = 3.0,
    ) -> ToolSelector:
        """Train on ``requests``; without ``embedder``, `default_embedder` on `training_corpus`.

        Besides the queries, each tool's `tool_text` is a training text labelled with
        that tool alone, offered with the tools it shares a catalogue with, weighing
        ``description_weight`` queries (0 leaves them out): it lets a tool that training
        queries rarely use still match the words of its description. Each tool's loss is
        the weighted mean log loss over the texts that offered it, plus ``l2/2 |w|^2``,
        solved by ``iterations`` steps of accelerated gradient descent in the span of the
        training embeddings (200 steps stop a little short of the optimum, which the
        held-out measures in docs/toolrag.md do not penalise).
        """
        items = list(requests)
        if not items:
            raise ValueError("cannot fit a tool selector on no requests")
        specs = {spec.name: spec for item in items for spec in item.tools}
        tools = sorted(specs)
        column = {name: i for i, name in enumerate(tools)}
        texts = [item.request_text for item in items]
        offers = [[column[spec.name] for spec in item.tools] for item in items]
        uses = [[column[name] for name in item.tools_used if name in column] for item in items]
        sample_weights = [1.0] * len(items)
        if description_weight > 0:
            neighbours: dict[str, set[int]] = {name: set() for name in tools}
            for offer in offers:
                for index in offer:
                    neighbours[tools[index]].update(offer)
            for name in tools:
                texts.append(tool_text(specs[name]))
                offers.append(sorted(neighbours[name]))
                uses.append([column[name]])
                sample_weights.append(description_weight)
        model = embedder if embedder is not None else default_embedder(training_corpus(items))
        labels = np.zeros((len(texts), len(tools)))
        offered = np.zeros_like(labels)
        for row, (offer, used) in enumerate(zip(offers, uses, strict=True)):
            offered[row, offer] = sample_weights[row]
            labels[row, used] = 1
        features = model.embed(texts).astype(np.float64)
        weights, bias = _fit_logistic(features, labels, offered, l2, iterations)
        return cls(model, tools, weights, bias)

    def predict_proba(
        self, query: str, candidates: Iterable[str] | None = None
    ) -> dict[str, float]:
        """P(tool | query) for each candidate (default: every known tool), highest first.

        A candidate the selector never saw in training gets 0.
        """
        return self.predict_proba_many([query], candidates)[0]

    def predict_proba_many(
        self, queries: Sequence[str], candidates: Iterable[str] | None = None
    ) -> list[dict[str, float]]:
        """`predict_proba` for several queries in one matrix product."""
        names = self.tools if candidates is None else tuple(dict.fromkeys(candidates))
        known = [name for name in names if name in self._column]
        columns = [self._column[name] for name in known]
        logits = self.embedder.embed(queries) @ self.weights[:, columns] + self.bias[columns]
        probabilities = _sigmoid(logits.astype(np.float64))
        out = []
        for row in probabilities:
            scores = dict(zip(known, row.tolist(), strict=True))
            scores.update((name, 0.0) for name in names if name not in self._column)
            out.append(dict(sorted(scores.items(), key=lambda item: -item[1])))
        return out

    def select(
        self, query: str, tau: float = DEFAULT_TAU, candidates: Iterable[str] | None = None
    ) -> list[str]:
        """The candidates with P >= ``tau``, most probable first; at least the top one."""
        return _threshold(self.predict_proba(query, candidates), tau)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; the embedder must be a `SerializableEmbedder`."""
        return {
            "format": _FORMAT,
            "kind": "tool-selector",
            "embedder": _embedder_dict(self.embedder),
            "tools": list(self.tools),
            "weights": _encode(self.weights),
            "bias": self.bias.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], embedder: Embedder | None = None) -> ToolSelector:
        """Rebuild from `to_dict`; ``embedder`` replaces the stored one (needed if none)."""
        _check_format(data, "tool-selector")
        tools = [str(name) for name in data["tools"]]
        weights = _decode(data["weights"])
        bias = np.asarray(data["bias"], dtype=np.float32)
        return cls(_embedder_of(data, embedder), tools, weights, bias)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write `to_dict` as JSON."""
        Path(path).write_text(json.dumps(self.to_dict()), encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str], embedder: Embedder | None = None) -> ToolSelector:
        """Read a file written by `save`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")), embedder)


@dataclass(frozen=True)
class ToolExample:
    """One tool-use example: a query, its plan text and the tools the plan uses."""

    query: str
    plan: str
    tools: frozenset[str]
    id: str = ""


@dataclass(frozen=True)
class ExampleMatch:
    """A retrieved example and its cosine similarity to the query."""

    example: ToolExample
    similarity: float


class ExampleStore:
    """Tool-use examples with their query embeddings, searched by cosine similarity."""

    def __init__(self, examples: Sequence[ToolExample], embedder: Embedder) -> None:
        self.examples = tuple(examples)
        self.embedder = embedder
        self.embeddings = embedder.embed([example.query for example in self.examples])

    @classmethod
    def from_requests(
        cls, requests: Iterable[LabeledRequest], embedder: Embedder | None = None
    ) -> ExampleStore:
        """One example per request: its ``request_text``, plan text and tools used;
        without ``embedder``, `default_embedder` on `training_corpus`."""
        items = list(requests)
        examples = [
            ToolExample(
                query=item.request_text,
                plan=item.plan_text,
                tools=frozenset(item.tools_used),
                id=item.id,
            )
            for item in items
        ]
        return cls(examples, embedder or default_embedder(training_corpus(items)))

    def top_k(
        self, query: str, selected_tools: Iterable[str], k: int = DEFAULT_K
    ) -> list[ExampleMatch]:
        """The ``k`` most similar examples whose tools are all in ``selected_tools``.

        Fewer when fewer qualify; ties keep the store's order.
        """
        selected = frozenset(selected_tools)
        allowed = [i for i, example in enumerate(self.examples) if example.tools <= selected]
        if not allowed or k <= 0:
            return []
        similarities = self.embeddings[allowed] @ self.embedder.embed([query])[0]
        order = np.argsort(-similarities, kind="stable")[:k]
        return [
            ExampleMatch(self.examples[allowed[i]], float(similarities[i])) for i in order.tolist()
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (embeddings are recomputed on load)."""
        return {
            "format": _FORMAT,
            "kind": "example-store",
            "embedder": _embedder_dict(self.embedder),
            "examples": [
                {"id": e.id, "query": e.query, "plan": e.plan, "tools": sorted(e.tools)}
                for e in self.examples
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], embedder: Embedder | None = None) -> ExampleStore:
        """Rebuild from `to_dict`; ``embedder`` replaces the stored one (needed if none)."""
        _check_format(data, "example-store")
        examples = [
            ToolExample(
                query=item["query"],
                plan=item["plan"],
                tools=frozenset(item["tools"]),
                id=item["id"],
            )
            for item in data["examples"]
        ]
        return cls(examples, _embedder_of(data, embedder))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write `to_dict` as JSON."""
        Path(path).write_text(json.dumps(self.to_dict()), encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str], embedder: Embedder | None = None) -> ExampleStore:
        """Read a file written by `save`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")), embedder)


@dataclass(frozen=True)
class ToolRAGResult:
    """The selected tools (most probable first), every candidate's P, the examples."""

    tools: tuple[str, ...]
    probabilities: Mapping[str, float]
    examples: tuple[ExampleMatch, ...]


@dataclass(frozen=True)
class ToolRAG:
    """Tool selection then example retrieval, with the threshold and K fixed."""

    selector: ToolSelector
    store: ExampleStore
    tau: float = DEFAULT_TAU
    k: int = DEFAULT_K

    @classmethod
    def fit(
        cls,
        requests: Iterable[LabeledRequest],
        embedder: Embedder | None = None,
        *,
        tau: float = DEFAULT_TAU,
        k: int = DEFAULT_K,
    ) -> ToolRAG:
        """Train the selector and fill the store from the same requests and embedder."""
        items = list(requests)
        model = embedder or default_embedder(training_corpus(items))
        return cls(ToolSelector.fit(items, model), ExampleStore.from_requests(items, model), tau, k)

    def retrieve(self, query: str, candidates: Iterable[str] | None = None) -> ToolRAGResult:
        """Select tools among ``candidates`` (default: all known), then the top-K examples."""
        probabilities = self.selector.predict_proba(query, candidates)
        tools = _threshold(probabilities, self.tau)
        examples = self.store.top_k(query, tools, self.k)
        return ToolRAGResult(tuple(tools), probabilities, tuple(examples))


def _threshold(probabilities: Mapping[str, float], tau: float) -> list[str]:
    ranked = sorted(probabilities, key=lambda name: -probabilities[name])
    chosen = [name for name in ranked if probabilities[name] >= tau]
    return chosen or ranked[:1]


def _fit_logistic(
    features: np.ndarray, labels: np.ndarray, offered: np.ndarray, l2: float, iterations: int
) -> tuple[np.ndarray, np.ndarray]:
    """Masked one-vs-rest logistic regression, in dual coordinates (W = X^T A).

    ``offered[i, t]`` weighs text i in tool t's loss (0: the tool was not offered).

    A gradient step on W, ``W -= eta (X^T G + l2 W)``, is the step ``A -= eta (G + l2 A)``
    on the n x tools matrix A, so each iteration costs one n x n product instead of a
    dim-wide one. The bias is a constant feature of value 1, folded into the kernel.
    """
    kernel = features @ features.T + 1.0
    per_tool = np.maximum(offered.sum(axis=0), 1.0)
    # Lipschitz constant of each tool's gradient: lambda_max(K) max_i w_it / (4 sum_i w_it) + l2.
    top = float(np.linalg.eigvalsh(kernel)[-1])
    step = 1.0 / (top * offered.max(axis=0) / (4.0 * per_tool) + l2)
    dual = np.zeros_like(labels)
    previous = dual
    for t in range(1, iterations + 1):
        # Nesterov momentum on the dual iterate.
        look = dual + (t - 2) / (t + 1) * (dual - previous) if t > 1 else dual
        logits = kernel @ look
        gradient = offered * (_sigmoid(logits) - labels) / per_tool
        previous, dual = dual, look - step * (gradient + l2 * look)
    weights = features.T @ dual
    bias = dual.sum(axis=0)
    return weights, bias


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # The tanh form never overflows, unlike 1 / (1 + exp(-x)) for very negative x.
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _embedder_dict(embedder: Embedder) -> dict[str, Any] | None:
    return embedder.to_dict() if isinstance(embedder, SerializableEmbedder) else None


def _embedder_of(data: Mapping[str, Any], embedder: Embedder | None) -> Embedder:
    if embedder is not None:
        return embedder
    stored = data.get("embedder")
    if stored is None:
        raise ValueError("the file holds no embedder (it was a custom one): pass embedder=")
    return embedder_from_dict(stored)


def _check_format(data: Mapping[str, Any], kind: str) -> None:
    if data.get("format") != _FORMAT or data.get("kind") != kind:
        raise ValueError(f"not a {kind} file of format {_FORMAT}")


def _encode(matrix: np.ndarray) -> dict[str, Any]:
    """A float32 matrix as base64 of its little-endian bytes: 4x smaller than a list."""
    data = np.ascontiguousarray(matrix, dtype="<f4")
    return {"shape": list(data.shape), "float32": base64.b64encode(data.tobytes()).decode()}


def _decode(data: Mapping[str, Any]) -> np.ndarray:
    raw = base64.b64decode(data["float32"])
    return np.frombuffer(raw, dtype="<f4").reshape(data["shape"]).astype(np.float32)


# --- Measures (docs/toolrag.md) -------------------------------------------------------


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
        tau: score_selection([_threshold(p, tau) for p in probabilities], requests) for tau in taus
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
