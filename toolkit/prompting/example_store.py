"""ToolRAG's example store: tool-use examples, ranked by similarity to the query.

`ExampleStore.top_k` ranks by cosine similarity of query embeddings only the examples
whose tools are all among the selected ones.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolweave.prompting.embedding import Embedder
from toolweave.prompting.toolrag_files import (
    FORMAT,
    check_format,
    embedder_entry,
    file_embedder,
    read_file,
    write_file,
)
from toolweave.prompting.training import LabeledRequest, default_embedder, training_corpus

__all__ = ["DEFAULT_K", "ExampleMatch", "ExampleStore", "ToolExample"]

#: The default number of examples retrieved (TinyAgent's setting, docs/toolrag.md).
DEFAULT_K = 3


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
            "format": FORMAT,
            "kind": "example-store",
            "embedder": embedder_entry(self.embedder),
            "examples": [
                {"id": e.id, "query": e.query, "plan": e.plan, "tools": sorted(e.tools)}
                for e in self.examples
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], embedder: Embedder | None = None) -> ExampleStore:
        """Rebuild from `to_dict`; ``embedder`` replaces the stored one (needed if none)."""
        check_format(data, "example-store")
        examples = [
            ToolExample(
                query=item["query"],
                plan=item["plan"],
                tools=frozenset(item["tools"]),
                id=item["id"],
            )
            for item in data["examples"]
        ]
        return cls(examples, file_embedder(data, embedder))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write `to_dict` as JSON, atomically."""
        write_file(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike[str], embedder: Embedder | None = None) -> ExampleStore:
        """Read a file written by `save` (one-line ValueError if it is damaged)."""
        return cls.from_dict(read_file(path, "example-store"), embedder)
