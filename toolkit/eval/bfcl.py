"""BFCL v4 single-turn cases: questions, tool catalogues and ground truth.

Each category is a pair of JSON-lines files, ``BFCL_v4_<category>.json`` (id, question
as a list of turns of messages, function docs) and ``possible_answer/`` (ground truth:
a list of ``{tool: {argument: [acceptable values]}}``). `load_cases` joins them into
`BfclCase` objects. Entries that do not convert, and the few whose ground truth no call
can satisfy (a required argument missing, an argument the tool lacks), are skipped and
listed in ``CaseList.skipped``. Multi-turn cases are in `toolweave.eval.bfcl_multi_turn`.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from toolweave.errors import ToolSpecError
from toolweave.eval.bfcl_data import (
    BFCL_VERSION,
    DatasetError,
    Message,
    bfcl_data_dir,
    build_cases,
    turn_messages,
)
from toolweave.eval.scoring import ExpectedCall
from toolweave.toolspec import ToolSpec

__all__ = [
    "BFCL_VERSION",
    "SINGLE_TURN_CATEGORIES",
    "BfclCase",
    "CaseList",
    "DatasetError",
    "ExpectedCall",
    "bfcl_data_dir",
    "flatten_messages",
    "load_cases",
    "sample_cases",
]

SINGLE_TURN_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
_ALIASES = {"simple": "simple_python"}

_T = TypeVar("_T")


class CaseList(list[_T]):
    """A list of loaded cases; ``skipped`` maps each skipped entry's id to the reason."""

    def __init__(self, cases: Iterable[_T] = (), skipped: Mapping[str, str] | None = None) -> None:
        super().__init__(cases)
        self.skipped: dict[str, str] = dict(skipped or {})


@dataclass(frozen=True)
class BfclCase:
    """One single-turn BFCL question with its tools and ground-truth calls.

    ``messages`` is the whole conversation as ``{"role", "content"}`` dicts (BFCL's
    nested turn list flattened); ``n_args`` counts the arguments of all ground-truth
    calls, optional ones included.
    """

    id: str
    category: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    expected: tuple[ExpectedCall, ...]
    n_args: int

    def __hash__(self) -> int:
        return hash(self.id)


def load_cases(
    category: str, *, data_dir: str | os.PathLike[str] | None = None
) -> CaseList[BfclCase]:
    """Load one single-turn category (``simple`` is short for ``simple_python``).

    Downloads the data on first use (see `bfcl_data_dir`); raises `DatasetError` for
    an unknown category or missing files.
    """
    name = _ALIASES.get(category, category)
    if name not in SINGLE_TURN_CATEGORIES:
        known = ", ".join(("simple", *SINGLE_TURN_CATEGORIES))
        raise DatasetError(f"unknown BFCL single-turn category {category!r} (known: {known})")
    cases, skipped = _load_cached(name, bfcl_data_dir(data_dir))
    return CaseList(cases, skipped)


def sample_cases(
    categories: str | Sequence[str],
    n: int,
    seed: int = 0,
    stratify: str | None = "n_args",
    *,
    data_dir: str | os.PathLike[str] | None = None,
) -> list[BfclCase]:
    """Draw ``n`` cases (fewer if there are not that many), deterministic for ``seed``.

    With ``stratify="n_args"`` cases are taken round robin over the buckets of equal
    ``n_args`` (ascending), so each argument count is equally represented until its
    bucket runs out; with ``stratify=None`` the draw is uniform over all cases.
    """
    if stratify not in ("n_args", None):
        raise ValueError(f"stratify must be 'n_args' or None, got {stratify!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    names = [categories] if isinstance(categories, str) else list(categories)
    pool = [case for name in names for case in load_cases(name, data_dir=data_dir)]
    rng = random.Random(seed)
    if stratify is None:
        return rng.sample(pool, min(n, len(pool)))
    buckets: dict[int, list[BfclCase]] = {}
    for case in pool:
        buckets.setdefault(case.n_args, []).append(case)
    queues = [buckets[key] for key in sorted(buckets)]
    for queue in queues:
        rng.shuffle(queue)
    picked: list[BfclCase] = []
    for depth in range(max((len(q) for q in queues), default=0)):
        for queue in queues:
            if len(picked) == n:
                return picked
            if depth < len(queue):
                picked.append(queue[depth])
    return picked


@lru_cache(maxsize=32)
def _load_cached(category: str, root: Path) -> tuple[tuple[BfclCase, ...], dict[str, str]]:
    return build_cases(
        root,
        category,
        lambda entry, truth: _case(category, entry, truth),
        (ToolSpecError, ValueError, TypeError, KeyError),
    )


def _case(category: str, entry: Mapping[str, Any], truth: Any) -> BfclCase:
    """Build one case; raises ValueError/ToolSpecError for entries that do not fit."""
    tools = tuple(ToolSpec.from_dict(doc) for doc in entry["function"])
    by_name = {tool.name: tool for tool in tools}
    if len(by_name) != len(tools):
        raise ValueError("duplicate tool names")
    if not isinstance(truth, list) or not truth:
        raise ValueError("no ground truth")
    expected = tuple(_expected_calls(truth))
    for call in expected:
        if call.name not in by_name:
            raise ValueError(f"ground truth calls unknown tool {call.name!r}")
        _check_satisfiable(call, by_name[call.name])
    return BfclCase(
        id=entry["id"],
        category=category,
        messages=flatten_messages(entry["question"]),
        tools=tools,
        expected=expected,
        n_args=sum(len(call.arguments) for call in expected),
    )


def _expected_calls(truth: list[Any]) -> Iterable[ExpectedCall]:
    for item in truth:
        if not isinstance(item, dict) or not item:
            raise ValueError(f"ground truth item is not a {{tool: arguments}} object: {item!r}")
        for name, arguments in item.items():
            if not isinstance(arguments, dict):
                raise ValueError(f"arguments of {name!r} are not an object")
            yield ExpectedCall(
                name=name,
                arguments={
                    key: tuple(values) if isinstance(values, list) else (values,)
                    for key, values in arguments.items()
                },
            )


def _check_satisfiable(call: ExpectedCall, spec: ToolSpec) -> None:
    """Raise ValueError if no call of ``spec`` can match ``call`` (flawed ground truth)."""
    for key in spec.required:
        if key not in call.arguments:
            raise ValueError(f"ground truth of {call.name!r} lacks required argument {key!r}")
    for key, acceptable in call.arguments.items():
        if not acceptable:
            raise ValueError(f"ground truth of {call.name!r} accepts no value for {key!r}")
        if key not in spec.parameters["properties"] and "" not in acceptable:
            raise ValueError(f"ground truth of {call.name!r} needs unknown argument {key!r}")


def flatten_messages(question: Any) -> tuple[Message, ...]:
    """Flatten BFCL's list of turns (each a list of messages) into one conversation."""
    if not isinstance(question, list):
        raise ValueError("question is not a list of turns")
    messages = tuple(m for turn in question for m in turn_messages(turn))
    if not messages:
        raise ValueError("question has no messages")
    return messages
