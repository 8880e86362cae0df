"""The JSON-Schema subset the value compiler understands, and what it hands to ``%json``.

Keywords fall in three groups: annotations (ignored: they do not constrain a value, or
the compiler does not enforce them), keywords the compiler models itself, and
`DELEGATED` keywords it leaves to llguidance's ``%json``. The helpers here read a
schema; they never build grammar text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from toolweave.errors import ConstraintError

__all__ = ["ANNOTATIONS", "DELEGATED", "bounded_schema", "lower_bound", "resolve_ref", "types_of"]

TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")

#: Keywords ignored: annotations, and constraints no grammar here enforces.
ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "$schema", "$id", "$defs",
     "definitions", "deprecated", "readOnly", "writeOnly", "x-guidance", "uniqueItems",
     "multipleOf", "maximum", "exclusiveMaximum", "contentMediaType", "contentEncoding"}
)  # fmt: skip
#: Keywords whose values the compiler leaves to llguidance's %json.
DELEGATED = frozenset(
    {"pattern", "format", "not", "if", "then", "else", "prefixItems", "patternProperties",
     "propertyNames", "dependentRequired", "dependentSchemas", "dependencies", "contains",
     "minProperties", "maxProperties", "unevaluatedProperties", "unevaluatedItems",
     "$dynamicRef", "$recursiveRef"}
)  # fmt: skip

# Keywords that imply a type when "type" is missing, most telling first.
_IMPLIED_TYPES = (
    ("object", ("properties", "required", "additionalProperties")),
    ("array", ("items", "minItems", "maxItems")),
    ("string", ("minLength", "maxLength")),
    ("number", ("minimum", "exclusiveMinimum")),
)
# Keywords holding a map of names to subschemas, and keywords holding data.
_SCHEMA_MAPS = frozenset(
    {"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"}
)
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "required", "x-guidance"})


def types_of(schema: Mapping[str, Any]) -> list[str]:
    """The schema's types; without "type", the one its keywords imply, else ["any"]."""
    kind = schema.get("type")
    if kind is None:
        implied = [t for t, keys in _IMPLIED_TYPES if any(k in schema for k in keys)]
        return implied[:1] or ["any"]
    kinds = [kind] if isinstance(kind, str) else kind
    if not isinstance(kinds, list) or not kinds or any(k not in TYPES for k in kinds):
        raise ConstraintError(f"unknown schema type {kind!r}")
    return kinds


def lower_bound(schema: Mapping[str, Any], *, integer: bool) -> float | None:
    """The least value allowed as far as it decides the sign (and, for integers, zero)."""
    bounds: list[float] = []
    minimum: Any = schema.get("minimum")
    exclusive: Any = schema.get("exclusiveMinimum")
    if exclusive is True:  # draft 4: a flag on minimum
        minimum, exclusive = None, minimum
    if _is_number(minimum):
        bounds.append(minimum)
    if _is_number(exclusive):
        bounds.append(math.floor(exclusive) + 1 if integer else exclusive)
    return max(bounds) if bounds else None


def resolve_ref(root: Mapping[str, Any], pointer: str) -> Any:
    """The subschema a local ``$ref`` (``#/$defs/Name``) points to in `root`."""
    if not pointer.startswith("#"):
        raise ConstraintError(f"only local $refs can be constrained, got {pointer!r}")
    node: Any = root
    for part in pointer[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise ConstraintError(f"$ref {pointer!r} points nowhere")
    return node


def bounded_schema(node: Any, max_chars: int, max_items: int) -> Any:
    """A copy of a schema for %json: objects closed, strings and arrays bounded."""
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            out[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {k: bounded_schema(v, max_chars, max_items) for k, v in value.items()}
        elif isinstance(value, list):
            out[key] = [bounded_schema(sub, max_chars, max_items) for sub in value]
        else:
            out[key] = bounded_schema(value, max_chars, max_items)
    kinds = out.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "object" in kinds or "properties" in out:
        out.setdefault("additionalProperties", False)
    if "string" in kinds and not {"enum", "const"} & out.keys():
        out.setdefault("maxLength", max_chars)
    if "array" in kinds:
        out.setdefault("maxItems", max(max_items, int(out.get("minItems", 0))))
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
