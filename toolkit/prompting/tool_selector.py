"""ToolRAG's tool classifier: P(tool | query) for every tool of the catalogue.

One L2-regularised logistic regression per tool over the query's embedding (one-vs-rest,
plain numpy). A tool's regression only sees the training queries whose catalogue offered
that tool, and at run time only the tools of the current catalogue are scored. `select`
keeps the tools with probability >= tau, and at least the best one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from toolweave.prompting.embedding import Embedder
from toolweave.prompting.toolrag_files import (
    FORMAT,
    check_format,
    decode_matrix,
    embedder_entry,
    encode_matrix,
    file_embedder,
    read_file,
    write_file,
)
from toolweave.prompting.training import (
    LabeledRequest,
    default_embedder,
    tool_text,
    training_corpus,
)

__all__ = ["DEFAULT_TAU", "ToolSelector", "threshold"]

#: The default probability a tool needs to be selected (docs/toolrag.md).
DEFAULT_TAU = 0.1


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
        return threshold(self.predict_proba(query, candidates), tau)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; the embedder must be a `SerializableEmbedder`."""
        return {
            "format": FORMAT,
            "kind": "tool-selector",
            "embedder": embedder_entry(self.embedder),
            "tools": list(self.tools),
            "weights": encode_matrix(self.weights),
            "bias": self.bias.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], embedder: Embedder | None = None) -> ToolSelector:
        """Rebuild from `to_dict`; ``embedder`` replaces the stored one (needed if none)."""
        check_format(data, "tool-selector")
        tools = [str(name) for name in data["tools"]]
        weights = decode_matrix(data["weights"])
        bias = np.asarray(data["bias"], dtype=np.float32)
        return cls(file_embedder(data, embedder), tools, weights, bias)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write `to_dict` as JSON, atomically."""
        write_file(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike[str], embedder: Embedder | None = None) -> ToolSelector:
        """Read a file written by `save` (one-line ValueError if it is damaged)."""
        return cls.from_dict(read_file(path, "tool-selector"), embedder)


def threshold(probabilities: Mapping[str, float], tau: float) -> list[str]:
    """The tools with P >= ``tau``, most probable first; at least the most probable one."""
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
