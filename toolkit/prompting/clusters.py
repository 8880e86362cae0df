"""Clusters of co-activated tools: the co-activation matrix and its NMF factorisation.

PromptWeaver shows one example per cluster, so a cluster should hold tools that plans
use together. The co-activation matrix (pairs of tools in one plan, diagonal = uses) is
factorised by NMF, and each tool joins the component of the largest entry in its factor
row. The lowest error of `NMF_RESTARTS` seeded starts is kept: multiplicative updates
often stop in a local minimum that splits a block of always-together tools.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["NMF_RESTARTS", "coactivation_matrix", "nmf", "tool_clusters"]

#: Seeded NMF starts per factorisation; the one with the lowest error is kept.
NMF_RESTARTS = 8


def tool_clusters(
    tool_sets: Sequence[Iterable[str]], tools: Sequence[str], k: int, seed: int = 0
) -> list[tuple[str, ...]]:
    """``tools`` split into at most ``k`` clusters of tools used together in ``tool_sets``.

    NMF starts ``seed .. seed + NMF_RESTARTS - 1``; empty components vanish; clusters
    come in component order, each in the order of ``tools``.
    """
    if not tools:
        return []
    matrix = coactivation_matrix(tool_sets, tools)
    weights = _best_nmf(matrix, min(k, len(tools)), seed)
    owner = np.argmax(weights, axis=1).tolist()
    groups = [
        tuple(t for t, c in zip(tools, owner, strict=True) if c == component)
        for component in range(weights.shape[1])
    ]
    return [group for group in groups if group]


def coactivation_matrix(tool_sets: Sequence[Iterable[str]], tools: Sequence[str]) -> np.ndarray:
    """Symmetric ``len(tools)`` square counts: [i, j] = sets holding both tools i and j,
    [i, i] = sets holding tool i. Names not in ``tools`` are ignored."""
    index = {name: i for i, name in enumerate(tools)}
    matrix = np.zeros((len(tools), len(tools)))
    for tool_set in tool_sets:
        ids = sorted({index[name] for name in tool_set if name in index})
        matrix[np.ix_(ids, ids)] += 1
    return matrix


def nmf(
    matrix: np.ndarray, k: int, *, iterations: int = 500, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``W (n x k), H (k x m) >= 0`` with ``W @ H ~ matrix`` in Frobenius norm.

    Lee and Seung's multiplicative updates from a seeded uniform start, so the same
    input gives the same factors; the error never increases from one step to the next.
    """
    values = np.asarray(matrix, dtype=np.float64)
    if values.ndim != 2 or (values < 0).any():
        raise ValueError("nmf needs a non-negative 2-D matrix")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rng = np.random.default_rng(seed)
    scale = np.sqrt(max(values.mean(), 1e-12) / k)
    w = rng.uniform(0.1, 1.0, (values.shape[0], k)) * scale
    h = rng.uniform(0.1, 1.0, (k, values.shape[1])) * scale
    tiny = 1e-12
    for _ in range(iterations):
        h *= (w.T @ values) / (w.T @ w @ h + tiny)
        w *= (values @ h.T) / (w @ h @ h.T + tiny)
    return w, h


def _best_nmf(matrix: np.ndarray, k: int, seed: int) -> np.ndarray:
    # Multiplicative updates stop in local minima (a planted block split across two
    # components); the lowest error over a few seeded starts finds the blocks.
    best, lowest = np.zeros((0, 0)), np.inf
    for start in range(seed, seed + NMF_RESTARTS):
        weights, components = nmf(matrix, k, seed=start)
        error = float(np.linalg.norm(matrix - weights @ components))
        if error < lowest - 1e-9:
            best, lowest = weights, error
    return best
