"""The one call grammar every toolweave mode shares, as llguidance Lark text.

A response is one or more calls in the chosen format; each call names one of the given
tools and carries its arguments as compact JSON: required arguments first in schema
order, then any optional ones in schema order. Argument values are compiled by
`toolweave.grammar.value`, so every string, array and number is bounded. `value_grammar`
is the grammar of one argument value, for decoders that write values one at a time.
Building the text is pure; the matcher that runs it lives in `toolweave.native.constraints`.

Besides the named JSON formats (`JSON_LAYOUTS`), a syntax read off a chat template
(`toolweave.formats.SyntaxFormat`) has a call grammar when its arguments are one compact
JSON object (layouts `json` and `named-json`, `SYNTAX_LAYOUTS`) and its markers are
fixed text: the response's ``open``, calls joined by ``separator``, ``close``; each call
``call_open`` + the call as the format writes it, the tool name fixed and the arguments
object compiled as for the named formats + ``call_close`` (`syntax_grammar_gap` says why
another syntax has none). Where a call carries its position or an id (``"0"``,
``"call00001"``, in its object or its markers), each position has its own rule, the id
written as fixed text.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolweave.errors import ConstraintError
from toolweave.formats import CallFormat
from toolweave.formats.base import dump_json
from toolweave.formats.syntax import CALL_ID, INDEX, CallSyntax, SyntaxFormat, slots
from toolweave.grammar.lexemes import Flavor, lark_literal
from toolweave.grammar.syntax_call import RAW_LAYOUTS, marker_text, raw_call_rule
from toolweave.grammar.value import MAX_ARRAY_ITEMS, MAX_STRING_CHARS, compile_value
from toolweave.toolspec import ToolCall, ToolSpec

__all__ = [
    "JSON_LAYOUTS",
    "MAX_ARRAY_ITEMS",
    "MAX_POSITIONAL_CALLS",
    "MAX_STRING_CHARS",
    "SYNTAX_LAYOUTS",
    "arguments_schema",
    "call_grammar",
    "lark_literal",
    "syntax_grammar_gap",
    "value_grammar",
    "value_schema",
]

#: For the JSON formats: the key holding the tool name and the key holding the arguments.
JSON_LAYOUTS: Mapping[str, tuple[str, str]] = {
    "hermes": ("name", "arguments"),
    "json": ("name", "arguments"),
    "llama3": ("name", "parameters"),
}

#: Layouts of a detected `CallSyntax` the call grammar covers: arguments as one JSON
#: object, or one element per argument (`toolweave.grammar.syntax_call`).
SYNTAX_LAYOUTS: tuple[str, ...] = ("json", "named-json", *RAW_LAYOUTS)

#: Most calls of one response in a syntax whose calls carry their position or id (a
#: grammar rule per position; `max_calls=None` means this many).
MAX_POSITIONAL_CALLS = 32

#: The one argument of the call serialized to find the text around the arguments object.
_SENTINEL = "__toolweave_arguments__"

_COMPACT = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


def _close_objects(schema: Any, max_chars: int = MAX_STRING_CHARS) -> Any:
    # Without additionalProperties=false the model could invent argument names.
    if isinstance(schema, dict):
        out = {k: _close_objects(v, max_chars) for k, v in schema.items()}
        if out.get("type") == "object" or "properties" in out:
            out.setdefault("additionalProperties", False)
        if out.get("type") == "string" and not {"enum", "const", "pattern", "format"} & out.keys():
            out["maxLength"] = min(int(out.get("maxLength", max_chars)), max_chars)
        if out.get("type") == "array":
            out["maxItems"] = min(int(out.get("maxItems", MAX_ARRAY_ITEMS)), MAX_ARRAY_ITEMS)
        return out
    if isinstance(schema, list):
        return [_close_objects(v, max_chars) for v in schema]
    return schema


def _canonical_parameters(spec: ToolSpec) -> dict[str, Any]:
    """A copy of the tool's parameters with properties in canonical argument order."""
    params = copy.deepcopy(dict(spec.parameters))
    props = params.get("properties", {})
    params["properties"] = {k: props[k] for k in spec.argument_order if k in props}
    params["type"] = "object"
    if spec.required:
        params["required"] = list(spec.required)
    else:
        params.pop("required", None)
    return params


def arguments_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's parameters as JSON Schema for the `grammar` mode: canonical order,
    closed, compact (the call grammar itself compiles them with `compile_value`)."""
    params = _close_objects(_canonical_parameters(spec))
    params["x-guidance"] = dict(_COMPACT)
    return params


def value_schema(spec: ToolSpec, key: str) -> dict[str, Any]:
    """The schema of one argument value, closed and compact (for per-value sub-grammars)."""
    schema = _close_objects(copy.deepcopy(dict(spec.property_schema(key))))
    schema["x-guidance"] = dict(_COMPACT)
    return schema


def _json_call_rule(fmt: CallFormat, spec: ToolSpec, args_rule: str) -> str:
    name_key, args_key = JSON_LAYOUTS[fmt.name]
    head = "{" + json.dumps(name_key) + ":" + json.dumps(spec.name, ensure_ascii=False)
    head += "," + json.dumps(args_key) + ":"
    return f"{lark_literal(head)} {args_rule} {lark_literal('}')}"


def syntax_grammar_gap(syntax: CallSyntax) -> str | None:
    """Why `syntax` has no call grammar yet (None: it has one)."""
    if syntax.layout not in SYNTAX_LAYOUTS:
        return f"the {syntax.layout} call layout has no call grammar yet"
    if syntax.arguments_as_string:
        return "arguments written as a JSON string have no call grammar yet"
    if any(INDEX in m or CALL_ID in m for m in (syntax.open, syntax.close, syntax.separator)):
        return "markers of the whole response holding a call's index or id have no call grammar"
    if syntax.layout in RAW_LAYOUTS and syntax.positional:
        return (
            f"markers holding the call's index or id have no call grammar yet in the "
            f"{syntax.layout} layout"
        )
    return None


def _around_arguments(fmt: SyntaxFormat, name: str, index: int = 0) -> tuple[str, str]:
    """The text of one call of tool `name` at position `index` before and after its
    arguments object (the markers of the call included, those of the response not)."""
    s = fmt.syntax
    body = fmt.body(ToolCall(name, {_SENTINEL: 0}), index)
    marker = dump_json({_SENTINEL: 0})
    if body.count(marker) != 1:  # pragma: no cover - the arguments are written once
        raise ConstraintError(f"cannot find the arguments in a {fmt.name} call of {name!r}")
    i = body.index(marker)
    return slots(s.call_open, index) + body[:i], body[i + len(marker) :] + slots(
        s.call_close, index
    )


def _json_call_expr(
    fmt: SyntaxFormat, name: str, root: str, index: int, special: Mapping[str, int] | None
) -> str:
    head, tail = _around_arguments(fmt, name, index)
    pieces = [marker_text(head, special)] if head else []
    pieces.append(root)
    if tail:
        pieces.append(marker_text(tail, special))
    return " ".join(pieces)


def _positional_calls(
    fmt: SyntaxFormat,
    tools: Sequence[ToolSpec],
    roots: Sequence[str],
    count: int,
    sep: str,
    special: Mapping[str, int] | None,
) -> list[str]:
    """Rules ``calls`` .. of a syntax writing each call by its position (its id): call
    ``p`` is rule ``c<p>``, and ``r<p>`` is the separator, call ``p`` and what may
    follow it. The arguments rules are shared by every position."""
    lines = []
    for p in range(count):
        options = " | ".join(
            _json_call_expr(fmt, spec.name, roots[i], p, special) for i, spec in enumerate(tools)
        )
        lines.append(f"c{p}: {options}")
        rest = f" r{p + 1}?" if p + 1 < count else ""
        lines.append(f"r{p}: {sep if p else ''}c{p}{rest}")
    return lines


def _syntax_grammar(
    fmt: SyntaxFormat,
    tools: Sequence[ToolSpec],
    max_calls: int | None,
    special: Mapping[str, int] | None = None,
) -> str:
    s = fmt.syntax
    gap = syntax_grammar_gap(s)
    if gap is not None:
        raise ConstraintError(f"call syntax {fmt.name!r}: {gap}")
    if not s.multiple:
        max_calls = 1
    sep = f"{marker_text(s.separator, special)} " if s.separator else ""
    calls = "call"
    if max_calls is None:
        calls = f"call ({sep}call)*"
    elif max_calls > 1:
        calls = f"call ({sep}call){{0,{max_calls - 1}}}"
    opening = f"{marker_text(s.open, special)} " if s.open else ""
    closing = f" {marker_text(s.close, special)}" if s.close else ""
    if s.positional:
        lines = [f"start: {opening}r0{closing}"]
        roots = []
        for i, spec in enumerate(tools):
            params = _canonical_parameters(spec)
            root, rules = compile_value(params, rule_prefix=f"a{i}", root=params)
            roots.append(root)
            lines.extend(rules)
        count = MAX_POSITIONAL_CALLS if max_calls is None else max_calls
        lines.extend(_positional_calls(fmt, tools, roots, count, sep, special))
        return "\n".join(lines) + "\n"
    lines = [f"start: {opening}{calls}{closing}"]
    lines.append("call: " + " | ".join(f"t{i}" for i in range(len(tools))))
    for i, spec in enumerate(tools):
        if s.layout in RAW_LAYOUTS:
            expr, rules = raw_call_rule(fmt, spec, i, special)
            lines.append(f"t{i}: {expr}")
            lines.extend(rules)
            continue
        params = _canonical_parameters(spec)
        root, rules = compile_value(params, rule_prefix=f"a{i}", root=params)
        lines.append(f"t{i}: " + _json_call_expr(fmt, spec.name, root, 0, special))
        lines.extend(rules)
    return "\n".join(lines) + "\n"


def call_grammar(
    fmt: CallFormat,
    tools: Sequence[ToolSpec],
    *,
    max_calls: int | None = 1,
    special_tokens: Mapping[str, int] | None = None,
) -> str:
    """Lark grammar of a response holding 1..max_calls calls (None: unbounded; a syntax
    writing one call per message, one). `special_tokens` (a `SyntaxFormat` only: a
    special token's text -> its id) makes each occurrence of that text in the syntax's
    markers match the token itself, which is how a tokenizer writes it (Gemma 4's
    ``<|tool_call>``)."""
    if not tools:
        raise ConstraintError("a call grammar needs at least one tool")
    if isinstance(fmt, SyntaxFormat):
        if max_calls is not None and max_calls < 1:
            raise ConstraintError("max_calls must be at least 1")
        return _syntax_grammar(fmt, tools, max_calls, special_tokens)
    if fmt.name not in JSON_LAYOUTS:
        raise ConstraintError(
            f"format {fmt.name!r} has no call grammar yet; use one of {sorted(JSON_LAYOUTS)}"
        )
    if max_calls is not None and max_calls < 1:
        raise ConstraintError("max_calls must be at least 1")
    lines: list[str] = []
    if max_calls == 1:
        lines.append("start: call")
    elif max_calls is None:
        lines.append(f"start: call ({lark_literal(fmt.separator)} call)*")
    else:
        lines.append(f"start: call ({lark_literal(fmt.separator)} call){{0,{max_calls - 1}}}")
    body = " | ".join(f"t{i}" for i in range(len(tools)))
    opening = f"{lark_literal(fmt.open)} " if fmt.open else ""
    closing = f" {lark_literal(fmt.close)}" if fmt.close else ""
    lines.append(f"call: {opening}body{closing}")
    lines.append(f"body: {body}")
    for i, spec in enumerate(tools):
        params = _canonical_parameters(spec)
        root, rules = compile_value(params, rule_prefix=f"a{i}", root=params)
        lines.append(f"t{i}: {_json_call_rule(fmt, spec, root)}")
        lines.extend(rules)
    return "\n".join(lines) + "\n"


def value_grammar(
    spec: ToolSpec, key: str, *, suffix: str | Sequence[str] = "", flavor: Flavor = "json"
) -> str:
    """Lark grammar of argument `key` of `spec` alone, then the literal text `suffix`
    (or one of several alternatives: what may follow the value in a call).

    The value is written as in the call grammar (compact JSON, or a Python literal with
    ``flavor="python"``). `ToolSpecError` if the tool has no such argument,
    `ConstraintError` if the value cannot be constrained in that flavor.
    """
    schema = spec.property_schema(key)
    root, rules = compile_value(schema, flavor=flavor, rule_prefix="v", root=spec.parameters)
    options = [suffix] if isinstance(suffix, str) else list(suffix)
    options = [o for o in options if o]
    tail = ""
    if options:
        tail = " (" + " | ".join(lark_literal(o) for o in options) + ")"
    return "\n".join([f"start: {root}{tail}", *rules]) + "\n"
