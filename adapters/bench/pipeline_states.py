"""The stored prefix states of `toolweave bench pipeline`: PromptWeaver's static
prefixes and chosen example combinations, the Arbiter's static prefix, and how much of
the workload they cover for each storage budget.

Only the first ``--budget`` combinations are built, and fewer when their states would
not fit the cache limit (`toolweave.disk_cache`): the statics are built first, their
bytes per token give each combination's size, and the budget is cut to what fits, with a
warning. Coverage is reported for every budget in `BUDGETS` (it needs no states); the
storage of a budget beyond what was built is that estimate (``storage_estimated``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from toolweave.adapters.bench.pipeline_stages import render_tokens
from toolweave.disk_cache import format_size
from toolweave.native.engine import Engine
from toolweave.native.states.prefixes import PrefixStates
from toolweave.plan.prompts import arbiter_messages
from toolweave.prompting.combinations import coverage_fraction
from toolweave.prompting.promptweaver import PromptWeaver

__all__ = ["BUDGETS", "PrefixSet", "budget_coverage", "build_states", "fit_budget", "progress_bar"]

log = logging.getLogger("toolweave.bench")

#: Budgets (stored combinations) whose coverage and storage are reported.
BUDGETS = (0, 5, 10, 15, 20, 40, 80, 120, 160)


@dataclass(frozen=True)
class PrefixSet:
    """The digests of what was built, and what sizes the rest would take.

    ``combos`` holds the digests of the first ``budget`` combinations (the ones built);
    ``combo_tokens`` the token count of every chosen combination; ``bytes_per_token``
    the statics' state bytes per token (a state's size is linear in its tokens).
    """

    static: dict[tuple[str, ...], str]
    combos: list[str]
    arbiter: str
    combo_tokens: list[int]
    bytes_per_token: float
    budget: int
    requested: int


def fit_budget(
    combo_tokens: Sequence[int],
    requested: int,
    bytes_per_token: float,
    base_bytes: int,
    limit: int | None,
) -> int:
    """The largest budget <= `requested` whose combination states, with `base_bytes`
    already stored, fit `limit` bytes (None: no limit)."""
    budget = min(requested, len(combo_tokens))
    if limit is None:
        return budget
    total = float(base_bytes)
    for b in range(budget):
        total += combo_tokens[b] * bytes_per_token
        if total > limit:
            return b
    return budget


def build_states(
    console: Console,
    engine: Engine,
    states: PrefixStates,
    weavers: dict[tuple[str, ...], PromptWeaver],
    chosen: Sequence[tuple[Any, tuple[int, ...]]],
    budget: int,
) -> PrefixSet:
    """Compute (or find) the static prefix of every catalogue, the Arbiter's static prefix
    and the first `budget` chosen combinations (fewer if they do not fit the cache limit)."""
    fixed: list[tuple[str, list[int]]] = [
        ("static " + "+".join(key), _prefix(engine, weaver.static_messages()))
        for key, weaver in sorted(weavers.items())
    ]
    fixed.append(("arbiter static", _prefix(engine, arbiter_messages("", "", "")[:-1])))
    combos = [
        (_combo_label(key, combo), _prefix(engine, weavers[key].prefix_messages(combo)))
        for key, combo in chosen
    ]
    base = _build(console, states, fixed, "static prefix states")
    base_bytes = sum(e.n_bytes for e in base)
    per_token = base_bytes / max(1, sum(e.n_tokens for e in base))
    tokens = [len(t) for _, t in combos]
    fitted = fit_budget(tokens, budget, per_token, base_bytes, states.disk_limit)
    if fitted < min(budget, len(combos)):
        need = base_bytes + per_token * sum(tokens[:budget])
        limit = format_size(states.disk_limit or 0)
        msg = (
            f"budget {budget} needs about {format_size(int(need))} of prefix states, over the "
            f"cache limit of {limit}: building {fitted} (raise TOOLWEAVE_CACHE_LIMIT or "
            "--cache-limit for more)"
        )
        log.warning(msg)
        console.print(f"[yellow]{msg}[/yellow]")
    built = _build(console, states, combos[:fitted], "prefix states") if fitted else []
    n_static = len(weavers)
    static = {key: e.digest for key, e in zip(sorted(weavers), base[:n_static], strict=True)}
    return PrefixSet(
        static=static,
        combos=[e.digest for e in built],
        arbiter=base[-1].digest,
        combo_tokens=tokens,
        bytes_per_token=per_token,
        budget=fitted,
        requested=budget,
    )


def _combo_label(key: tuple[str, ...], combo: tuple[int, ...]) -> str:
    return f"combo {'+'.join(key)} {list(combo)}"


def _build(
    console: Console, states: PrefixStates, items: list[tuple[str, list[int]]], label: str
) -> list[Any]:
    with progress_bar(console, label) as bar:
        task = bar.add_task("build", total=len(items))
        return states.build(items, progress=lambda done, total: bar.update(task, completed=done))


def progress_bar(console: Console, label: str) -> Progress:
    """A bar with the count done and an estimate of the time left."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


def _prefix(engine: Engine, messages: Sequence[tuple[str, str]]) -> list[int]:
    return render_tokens(engine, messages, generation=False)


def budget_coverage(
    states: PrefixStates,
    built: PrefixSet,
    train_seqs: Sequence[tuple[Any, tuple[int, ...]]],
    test_seqs: Sequence[tuple[Any, tuple[int, ...]]],
    chosen: Sequence[tuple[Any, tuple[int, ...]]],
) -> list[dict[str, Any]]:
    """PromptWeaver's coverage of the train and test example blocks, and the storage,
    for each budget of stored combinations in `BUDGETS` (estimated beyond the built)."""
    base = states.disk_bytes([*built.static.values(), built.arbiter])
    out = []
    for b in BUDGETS:
        stored = list(chosen[:b])
        measured = states.disk_bytes(built.combos[: min(b, built.budget)])
        rest = sum(built.combo_tokens[built.budget : b]) * built.bytes_per_token
        out.append(
            {
                "budget": b,
                "coverage": coverage_fraction(test_seqs, stored),
                "coverage_train": coverage_fraction(train_seqs, stored),
                "storage_mb": (base + measured + rest) / 2**20,
                "storage_estimated": b > built.budget,
            }
        )
    return out
