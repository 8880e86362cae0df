"""The stored prefix states of `toolweave bench pipeline`: PromptWeaver's static
prefixes and chosen example combinations, the Arbiter's static prefix, and how much of
the workload they cover for each storage budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from toolweave.adapters.bench.pipeline_stages import render_tokens
from toolweave.native.engine import Engine
from toolweave.native.states.prefixes import PrefixStates
from toolweave.plan.prompts import arbiter_messages
from toolweave.prompting.combinations import coverage_fraction
from toolweave.prompting.promptweaver import PromptWeaver

__all__ = ["BUDGETS", "budget_coverage", "build_states", "progress_bar"]

#: Budgets (stored combinations) whose coverage and storage are reported.
BUDGETS = (0, 5, 10, 15, 20, 40, 80, 120, 160)


def build_states(
    console: Console,
    engine: Engine,
    states: PrefixStates,
    weavers: dict[tuple[str, ...], PromptWeaver],
    chosen: Sequence[tuple[Any, tuple[int, ...]]],
) -> tuple[dict[tuple[str, ...], str], list[str], str]:
    """Compute (or find) the static prefix of every catalogue, the chosen combinations and
    the Arbiter's static prefix; return their digests."""
    items: list[tuple[str, list[int]]] = []
    for key, weaver in sorted(weavers.items()):
        items.append(("static " + "+".join(key), _prefix(engine, weaver.static_messages())))
    for key, combo in chosen:
        label = f"combo {'+'.join(key)} {list(combo)}"
        items.append((label, _prefix(engine, weavers[key].prefix_messages(combo))))
    arbiter = arbiter_messages("", "", "")[:-1]
    items.append(("arbiter static", _prefix(engine, arbiter)))
    with progress_bar(console, "prefix states") as bar:
        task = bar.add_task("build", total=len(items))
        entries = states.build(items, progress=lambda done, total: bar.update(task, completed=done))
    n_static = len(weavers)
    static = {key: e.digest for key, e in zip(sorted(weavers), entries[:n_static], strict=True)}
    combos = [e.digest for e in entries[n_static:-1]]
    return static, combos, entries[-1].digest


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
    static: dict[tuple[str, ...], str],
    combos: list[str],
    arbiter: str,
    train_seqs: Sequence[tuple[Any, tuple[int, ...]]],
    test_seqs: Sequence[tuple[Any, tuple[int, ...]]],
    chosen: Sequence[tuple[Any, tuple[int, ...]]],
) -> list[dict[str, Any]]:
    """PromptWeaver's coverage of the train and test example blocks, and the storage,
    for each budget of stored combinations in `BUDGETS`."""
    base = states.disk_bytes([*static.values(), arbiter])
    out = []
    for b in BUDGETS:
        stored = list(chosen[:b])
        out.append(
            {
                "budget": b,
                "coverage": coverage_fraction(test_seqs, stored),
                "coverage_train": coverage_fraction(train_seqs, stored),
                "storage_mb": (base + states.disk_bytes(combos[:b])) / 2**20,
            }
        )
    return out
