"""A plan task's arguments: read from the call's text, checked, then resolved at run time.

`read_arguments` turns ``(arg=value, ...)`` into data with a `TaskRef` for each whole
``$N``, checks that references name earlier tasks and that the values fit the tool's
schema (ignoring what depends on results only known at run time), and returns the
tasks the arguments depend on. `resolve_arguments` substitutes those results.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Mapping, Set
from functools import lru_cache
from typing import Any

from jsonschema.exceptions import ValidationError, best_match
from jsonschema.validators import validator_for

from toolweave.errors import CallFormatError
from toolweave.formats.pycall import from_literal
from toolweave.plan.format import PlanTask, TaskRef
from toolweave.toolspec import ToolSpec

__all__ = ["LineProblem", "read_arguments", "resolve_arguments"]

# Task numbers have at most 9 digits: int() refuses strings of more than 4300 digits.
_REF = re.compile(r"\$\{(\d{1,9})\}|\$(\d{1,9})(?!\d)")
_JSON_NAMES = {"true": True, "false": False, "null": None}
# Schema keywords whose verdict does not depend on the values inside a container.
_STRUCTURAL = frozenset(
    {
        "type",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "minItems",
        "maxItems",
        "dependentRequired",
        "propertyNames",
    }
)


class LineProblem(Exception):
    """What is wrong with the current plan line; the parser adds the line number."""


def read_arguments(
    spec: ToolSpec, rest: str, index: int, earlier: Set[int]
) -> tuple[dict[str, Any], tuple[int, ...]]:
    """Read task ``index``'s ``(arg=value, ...)`` (``rest`` starts at the parenthesis).

    Returns the arguments and the tasks among ``earlier`` they refer to, ascending.
    Raises `LineProblem` for text that is not such a call, a reference to a task not in
    ``earlier``, or values the schema of ``spec`` rejects.
    """
    arguments = _parse_arguments(spec, rest)
    checked, dependencies = _scan(arguments, index, earlier)
    _validate(spec, checked)
    return arguments, tuple(sorted(dependencies))


def resolve_arguments(
    task: PlanTask, values: Mapping[int, Any], texts: Mapping[int, str]
) -> dict[str, Any]:
    """Substitute the task's references: `TaskRef` N by ``values[N]``, ``$N`` in strings
    by ``texts[N]``.

    Only references to ``task.dependencies`` are substituted, the same ones the parser
    recognised; other ``$`` text is kept.
    """
    dependencies = set(task.dependencies)

    def text_of(match: re.Match[str]) -> str:
        index = int(match[1] or match[2])
        return texts[index] if index in dependencies else match[0]

    def substitute(value: Any) -> Any:
        if isinstance(value, TaskRef):
            return values[value.index]
        if isinstance(value, str):
            return _REF.sub(text_of, value)
        if isinstance(value, (list, tuple)):
            return [substitute(item) for item in value]
        if isinstance(value, Mapping):
            return {key: substitute(item) for key, item in value.items()}
        return value

    return {key: substitute(value) for key, value in task.arguments.items()}


class _Unknown:
    """Stand-in for a value only known at run time, during schema validation."""

    def __repr__(self) -> str:
        return "<result of an earlier task>"


_UNKNOWN = _Unknown()


def _parse_arguments(spec: ToolSpec, rest: str) -> dict[str, Any]:
    """Read ``(arg=value, ...)`` (``rest`` starts at the parenthesis) into a dict."""
    prefix = "_ref_"
    while prefix in rest:
        prefix = "_" + prefix
    source = "_call" + _mark_references(rest, prefix)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes such as "\d" only warn
            tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        # CPython's parser gives up on very deeply nested text with MemoryError/RecursionError.
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc) or "nested too deeply"
        raise LineProblem(
            f"not a valid call ({message}); write {spec.name}(arg=value, ...) with "
            f"Python literal values, strings in double quotes"
        ) from None
    call = tree.body
    if not (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_call"
    ):
        raise LineProblem(
            f"expected one call {spec.name}(...) and nothing after its closing parenthesis"
        )
    order = spec.argument_order
    properties: Mapping[str, Any] = spec.parameters["properties"]
    # Unknown names are a typical small-model slip; only an open schema accepts them.
    open_schema = spec.parameters.get("additionalProperties", False) is not False or (
        "patternProperties" in spec.parameters
    )
    arguments: dict[str, Any] = {}
    for position, node in enumerate(call.args):
        if isinstance(node, ast.Starred):
            raise LineProblem("'*' arguments are not allowed; write arg=value")
        if position >= len(order):
            raise LineProblem(
                f"{spec.name} takes at most {len(order)} positional argument(s) "
                f"({', '.join(order) or 'none'}); {_usage(spec)}"
            )
        arguments[order[position]] = _checked_value(node, prefix)
    for keyword in call.keywords:
        name = keyword.arg
        if name is None:
            raise LineProblem("'**' arguments are not allowed; write arg=value")
        if name in arguments:
            raise LineProblem(f"argument {name!r} is given twice; {_usage(spec)}")
        if name not in properties and not open_schema:
            raise LineProblem(f"{spec.name} has no argument {name!r}; {_usage(spec)}")
        arguments[name] = _checked_value(keyword.value, prefix)
    return arguments


def _checked_value(node: ast.expr, prefix: str) -> Any:
    """`_value`, with a value nested too deeply to convert as a line problem."""
    try:
        return _value(node, prefix)
    except RecursionError:
        raise LineProblem("a value is nested too deeply; write plain literal values") from None


def _mark_references(source: str, prefix: str) -> str:
    """Replace ``$N``/``${N}`` outside string literals by the identifier ``{prefix}N_``."""
    out: list[str] = []
    i = 0
    while i < len(source):
        char = source[i]
        if char in "'\"":
            quote = char * 3 if source.startswith(char * 3, i) else char
            end = i + len(quote)
            while end < len(source) and not source.startswith(quote, end):
                end += 2 if source[end] == "\\" else 1
            end = min(end + len(quote), len(source))
            out.append(source[i:end])
            i = end
        elif char == "$" and (match := _REF.match(source, i)):
            out.append(f"{prefix}{match[1] or match[2]}_")
            i = match.end()
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _value(node: ast.expr, prefix: str) -> Any:
    """Turn an argument's syntax tree into data, with `TaskRef` for marked references."""
    if isinstance(node, ast.Name):
        if node.id.startswith(prefix) and node.id.endswith("_"):
            digits = node.id[len(prefix) : -1]
            if digits.isdigit():
                return TaskRef(int(digits))
        if node.id in _JSON_NAMES:
            return _JSON_NAMES[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item, prefix) for item in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            key = None if key_node is None else _value(key_node, prefix)
            if not isinstance(key, str):
                raise LineProblem("dict keys must be strings in quotes")
            result[key] = _value(value_node, prefix)
        return result
    try:
        return from_literal(ast.unparse(node))
    except CallFormatError:
        raise LineProblem(
            f"{ast.unparse(node)!r} is not a literal value; write strings in double "
            f"quotes, numbers, True/False/None, lists, dicts, or $N for the result of task N"
        ) from None


def _scan(value: Any, index: int, earlier: Set[int]) -> tuple[Any, set[int]]:
    """Check the references in ``value``; return it with each value that holds a
    reference replaced by `_UNKNOWN`, and the referenced task numbers."""
    if isinstance(value, TaskRef):
        _check_reference(value.index, index, earlier)
        return _UNKNOWN, {value.index}
    if isinstance(value, str):
        found: set[int] = set()
        for match in _REF.finditer(value):
            target = int(match[1] or match[2])
            if match[1] is not None:
                _check_reference(target, index, earlier)
            if target in earlier:
                found.add(target)
        return (_UNKNOWN if found else value), found
    if isinstance(value, list):
        pairs = [_scan(item, index, earlier) for item in value]
        return [v for v, _ in pairs], set().union(*(refs for _, refs in pairs))
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        refs: set[int] = set()
        for key, item in value.items():
            out[key], item_refs = _scan(item, index, earlier)
            refs |= item_refs
        return out, refs
    return value, set()


def _check_reference(target: int, index: int, earlier: Set[int]) -> None:
    if target in earlier:
        return
    if target == index:
        problem = f"task {index} uses its own result ${target}"
    elif target > index:
        problem = f"${target} is the result of a later task"
    else:
        problem = f"${target} refers to task {target}, which does not exist"
    raise LineProblem(
        f"{problem}; a task can only use results of tasks above it "
        f"({_known(earlier)}): reorder or renumber the tasks"
    )


def _known(earlier: Set[int]) -> str:
    if not earlier:
        return "there are none yet"
    return ", ".join(f"${i}" for i in sorted(earlier))


def _validate(spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
    """Schema-check arguments, ignoring what depends on values only known at run time."""
    errors = _validator(spec).iter_errors(dict(arguments))
    error = best_match(e for e in errors if not _depends_on_unknown(e))
    if error is not None:
        path = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
        )
        raise LineProblem(
            f"invalid arguments for {spec.name} at arguments{path}: {error.message}; {_usage(spec)}"
        )


def _depends_on_unknown(error: ValidationError) -> bool:
    if error.instance is _UNKNOWN:
        return True
    return error.validator not in _STRUCTURAL and _contains_unknown(error.instance)


def _contains_unknown(value: Any) -> bool:
    if value is _UNKNOWN:
        return True
    if isinstance(value, list):
        return any(_contains_unknown(item) for item in value)
    if isinstance(value, Mapping):
        return any(_contains_unknown(item) for item in value.values())
    return False


@lru_cache(maxsize=256)
def _validator(spec: ToolSpec) -> Any:
    return validator_for(spec.parameters)(spec.parameters)


def _usage(spec: ToolSpec) -> str:
    """A short reminder of the tool's arguments for error messages."""
    properties: Mapping[str, Any] = spec.parameters["properties"]
    if not properties:
        return f"call it as {spec.name}()"

    def describe(name: str, kind: str) -> str:
        schema_type = properties[name].get("type")
        return f"{name} ({schema_type + ', ' if isinstance(schema_type, str) else ''}{kind})"

    described = [describe(n, "required") for n in spec.required]
    described += [describe(n, "optional") for n in spec.optional]
    return f"the arguments of {spec.name} are: {', '.join(described)}"
