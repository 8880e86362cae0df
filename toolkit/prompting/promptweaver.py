"""PromptWeaver (Agent-X): a Planner prompt whose prefix can be cached and reused.

The prompt of a request is, in order: (1) one static system message with the Planner's
rules and *every* tool of the catalogue (byte-identical for all requests of that
catalogue), (2) one example per *activated* cluster of co-activated tools, clusters in
a fixed order, (3) single-tool examples of the selected tools, (4) ToolRAG's dynamic
examples, (5) the query. (2) and (3) are a sequence of example blocks fixed by the
selected tools (`PromptWeaver.layout`); (1) followed by a leading run of those blocks is
a prefix whose KV state `toolweave.native` stores, and `select_combinations`
(`toolweave.prompting.combinations`) picks which block sequences to store. The paper
stores cluster combinations only; storing the single-tool blocks that follow them as
well matters here, since on a CPU the uncached tail attends over the whole long prefix
(about 3.2 ms a token at 2,000 tokens of context against 2.1 at 500 for SmolLM2) and
the single-tool examples were most of that tail.

Offline, per catalogue (`PromptWeaver.fit`), from the training requests:

- Clustering (`toolweave.prompting.clusters`): only tools used by some training plan
  are clustered. The co-activation matrix (pairs of tools in one plan, diagonal = uses)
  is factorised by NMF with ``k = max(1, round(used / 3))`` components unless given
  (lowest error of 8 seeded starts ``seed .. seed+7``: multiplicative updates often
  stop in a local minimum that splits a block of always-together tools), and each tool
  joins the component of the largest entry in its factor row; empty components vanish.
  The paper's 16 tools gave 8 clusters of 2-6 tools; our catalogues use 6-16 tools in
  6-82 training plans, most plans use 1-2 tools, and one cluster per 3 used tools keeps
  a request's prompt to one or two cluster examples while leaving clusters that still
  match whole training plans.
- Cluster example: the shortest (characters of query + plan, a token proxy: every
  example is prefilled and cached) training request whose set of used tools equals
  the cluster. Without one, the request with the best Jaccard overlap among those
  whose tools all lie in the cluster (then the shortest); the cluster keeps all its
  tools for activation and records the subset in ``example_tools``, since shrinking
  it would leave tools that activate nothing. A cluster with no such request is
  dropped; its tools activate no cluster and rely on their single-tool examples.
- Order: a cluster's theme is the most frequent theme of its tools (ties: the one
  first in the catalogue). Themes come in descending order of the number of training
  requests activating one of their clusters, and within a theme clusters in descending
  training frequency (ties: catalogue position). Grouping keeps co-activated clusters
  adjacent (the paper's point); putting frequent ones first makes many requests share
  their leading clusters, which is what a prefix store can reuse.
- Single-tool examples: per used tool, the shortest training request using only that
  tool; else the shortest using it and one other tool (as the paper does); else the
  one using it with the fewest tools. They are shown in descending training frequency
  of their tool (ties: catalogue position), so that requests share leading blocks.

`fit_weavers` fits every catalogue of the workload; `training_sequences` gives the
block sequences `select_combinations` reads (a block is a cluster id or a single-tool
example's tool name), for the tools the run-time selection (ToolRAG) picks on each
training request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from toolweave.plan.prompts import planner_messages
from toolweave.prompting.clusters import tool_clusters
from toolweave.prompting.training import LabeledRequest
from toolweave.toolspec import ToolSpec

__all__ = [
    "TOOLS_PER_CLUSTER",
    "Block",
    "Cluster",
    "PromptWeaver",
    "ThemedRequest",
    "fit_weavers",
    "training_sequences",
]

#: Default number of used tools per cluster (k = round(used tools / this)).
TOOLS_PER_CLUSTER = 3
_FORMAT = "toolweave-promptweaver-v1"

#: An example block of the prompt: a cluster id, or the tool name of a single-tool example.
Block = int | str
Example = tuple[str, str]


class ThemedRequest(LabeledRequest, Protocol):
    """A `LabeledRequest` that names its catalogue (`toolweave.eval.workload.PlanRequest`)."""

    @property
    def theme(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Cluster:
    """Co-activated tools (catalogue order), their theme and their cached example.

    ``example_tools`` are the tools the example's plan uses: ``tools`` itself, or a
    subset when no training plan used exactly ``tools`` (see the module doc).
    """

    tools: tuple[str, ...]
    theme: str
    example: Example
    example_tools: tuple[str, ...] = ()
    example_id: str = ""


@dataclass(frozen=True)
class PromptWeaver:
    """The prompt layout of one catalogue; build it with `fit` or `from_dict`."""

    catalogue: tuple[ToolSpec, ...]
    clusters: tuple[Cluster, ...]
    singles: Mapping[str, Example] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [spec.name for spec in self.catalogue]
        known = set(names)
        if len(known) != len(names):
            raise ValueError("tool names repeat in the catalogue")
        clustered = [name for cluster in self.clusters for name in cluster.tools]
        if len(set(clustered)) != len(clustered):
            raise ValueError("a tool sits in more than one cluster")
        if unknown := (set(clustered) | set(self.singles)) - known:
            raise ValueError(f"tools not in the catalogue: {sorted(unknown)}")

    @classmethod
    def fit(
        cls,
        catalogue: Sequence[ToolSpec],
        requests: Sequence[LabeledRequest],
        *,
        themes: Mapping[str, str],
        n_clusters: int | None = None,
        seed: int = 0,
    ) -> PromptWeaver:
        """Cluster, order and pick examples from ``requests`` (see the module doc).

        ``themes`` maps a tool name to its theme (unknown tools share the theme "").
        Raises ValueError if a request used a tool outside ``catalogue``.
        """
        position = {spec.name: i for i, spec in enumerate(catalogue)}
        for request in requests:
            if outside := set(request.tools_used) - set(position):
                raise ValueError(
                    f"request {request.id} uses tools {sorted(outside)} outside the catalogue"
                )
        if n_clusters is not None and n_clusters < 1:
            raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
        used = sorted({t for r in requests for t in r.tools_used}, key=position.__getitem__)
        k = n_clusters or max(1, round(len(used) / TOOLS_PER_CLUSTER))
        groups = tool_clusters([r.tools_used for r in requests], used, k, seed)
        clusters = [
            cluster
            for group in groups
            if (cluster := _with_example(group, requests, themes, position))
        ]
        ordered = _theme_order(clusters, requests, position)
        uses = Counter(t for r in requests for t in set(r.tools_used))
        by_use = sorted(used, key=lambda name: (-uses[name], position[name]))
        singles = {name: ex for name in by_use if (ex := _single_example(name, requests))}
        return cls(tuple(catalogue), tuple(ordered), singles)

    @cached_property
    def _cluster_of(self) -> dict[str, int]:
        return {name: i for i, cluster in enumerate(self.clusters) for name in cluster.tools}

    @cached_property
    def _system(self) -> tuple[str, str]:
        # The Planner's own layout with an empty query: its first message is the system.
        return planner_messages(self.catalogue, "")[0]

    @property
    def unclustered(self) -> tuple[str, ...]:
        """Catalogue tools in no cluster (unused in training, or their cluster dropped)."""
        return tuple(s.name for s in self.catalogue if s.name not in self._cluster_of)

    def activated(self, tools: Iterable[str]) -> tuple[int, ...]:
        """Ids of the clusters holding at least one of ``tools``, in the fixed order."""
        return tuple(sorted({self._cluster_of[t] for t in tools if t in self._cluster_of}))

    def static_messages(self) -> list[tuple[str, str]]:
        """``[("system", rules + every catalogue tool)]``, the same for every request."""
        return [self._system]

    def layout(self, tools: Iterable[str]) -> tuple[Block, ...]:
        """The example blocks shown for the selected ``tools``: the activated clusters in
        the fixed order, then the single-tool examples of the selected tools in the
        singles' order, skipping an example already shown."""
        selected = set(tools)
        clusters = self.activated(selected)
        shown = {self.clusters[c].example for c in clusters}
        singles: list[str] = []
        for name, example in self.singles.items():
            if name in selected and example not in shown:
                shown.add(example)
                singles.append(name)
        return (*clusters, *singles)

    def example(self, block: Block) -> Example:
        """The (query, plan) example of a block; KeyError/IndexError for an unknown one."""
        return self.singles[block] if isinstance(block, str) else self.clusters[block].example

    def prefix_messages(self, blocks: Sequence[Block]) -> list[tuple[str, str]]:
        """The static message, then each block's example as a user/assistant pair."""
        return _with_examples(self.static_messages(), [self.example(b) for b in blocks])

    def messages(
        self,
        query: str,
        tools: Iterable[str],
        dynamic: Sequence[Example] = (),
        *,
        previous: Sequence[tuple[str, str]] = (),
    ) -> list[tuple[str, str]]:
        """The Planner's messages for ``query`` given the selected ``tools``.

        Static message, the examples of `layout` (activated clusters, single-tool
        examples), the ``dynamic`` (query, plan) examples, the query; an example already
        present is not repeated. ``previous`` holds the (plan, observations) of earlier
        rounds, written as `planner_messages` does.
        """
        shown = [self.example(b) for b in self.layout(tools)]
        for example in dynamic:
            if example not in shown:
                shown.append(example)
        last = planner_messages((), query, previous=previous)[-1]
        return [*_with_examples(self.static_messages(), shown), last]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` rebuilds an equal weaver."""
        return {
            "format": _FORMAT,
            "catalogue": [spec.to_dict() for spec in self.catalogue],
            "clusters": [
                {
                    "tools": list(c.tools),
                    "theme": c.theme,
                    "example": list(c.example),
                    "example_tools": list(c.example_tools),
                    "example_id": c.example_id,
                }
                for c in self.clusters
            ],
            "singles": {name: list(example) for name, example in self.singles.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PromptWeaver:
        """Rebuild from `to_dict`; ValueError for another format."""
        if data.get("format") != _FORMAT:
            raise ValueError(f"not a {_FORMAT} dict (format {data.get('format')!r})")
        clusters = tuple(
            Cluster(
                tools=tuple(c["tools"]),
                theme=c["theme"],
                example=(c["example"][0], c["example"][1]),
                example_tools=tuple(c["example_tools"]),
                example_id=c["example_id"],
            )
            for c in data["clusters"]
        )
        singles = {name: (ex[0], ex[1]) for name, ex in data["singles"].items()}
        catalogue = tuple(ToolSpec.from_dict(spec) for spec in data["catalogue"])
        return cls(catalogue, clusters, singles)


def fit_weavers(
    train_requests: Sequence[ThemedRequest],
    *,
    themes: Mapping[str, str],
    n_clusters: int | None = None,
    seed: int = 0,
) -> dict[tuple[str, ...], PromptWeaver]:
    """One `PromptWeaver` per catalogue key (``request.theme``), fitted on its requests.

    A key's catalogue is the union of the catalogues its requests were offered (a BFCL
    turn may hold tools back), kept in catalogue order.
    """
    by_key: dict[tuple[str, ...], list[ThemedRequest]] = {}
    for request in train_requests:
        by_key.setdefault(tuple(request.theme), []).append(request)
    return {
        key: PromptWeaver.fit(
            _union_catalogue(r.tools for r in items),
            items,
            themes=themes,
            n_clusters=n_clusters,
            seed=seed,
        )
        for key, items in by_key.items()
    }


def training_sequences(
    weavers: Mapping[tuple[str, ...], PromptWeaver],
    requests: Sequence[ThemedRequest],
    select: Callable[[ThemedRequest], Iterable[str]] | None = None,
) -> list[tuple[tuple[str, ...], tuple[Block, ...]]]:
    """(catalogue key, `PromptWeaver.layout` of the request's tools) per request.

    ``select`` gives the tools a request's prompt is laid out for: the run-time
    selection (ToolRAG's) when given, else the request's ground-truth tools.
    Raises KeyError for a request whose catalogue has no weaver.
    """
    out = []
    for request in requests:
        key = tuple(request.theme)
        if key not in weavers:
            raise KeyError(f"no PromptWeaver for catalogue {key} (request {request.id})")
        tools = request.tools_used if select is None else select(request)
        out.append((key, weavers[key].layout(tools)))
    return out


def _with_examples(
    head: list[tuple[str, str]], examples: Iterable[Example]
) -> list[tuple[str, str]]:
    out = list(head)
    for query, plan in examples:
        out += [("user", query), ("assistant", plan)]
    return out


def _size(request: LabeledRequest) -> int:
    return len(request.request_text) + len(request.plan_text)


def _with_example(
    tools: tuple[str, ...],
    requests: Sequence[LabeledRequest],
    themes: Mapping[str, str],
    position: Mapping[str, int],
) -> Cluster | None:
    members = set(tools)
    inside = [
        (i, r) for i, r in enumerate(requests) if r.tools_used and set(r.tools_used) <= members
    ]
    if not inside:
        return None
    # Subsets of the cluster: Jaccard = |used| / |cluster|, so the most tools wins.
    _, best = min(inside, key=lambda item: (-len(set(item[1].tools_used)), _size(item[1]), item[0]))
    counts = Counter(themes.get(name, "") for name in tools)
    theme = min(
        counts,
        key=lambda t: (-counts[t], min(position[n] for n in tools if themes.get(n, "") == t)),
    )
    return Cluster(
        tools=tools,
        theme=theme,
        example=(best.request_text, best.plan_text),
        example_tools=tuple(sorted(set(best.tools_used), key=position.__getitem__)),
        example_id=best.id,
    )


def _theme_order(
    clusters: Sequence[Cluster], requests: Sequence[LabeledRequest], position: Mapping[str, int]
) -> list[Cluster]:
    def frequency(group: Iterable[Cluster]) -> int:
        names = {name for cluster in group for name in cluster.tools}
        return sum(1 for r in requests if names & set(r.tools_used))

    def first(group: Iterable[Cluster]) -> int:
        return min(position[name] for cluster in group for name in cluster.tools)

    by_theme: dict[str, list[Cluster]] = {}
    for cluster in clusters:
        by_theme.setdefault(cluster.theme, []).append(cluster)
    ordered = []
    for theme in sorted(by_theme, key=lambda t: (-frequency(by_theme[t]), first(by_theme[t]))):
        ordered += sorted(by_theme[theme], key=lambda c: (-frequency([c]), first([c])))
    return ordered


def _single_example(tool: str, requests: Sequence[LabeledRequest]) -> Example | None:
    using = [(i, r) for i, r in enumerate(requests) if tool in r.tools_used]
    if not using:
        return None

    def rank(item: tuple[int, LabeledRequest]) -> tuple[int, int, int]:
        count = len(set(item[1].tools_used))
        # Alone, then with one other tool, then the fewest tools.
        return (count, _size(item[1]), item[0])

    _, best = min(using, key=rank)
    return (best.request_text, best.plan_text)


def _union_catalogue(catalogues: Iterable[Sequence[ToolSpec]]) -> tuple[ToolSpec, ...]:
    # Each catalogue is the full one with some tools held back: merge keeping order by
    # inserting each missing tool right after its predecessor in the catalogue it is from.
    merged: list[ToolSpec] = []
    for catalogue in catalogues:
        names = [spec.name for spec in merged]
        for i, spec in enumerate(catalogue):
            if spec.name in names:
                continue
            at = names.index(catalogue[i - 1].name) + 1 if i else 0
            merged.insert(at, spec)
            names.insert(at, spec.name)
    return tuple(merged)
