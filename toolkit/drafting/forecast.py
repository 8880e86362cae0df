"""Forecasting the calls a response will hold (SchemaFill), the pure part.

SchemaFill prepares later parts of a multi-call response before the serial decoder gets
there: it ranks the tools likely to be called with BM25 over the request and the tools'
public metadata, drafts text for those positions, and lets the target model verify the
drafts under the real prefix (only verified tokens are committed, so the output stays
the serial greedy one). This module holds the two decisions that need no model:

- `ToolRanking`: BM25 (`bm25s`) over each tool's name, description and argument names
  and descriptions, scored against the request text;
- `CallForecast.candidates`: which tool the next call most likely names. The tool of the
  previous call comes first (a parallel response mostly repeats one tool with other
  values), then the others in BM25 order;
- `continuation`: the drafter for argument values. SchemaFill drafts values with a
  learned head (EAGLE-3); with none here, and with a second sequence costing x1.7 of a
  serial step on this CPU (`toolweave.native.calibration`), the drafter is a lookup: the
  longest recent stretch of the response found in the request (or in the calls already
  written) continues as it does there. Values copied from the request are the common case.

The drafting and verification against the engine live in `toolweave.native.decode.response`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from toolweave.toolspec import ToolCall, ToolSpec

if TYPE_CHECKING:
    import bm25s

__all__ = ["CallForecast", "ToolRanking", "continuation", "tool_document"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^0-9A-Za-z]+")


def _words(name: str) -> str:
    """`get_currentWeather.v2` -> "get current Weather v2": identifiers as words."""
    return _NON_WORD.sub(" ", _CAMEL.sub(" ", name)).strip()


def tool_document(spec: ToolSpec) -> str:
    """The text BM25 indexes for a tool: its name as words, description, and each
    argument's name and description."""
    parts = [_words(spec.name), spec.description or ""]
    properties = spec.parameters.get("properties", {})
    if isinstance(properties, Mapping):
        for key, schema in properties.items():
            parts.append(_words(str(key)))
            if isinstance(schema, Mapping) and isinstance(schema.get("description"), str):
                parts.append(schema["description"])
    return " ".join(p for p in parts if p)


class ToolRanking:
    """BM25 over a fixed tool list; `rank(request)` orders the tool names by score.

    Ties (and a request sharing no word with any tool) keep the catalogue order, so the
    ranking is deterministic.
    """

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.names = tuple(t.name for t in tools)
        self._index: bm25s.BM25 | None = None
        # Imported here: with scipy, bm25s is ~0.3 s of a process start otherwise.
        import bm25s

        docs = [tool_document(t) for t in tools]
        corpus = bm25s.tokenize(docs, stopwords="en", show_progress=False)
        if any(len(ids) for ids in corpus.ids):
            index = bm25s.BM25()
            index.index(corpus, show_progress=False)
            self._index = index
            self._vocab = set(corpus.vocab)

    def scores(self, request: str) -> list[float]:
        """The BM25 score of each tool (catalogue order) for `request`."""
        if self._index is None:
            return [0.0] * len(self.names)
        import bm25s

        words = bm25s.tokenize([request], stopwords="en", return_ids=False, show_progress=False)
        query = [w for w in words[0] if w in self._vocab]
        if not query:
            return [0.0] * len(self.names)
        return [float(s) for s in np.asarray(self._index.get_scores(query))]

    def rank(self, request: str) -> list[str]:
        scores = self.scores(request)
        order = sorted(range(len(self.names)), key=lambda i: (-scores[i], i))
        return [self.names[i] for i in order]


@dataclass(frozen=True)
class CallForecast:
    """The tools a response is expected to call, best first, for one request."""

    ranking: tuple[str, ...]

    @classmethod
    def for_request(cls, ranking: ToolRanking, request: str) -> CallForecast:
        return cls(tuple(ranking.rank(request)))

    def candidates(self, previous: Sequence[ToolCall]) -> list[str]:
        """Tool names for the next call: the previous call's tool first, then by rank."""
        first = [previous[-1].name] if previous and previous[-1].name in self.ranking else []
        return first + [name for name in self.ranking if name not in first]


def continuation(
    sources: Sequence[str],
    context: str,
    *,
    min_match: int = 3,
    max_match: int = 24,
    max_chars: int = 48,
) -> str:
    """What followed the longest suffix of `context` (at least `min_match` characters)
    the last time it appeared in one of `sources` (searched in order): up to `max_chars`
    characters, or "" when no suffix of that length appears anywhere."""
    for length in range(min(max_match, len(context)), min_match - 1, -1):
        suffix = context[-length:]
        for source in sources:
            at = source.rfind(suffix)
            if at >= 0 and at + length < len(source):
                return source[at + length : at + length + max_chars]
    return ""
