"""What ToolRAG and PromptWeaver learn from: labelled requests, tools as text, the corpus.

The default embedder is fitted on `training_corpus`: the request texts, then the text of
every tool offered (the tool selector trains on tool texts too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from toolweave.prompting.embedding import HashedTfidf
from toolweave.toolspec import ToolSpec

__all__ = ["LabeledRequest", "default_embedder", "tool_text", "training_corpus"]


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
