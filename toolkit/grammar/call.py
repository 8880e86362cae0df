"""The one call grammar every toolweave mode shares, as llguidance Lark text.

A response is one or more calls in the chosen format; each call names one of the given
tools and carries its arguments as compact JSON: required arguments first in schema
order, then any optional ones in schema order. Argument values are compiled by
`toolweave.grammar.value`, so every string, array and number is bounded. `value_grammar`
is the grammar of one argument value, for decoders that write values one at a time.
Building the text is pure; the matcher that runs it lives in `toolweave.native.constraints`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolweave.errors import ConstraintError
from toolweave.formats import CallFormat
from toolweave.grammar.lexemes import Flavor, lark_literal
from toolweave.grammar.value import MAX_ARRAY_ITEMS, MAX_STRING_CHARS, compile_value
from toolweave.toolspec import ToolSpec

__all__ = [
    "JSON_LAYOUTS",
    "MAX_ARRAY_ITEMS",
    "MAX_STRING_CHARS",
    "arguments_schema",
    "call_grammar",
    "lark_literal",
    "value_grammar",
    "value_schema",
]

#: For the JSON formats: the key holding the tool name and the key holding the arguments.
JSON_LAYOUTS: Mapping[str, tuple[str, str]] = {
    "hermes": ("name", "arguments"),
    "json": ("name", "arguments"),
    "llama3": ("name", "parameters"),
}

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


def call_grammar(fmt: CallFormat, tools: Sequence[ToolSpec], *, max_calls: int | None = 1) -> str:
    """Lark grammar of a response holding 1..max_calls calls (None: unbounded)."""
    if not tools:
        raise ConstraintError("a call grammar needs at least one tool")
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
