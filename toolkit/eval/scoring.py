"""BFCL-style argument matching of tool calls against ground truth.

Ground truth is an `ExpectedCall`: for every argument, a tuple of acceptable values,
where ``""`` marks the argument as optional (it may be left out). A call matches when
its name matches (``.`` and ``_`` are interchangeable), every argument it gives has an
acceptable value, it gives no argument the ground truth (or, given a spec, the schema)
does not know, and it leaves out only optional arguments and no required one.

Values follow BFCL's rules: strings compare after lowercasing and removing spaces and
``,./-_*^`` (exactly, where the schema wants a non-string type and the ground truth
holds a placeholder string); an int is accepted where a float is expected, a float
where an int is expected unless the schema says ``integer``; booleans only equal
booleans; lists compare element by element; a dict's acceptable value maps each key
to its own list of acceptable values, recursively. Unlike BFCL, a tuple is accepted
where a list is expected, and parallel calls are paired by a maximum matching rather
than greedily.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolweave.toolspec import ToolCall, ToolSpec

__all__ = ["ExpectedCall", "MatchResult", "match_call", "match_calls", "normalise_string"]

_STRIPPED = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True)
class ExpectedCall:
    """One ground-truth call: a tool name and, per argument, the acceptable values.

    Nested values are plain JSON (lists, dicts whose values are lists of acceptable
    values); treat everything as read-only.
    """

    name: str
    arguments: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    # Hash by name only, like ToolCall: dict fields are unhashable.
    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def optional(self) -> tuple[str, ...]:
        """Names of the arguments the call may leave out."""
        return tuple(key for key, values in self.arguments.items() if "" in values)


@dataclass(frozen=True)
class MatchResult:
    """The verdict of a match; ``reason`` says what failed (empty when ``ok``)."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


_OK = MatchResult(True)


def normalise_string(text: str) -> str:
    """Lowercase ``text`` and drop spaces and ``,./-_*^``; single quotes become double."""
    return _STRIPPED.sub("", text).lower().replace("'", '"')


def match_call(call: ToolCall, expected: ExpectedCall, spec: ToolSpec | None = None) -> MatchResult:
    """Match one call against one ground-truth call; ``spec`` adds schema-aware checks."""
    if _name_key(call.name) != _name_key(expected.name):
        return MatchResult(False, f"wrong tool {call.name!r}, expected {expected.name!r}")
    if spec is not None:
        missing = [key for key in spec.required if key not in call.arguments]
        if missing:
            return MatchResult(False, f"missing required argument {missing[0]!r}")
    for key, value in call.arguments.items():
        if key not in expected.arguments or (spec is not None and key not in _properties(spec)):
            return MatchResult(False, f"unexpected argument {key!r}")
        acceptable = expected.arguments[key]
        if not _accepts(value, acceptable, _property_schema(spec, key)):
            shown = [v for v in acceptable if v != ""]
            return MatchResult(False, f"argument {key!r}: {value!r} is not one of {shown!r}")
    for key, acceptable in expected.arguments.items():
        if key not in call.arguments and "" not in acceptable:
            return MatchResult(False, f"missing argument {key!r}")
    return _OK


def match_calls(
    calls: Sequence[ToolCall],
    expected: Sequence[ExpectedCall],
    *,
    ordered: bool = False,
    specs: Sequence[ToolSpec] = (),
) -> MatchResult:
    """Match a list of calls one-to-one against ground truth.

    With ``ordered=False`` (BFCL's parallel categories) any pairing will do: the
    result is ok when a perfect matching exists. ``specs`` are looked up by tool name.
    """
    if len(calls) != len(expected):
        return MatchResult(False, f"expected {len(expected)} call(s), got {len(calls)}")
    by_name = {_name_key(spec.name): spec for spec in specs}

    def check(i: int, j: int) -> MatchResult:
        return match_call(calls[i], expected[j], by_name.get(_name_key(expected[j].name)))

    if ordered:
        for i in range(len(calls)):
            result = check(i, i)
            if not result:
                return MatchResult(False, f"call {i}: {result.reason}")
        return _OK

    fits = [[bool(check(i, j)) for i in range(len(calls))] for j in range(len(expected))]
    owner: list[int | None] = [None] * len(calls)  # call index -> expected index
    for j in range(len(expected)):
        if not _augment(j, fits, owner, set()):
            return MatchResult(False, _unmatched_reason(calls, expected[j], owner, by_name))
    return _OK


def _augment(j: int, fits: list[list[bool]], owner: list[int | None], seen: set[int]) -> bool:
    """Kuhn's augmenting path: find expected call ``j`` a call, reassigning if needed."""
    for i, fit in enumerate(fits[j]):
        if fit and i not in seen:
            seen.add(i)
            holder = owner[i]
            if holder is None or _augment(holder, fits, owner, seen):
                owner[i] = j
                return True
    return False


def _unmatched_reason(
    calls: Sequence[ToolCall],
    expected: ExpectedCall,
    owner: Sequence[int | None],
    by_name: Mapping[str, ToolSpec],
) -> str:
    """Explain a failed pairing through a call of the same tool, a free one if any."""
    same = [i for i, c in enumerate(calls) if _name_key(c.name) == _name_key(expected.name)]
    if not same:
        return f"no call of {expected.name!r}"
    free = [i for i in same if owner[i] is None] or same
    result = match_call(calls[free[0]], expected, by_name.get(_name_key(expected.name)))
    why = result.reason if not result.ok else "its match is taken by another expected call"
    return f"no call matches expected {expected.name!r}: {why}"


def _name_key(name: str) -> str:
    # Providers that forbid '.' in tool names make models write math.hypot as math_hypot.
    return name.replace(".", "_")


def _properties(spec: ToolSpec) -> Mapping[str, Any]:
    properties: Mapping[str, Any] = spec.parameters["properties"]
    return properties


def _property_schema(spec: ToolSpec | None, key: str) -> Mapping[str, Any] | None:
    schema = _properties(spec).get(key) if spec is not None else None
    return schema if isinstance(schema, Mapping) else None


def _accepts(value: Any, acceptable: Any, schema: Mapping[str, Any] | None) -> bool:
    """True if ``value`` equals one of the ``acceptable`` values (a list or tuple)."""
    if not isinstance(acceptable, (list, tuple)):
        acceptable = (acceptable,)
    return any(_equal(value, option, schema) for option in acceptable)


def _equal(value: Any, expected: Any, schema: Mapping[str, Any] | None) -> bool:
    """Compare one value with one acceptable value under BFCL's rules."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return type(value) is type(expected) and value == expected
    if expected is None or value is None:
        return value is expected
    if isinstance(expected, str):
        if not isinstance(value, str):
            return False
        if _schema_type(schema) not in (None, "string"):
            # A string where the schema wants another type stands for a variable or a
            # sentinel such as "dontcare"; BFCL compares those exactly.
            return value == expected
        return normalise_string(value) == normalise_string(expected)
    if isinstance(expected, (int, float)):
        if not isinstance(value, (int, float)):
            return False
        if isinstance(value, float) and _schema_type(schema) == "integer":
            return False
        return value == expected
    if isinstance(expected, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(expected):
            return False
        items = schema.get("items") if schema is not None else None
        item_schema = items if isinstance(items, Mapping) else None
        return all(_equal(v, e, item_schema) for v, e in zip(value, expected, strict=True))
    if isinstance(expected, Mapping):
        return isinstance(value, Mapping) and _dict_equal(value, expected, schema)
    return bool(value == expected)


def _dict_equal(
    value: Mapping[str, Any], expected: Mapping[str, Any], schema: Mapping[str, Any] | None
) -> bool:
    properties = schema.get("properties") if schema is not None else None
    if not isinstance(properties, Mapping):
        properties = {}
    for key, item in value.items():
        if key not in expected or not _accepts(item, expected[key], properties.get(key)):
            return False
    return all(key in value or _is_optional(acceptable) for key, acceptable in expected.items())


def _is_optional(acceptable: Any) -> bool:
    return isinstance(acceptable, (list, tuple)) and "" in acceptable


def _schema_type(schema: Mapping[str, Any] | None) -> Any:
    return schema.get("type") if schema is not None else None
