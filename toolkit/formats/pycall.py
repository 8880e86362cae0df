"""Python-call style: ``f(key="value", n=3)``, one call per line.

Values are Python literals of JSON data. `to_literal` and `from_literal` are public
because plan lines (LLMCompiler style) write and read the same literals.
"""

from __future__ import annotations

import ast
import keyword
import math
import unicodedata
import warnings
from collections.abc import Mapping
from typing import Any

from toolweave.errors import CallFormatError
from toolweave.formats.base import CallFormat
from toolweave.toolspec import ToolCall

__all__ = ["PyCallFormat", "from_literal", "to_literal"]

# Escapes for characters that would end or break a double-quoted one-line literal.
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def to_literal(value: Any) -> str:
    """Write a JSON value as a Python literal that `from_literal` reads back exactly.

    Strings are double-quoted on one line with unicode kept literal; floats use
    ``repr`` (infinities as ``1e999``); tuples become lists.
    """
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            raise CallFormatError("NaN has no Python literal")
        if math.isinf(value):
            return "1e999" if value > 0 else "-1e999"
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_escape(char) for char in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(to_literal(item) for item in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{to_literal(key)}: {to_literal(item)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    raise CallFormatError(f"cannot write a {type(value).__name__} as a literal")


def from_literal(text: str) -> Any:
    """Read one Python literal of JSON data (None, bool, int, float, str, list, dict)."""
    return _literal(_parse(text.strip(), "eval").body)


class PyCallFormat(CallFormat):
    """Calls as Python keyword-argument calls; names may be dotted (``math.factorial``).

    Parsing also accepts ``;`` between calls and a list of calls ``[f(a=1), g(b=2)]``.
    """

    name = "pycall"
    open = ""
    close = ""
    separator = "\n"

    def body(self, call: ToolCall) -> str:
        _check_name(call.name, "tool name", dotted=True)
        arguments = []
        for key, value in call.arguments.items():
            _check_name(key, "argument name", dotted=False)
            arguments.append(f"{key}={to_literal(value)}")
        return f"{call.name}({', '.join(arguments)})"

    def parse(self, text: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for statement in _parse(text.strip(), "exec").body:
            if not isinstance(statement, ast.Expr):
                raise CallFormatError(f"expected a call, got {_source(statement)!r}")
            nodes = statement.value
            items = nodes.elts if isinstance(nodes, (ast.List, ast.Tuple)) else [nodes]
            calls.extend(_call(node) for node in items)
        return calls


def _check_name(name: str, what: str, dotted: bool) -> None:
    parts = name.split(".") if dotted else [name]
    for part in parts:
        # Python NFKC-normalises identifiers, so only normal forms read back unchanged.
        if (
            not part.isidentifier()
            or keyword.iskeyword(part)
            or unicodedata.normalize("NFKC", part) != part
        ):
            raise CallFormatError(f"{what} {name!r} cannot be written as a Python call")


def _parse(text: str, mode: str) -> Any:
    try:
        with warnings.catch_warnings():
            # Invalid escapes such as "\d" only warn; the literal is still well defined.
            warnings.simplefilter("ignore")
            return ast.parse(text, mode=mode)
    except (SyntaxError, ValueError) as exc:
        raise CallFormatError(f"not valid Python call syntax: {exc}") from None
    except (MemoryError, RecursionError):  # CPython's parser on very deeply nested text
        raise CallFormatError("not valid Python call syntax: nested too deeply") from None


def _call(node: ast.expr) -> ToolCall:
    if not isinstance(node, ast.Call):
        raise CallFormatError(f"expected a call, got {_source(node)!r}")
    name = _dotted_name(node.func)
    if node.args:
        raise CallFormatError(f"positional argument in call to {name}: use key=value")
    arguments: dict[str, Any] = {}
    for item in node.keywords:
        if item.arg is None:
            raise CallFormatError(f"'**' argument in call to {name}: use key=value")
        if item.arg in arguments:
            raise CallFormatError(f"argument {item.arg!r} repeated in call to {name}")
        arguments[item.arg] = _literal(item.value)
    return ToolCall(name, arguments)


def _dotted_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr}"
    raise CallFormatError(f"a tool name must be a dotted name, got {_source(node)!r}")


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, (bool, int, float, str))
    ):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        number = node.operand.value if isinstance(node.operand, ast.Constant) else None
        # Signs apply to numbers only; -True is valid Python but not a JSON value.
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return -number if isinstance(node.op, ast.USub) else number
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            key = None if key_node is None else _literal(key_node)
            if not isinstance(key, str):
                raise CallFormatError(f"dict keys must be strings, got {_source(key_node)!r}")
            result[key] = _literal(value_node)
        return result
    raise CallFormatError(f"not a literal value: {_source(node)!r}")


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _source(node: ast.AST | None) -> str:
    if node is None:
        return "**"
    try:
        return ast.unparse(node)
    except RecursionError:
        return f"<a {type(node).__name__} nested too deeply>"
