"""The one call grammar every toolweave mode shares, as llguidance Lark text.

A response is one or more calls in the chosen format; each call names one of the given
tools and carries its arguments as compact JSON: required arguments first in schema
order, then any optional ones in schema order. Building the text is pure; the matcher
that runs it lives in `toolweave.native.constraints`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolweave.errors import ConstraintError
from toolweave.formats import CallFormat
from toolweave.toolspec import ToolSpec

__all__ = ["JSON_LAYOUTS", "arguments_schema", "call_grammar", "lark_literal", "value_schema"]

#: For the JSON formats: the key holding the tool name and the key holding the arguments.
JSON_LAYOUTS: Mapping[str, tuple[str, str]] = {
    "hermes": ("name", "arguments"),
    "json": ("name", "arguments"),
    "llama3": ("name", "parameters"),
}

_COMPACT = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


def lark_literal(text: str) -> str:
    """A Lark string literal matching exactly `text`."""
    return json.dumps(text, ensure_ascii=False)


def _close_objects(schema: Any) -> Any:
    # Without additionalProperties=false the model could invent argument names.
    if isinstance(schema, dict):
        out = {k: _close_objects(v) for k, v in schema.items()}
        if out.get("type") == "object" or "properties" in out:
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(schema, list):
        return [_close_objects(v) for v in schema]
    return schema


def arguments_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's parameters as the call grammar sees them: canonical order, closed, compact."""
    params = copy.deepcopy(dict(spec.parameters))
    props = params.get("properties", {})
    ordered = {k: props[k] for k in spec.argument_order if k in props}
    params["properties"] = ordered
    params["type"] = "object"
    if spec.required:
        params["required"] = list(spec.required)
    else:
        params.pop("required", None)
    params = _close_objects(params)
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


def call_grammar(
    fmt: CallFormat, tools: Sequence[ToolSpec], *, max_calls: int | None = 1
) -> str:
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
        lines.append(f"t{i}: {_json_call_rule(fmt, spec, f'a{i}')}")
        lines.append(f"a{i}: %json {json.dumps(arguments_schema(spec), ensure_ascii=False)}")
    return "\n".join(lines) + "\n"
