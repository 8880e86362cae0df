"""ToolRAG (TinyAgent): pick the tools a query needs, then the examples that use only them.

Two parts, both trained on the training split of the workload:

- `ToolSelector` (`toolweave.prompting.tool_selector`): a multi-label classifier giving
  P(tool | query) for every tool; it keeps the tools with probability >= tau.
- `ExampleStore` (`toolweave.prompting.example_store`): (query, plan, tools, embedding)
  entries; `top_k` ranks by cosine similarity the examples whose tools are all among
  the selected ones.

`ToolRAG` chains the two. Measured justification of the defaults: ``docs/toolrag.md``;
the measures themselves are in `toolweave.eval.toolrag_scoring`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from toolweave.prompting.embedding import Embedder
from toolweave.prompting.example_store import DEFAULT_K, ExampleMatch, ExampleStore
from toolweave.prompting.tool_selector import DEFAULT_TAU, ToolSelector, threshold
from toolweave.prompting.training import LabeledRequest, default_embedder, training_corpus

__all__ = ["ToolRAG", "ToolRAGResult"]


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
        tools = threshold(probabilities, self.tau)
        examples = self.store.top_k(query, tools, self.k)
        return ToolRAGResult(tuple(tools), probabilities, tuple(examples))
