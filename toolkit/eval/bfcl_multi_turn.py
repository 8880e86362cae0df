"""BFCL v4 multi-turn cases: fixed tool catalogues with per-turn ground-truth calls.

A multi-turn entry names its ``involved_classes`` (``GorillaFileSystem``, ``TwitterAPI``,
...); the tools of each class are the function docs in
``multi_turn_func_doc/<file>.json``. Ground truth is, per turn, a list of Python call
strings such as ``"cd(folder='document')"`` or ``"sort('final_report.pdf')"``;
`parse_call` turns them into `ToolCall`, mapping positional arguments by the order of
the tool's parameters. Entries that do not convert are skipped and listed in
``CaseList.skipped``.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolweave.errors import CallFormatError, ToolSpecError
from toolweave.eval.bfcl import CaseList
from toolweave.eval.bfcl_data import (
    DatasetError,
    Message,
    bfcl_data_dir,
    build_cases,
    read_json_lines,
    turn_messages,
)
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = [
    "FUNC_DOC_FILES",
    "MULTI_TURN_CATEGORIES",
    "MultiTurnCase",
    "load_class_tools",
    "load_multi_turn",
    "parse_call",
]

MULTI_TURN_CATEGORIES = (
    "multi_turn_base",
    "multi_turn_long_context",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
)

# Class -> function doc file, as in bfcl_eval/constants/executable_backend_config.py.
FUNC_DOC_FILES: Mapping[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}


@dataclass(frozen=True)
class MultiTurnCase:
    """One multi-turn conversation with the calls expected after each user turn.

    ``turns[i]`` holds the messages of turn i (empty in ``miss_func`` where BFCL hands
    over held-out tools instead); ``ground_truth[i]`` the calls expected after it.
    ``missed_functions`` maps a turn to the tools held back until that turn;
    ``path`` lists the ``Class.method`` names the ground truth walks through.
    """

    id: str
    category: str
    turns: tuple[tuple[Message, ...], ...]
    involved_classes: tuple[str, ...]
    tools: tuple[ToolSpec, ...]
    ground_truth: tuple[tuple[ToolCall, ...], ...]
    initial_config: Mapping[str, Any] = field(default_factory=dict)
    path: tuple[str, ...] = ()
    missed_functions: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    excluded_functions: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash(self.id)

    def tools_at(self, turn: int) -> tuple[ToolSpec, ...]:
        """The tools offered at ``turn``: all but those still held back for later turns."""
        held = {name for at, names in self.missed_functions.items() if at > turn for name in names}
        return tuple(tool for tool in self.tools if tool.name not in held)


def load_multi_turn(
    category: str = "multi_turn_base", *, data_dir: str | os.PathLike[str] | None = None
) -> CaseList[MultiTurnCase]:
    """Load one multi-turn category; raises `DatasetError` for unknown ones."""
    if category not in MULTI_TURN_CATEGORIES:
        known = ", ".join(MULTI_TURN_CATEGORIES)
        raise DatasetError(f"unknown BFCL multi-turn category {category!r} (known: {known})")
    cases, skipped = _load_cached(category, bfcl_data_dir(data_dir))
    return CaseList(cases, skipped)


def load_class_tools(
    class_name: str, *, data_dir: str | os.PathLike[str] | None = None
) -> tuple[ToolSpec, ...]:
    """The tool catalogue of one BFCL class, e.g. ``"GorillaFileSystem"``."""
    return _class_tools(class_name, bfcl_data_dir(data_dir))


def parse_call(text: str, tools: Mapping[str, ToolSpec] | None = None) -> ToolCall:
    """Parse a Python-style call ``name(arg, key=value)`` whose arguments are literals.

    Positional arguments take the tool's parameter names in schema order, so they need
    the tool in ``tools``. Raises `CallFormatError`.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise CallFormatError(f"not a Python call: {text!r} ({exc.msg})") from None
    if not isinstance(node, ast.Call):
        raise CallFormatError(f"not a call: {text!r}")
    name = _dotted_name(node.func)
    if name is None:
        raise CallFormatError(f"call target is not a name: {text!r}")
    arguments: dict[str, Any] = {}
    if node.args:
        spec = (tools or {}).get(name)
        if spec is None:
            raise CallFormatError(f"positional arguments need the tool {name!r}: {text!r}")
        order = list(spec.parameters["properties"])
        if len(node.args) > len(order):
            raise CallFormatError(f"too many positional arguments for {name!r}: {text!r}")
        for key, value in zip(order, node.args, strict=False):
            arguments[key] = _literal(value, text)
    for keyword in node.keywords:
        if keyword.arg is None:
            raise CallFormatError(f"**kwargs are not supported: {text!r}")
        if keyword.arg in arguments:
            raise CallFormatError(f"argument {keyword.arg!r} given twice: {text!r}")
        arguments[keyword.arg] = _literal(keyword.value, text)
    return ToolCall(name=name, arguments=arguments)


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _literal(node: ast.expr, text: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise CallFormatError(
            f"argument is not a literal: {ast.unparse(node)!r} in {text!r}"
        ) from None


@lru_cache(maxsize=32)
def _class_tools(class_name: str, root: Path) -> tuple[ToolSpec, ...]:
    file = FUNC_DOC_FILES.get(class_name)
    if file is None:
        raise DatasetError(f"unknown BFCL class {class_name!r}")
    tools: list[ToolSpec] = []
    for line, doc in read_json_lines(root / "multi_turn_func_doc" / file):
        try:
            tools.append(ToolSpec.from_dict(doc))
        except ToolSpecError as exc:
            raise DatasetError(f"{file}:{line}: {exc}") from None
    return tuple(tools)


@lru_cache(maxsize=8)
def _load_cached(category: str, root: Path) -> tuple[tuple[MultiTurnCase, ...], dict[str, str]]:
    return build_cases(
        root,
        category,
        lambda entry, truth: _case(category, entry, truth, root),
        (DatasetError, CallFormatError, ValueError, TypeError, KeyError),
    )


def _case(category: str, entry: Mapping[str, Any], truth: Any, root: Path) -> MultiTurnCase:
    classes = tuple(entry["involved_classes"])
    tools = tuple(tool for name in classes for tool in _class_tools(name, root))
    by_name = {tool.name: tool for tool in tools}
    if len(by_name) != len(tools):
        raise ValueError("two involved classes share a tool name")
    turns = tuple(turn_messages(turn) for turn in entry["question"])
    if not isinstance(truth, list) or len(truth) != len(turns):
        raise ValueError("ground truth does not have one entry per turn")
    ground_truth = tuple(tuple(parse_call(text, by_name) for text in step) for step in truth)
    for step in ground_truth:
        for call in step:
            if call.name not in by_name:
                raise ValueError(f"ground truth calls unknown tool {call.name!r}")
    missed = entry.get("missed_function") or {}
    return MultiTurnCase(
        id=entry["id"],
        category=category,
        turns=turns,
        involved_classes=classes,
        tools=tools,
        ground_truth=ground_truth,
        initial_config=entry.get("initial_config") or {},
        path=tuple(entry.get("path") or ()),
        missed_functions={int(at): tuple(names) for at, names in missed.items()},
        excluded_functions=tuple(entry.get("excluded_function") or ()),
    )
