"""Which prompt prefixes to store: Agent-X's Algorithm 1, and the coverage it maximises.

`select_combinations` is Algorithm 1 generalised to several catalogues and to block
sequences: a prefix is a ``(catalogue key, blocks)`` pair, where a block is anything
hashable (for PromptWeaver, a cluster id or a single-tool example's tool name), and a
stored prefix saves the prefill of every request whose block sequence starts with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

__all__ = ["Prefix", "coverage", "coverage_fraction", "select_combinations"]

#: A stored combination: the catalogue key and the leading example blocks it holds.
Prefix = tuple[Hashable, tuple[Hashable, ...]]


def select_combinations(sequences: Sequence[Prefix], budget: int) -> list[Prefix]:
    """Agent-X Algorithm 1: the cluster prefixes to store, at most ``budget`` of them.

    Each sequence is (catalogue key, activated cluster ids in the fixed order). A
    candidate is a one-cluster prefix, or a selected prefix extended by the next cluster
    of some sequence of the same key. Because every selected prefix's parent is
    selected, adding a candidate raises coverage by exactly the number of sequences
    starting with it; the greedy takes the largest gain, ties to the shorter prefix, then
    to the one seen first in ``sequences``. It stops at ``budget`` or when no candidate
    is left. The result is in selection order (its first n items are the choice for
    budget n), and no other parent-closed set of that size covers more, since a prefix
    never starts more sequences than its parent.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    starts: Counter[Prefix] = Counter()
    children: dict[Prefix, list[Prefix]] = {}
    for key, sequence in sequences:
        for end in range(1, len(sequence) + 1):
            prefix = (key, tuple(sequence[:end]))
            if prefix not in starts and end > 1:
                children.setdefault((key, tuple(sequence[: end - 1])), []).append(prefix)
            starts[prefix] += 1
    first_seen = {prefix: i for i, prefix in enumerate(starts)}
    frontier = {prefix for prefix in starts if len(prefix[1]) == 1}
    selected: list[Prefix] = []
    while frontier and len(selected) < budget:
        best = min(frontier, key=lambda p: (-starts[p], len(p[1]), first_seen[p]))
        frontier.remove(best)
        frontier.update(children.get(best, ()))
        selected.append(best)
    return selected


def coverage(sequences: Sequence[Prefix], stored: Iterable[Prefix]) -> int:
    """Sum over ``sequences`` of the length of its longest prefix in ``stored`` (same key)."""
    held = set(stored)
    total = 0
    for key, sequence in sequences:
        total += max(
            (end for end in range(1, len(sequence) + 1) if (key, tuple(sequence[:end])) in held),
            default=0,
        )
    return total


def coverage_fraction(sequences: Sequence[Prefix], stored: Iterable[Prefix]) -> float:
    """`coverage` over the number of blocks in ``sequences`` (0.0 when there are none)."""
    total = sum(len(sequence) for _, sequence in sequences)
    return coverage(sequences, stored) / total if total else 0.0
