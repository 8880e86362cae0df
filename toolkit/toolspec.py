"""Tool specifications and tool calls.

A `ToolSpec` is one tool as the model sees it: a name, a one-line description and a
JSON Schema object describing the arguments. `ToolSpec.from_dict` accepts the shapes
found in the wild (plain, OpenAI function wrapper, BFCL's ``"type": "dict"`` schemas)
and normalises them; anything it cannot make sense of raises `ToolSpecError`.

Every decoding mode writes arguments in one canonical order: required arguments in
schema order, then optional ones in schema order (`ToolSpec.argument_order`).
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from toolweave.errors import ToolSpecError
from toolweave.memo import BoundedMemo

__all__ = ["ToolCall", "ToolSpec", "load_tools", "load_tools_file"]

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")

# BFCL writes Python type names where JSON Schema expects its own; None drops the type.
_BFCL_TYPES: dict[str, str | None] = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "any": None,
}

# Keywords whose values are data, not subschemas: a {"type": "dict"} in there is a value.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool by name.

    ``arguments`` is a plain dict in the order the call was written; treat it as
    read-only (the dataclass is frozen, the dict cannot be).
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    # Hash by name only: equal calls have equal names, and dict fields are unhashable.
    def __hash__(self) -> int:
        return hash(self.name)

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"name": ..., "arguments": {...}}`` as a fresh, JSON-ready dict."""
        return {"name": self.name, "arguments": copy.deepcopy(dict(self.arguments))}


@dataclass(frozen=True)
class ToolSpec:
    """A validated tool definition; build it with `ToolSpec.from_dict`.

    ``parameters`` is a normalised JSON Schema ``{"type": "object", "properties": {...},
    "required": [...], ...}``; ``required`` and ``optional`` list the argument names in
    the order of ``properties``. ``annotations`` holds MCP-style hints such as
    ``readOnlyHint``; ``read_only`` is left to a classifier. Do not mutate the dicts.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    required: tuple[str, ...]
    optional: tuple[str, ...]
    annotations: Mapping[str, Any] = field(default_factory=dict)
    read_only: bool | None = None

    # Hash by name only: tool names are unique within a catalogue.
    def __hash__(self) -> int:
        return hash(self.name)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolSpec:
        """Build a spec from a plain, OpenAI-style or BFCL-style tool dict.

        The input is not modified. Raises `ToolSpecError` naming the tool and the problem.
        """
        if not isinstance(data, Mapping):
            raise ToolSpecError(None, f"expected a JSON object, got {_kind(data)}")
        if data.get("type") == "function" and "function" in data:
            data = data["function"]
            if not isinstance(data, Mapping):
                raise ToolSpecError(None, f"'function' must be an object, got {_kind(data)}")

        name = data.get("name")
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise ToolSpecError(
                name if isinstance(name, str) and name else None,
                f"name must be a non-empty string of letters, digits, '_', '.' or '-', "
                f"got {name!r}",
            )
        description = data.get("description")
        if description is None:
            description = ""
        if not isinstance(description, str):
            raise ToolSpecError(name, f"description must be a string, got {_kind(description)}")
        annotations = data.get("annotations")
        if annotations is None:
            annotations = {}
        if not isinstance(annotations, Mapping):
            raise ToolSpecError(name, f"annotations must be an object, got {_kind(annotations)}")

        # MCP calls the schema inputSchema; accept it so MCP tool listings load as-is.
        raw = data.get("parameters", data.get("inputSchema"))
        parameters = _normalise_parameters(name, raw)
        properties: dict[str, Any] = parameters["properties"]
        required_set = set(parameters["required"])
        return cls(
            name=name,
            description=description,
            parameters=parameters,
            required=tuple(p for p in properties if p in required_set),
            optional=tuple(p for p in properties if p not in required_set),
            annotations=copy.deepcopy(dict(annotations)),
        )

    @property
    def argument_order(self) -> tuple[str, ...]:
        """Argument names in canonical order: required, then optional, each in schema order."""
        return self.required + self.optional

    def property_schema(self, name: str) -> Mapping[str, Any]:
        """Return the JSON Schema of argument ``name``; `ToolSpecError` if there is none."""
        properties: Mapping[str, Any] = self.parameters["properties"]
        if name not in properties:
            known = ", ".join(properties) or "none"
            raise ToolSpecError(self.name, f"no argument {name!r} (arguments: {known})")
        schema: Mapping[str, Any] = properties[name]
        return schema

    def canonical_arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Reorder ``arguments`` canonically; keys the schema does not know are kept last."""
        ordered = {key: arguments[key] for key in self.argument_order if key in arguments}
        ordered.update((key, value) for key, value in arguments.items() if key not in ordered)
        return ordered

    def validate_call(self, arguments: Mapping[str, Any]) -> None:
        """Check ``arguments`` against the schema; `ToolSpecError` names the failing path."""
        error = best_match(self._validator.iter_errors(dict(arguments)))
        if error is not None:
            path = "arguments" + "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
            )
            raise ToolSpecError(self.name, f"invalid call at {path}: {error.message}")

    def to_dict(self) -> dict[str, Any]:
        """Return the OpenAI-style ``{"name", "description", "parameters"}`` dict.

        ``annotations`` is included when not empty.
        """
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": copy.deepcopy(dict(self.parameters)),
        }
        if self.annotations:
            out["annotations"] = copy.deepcopy(dict(self.annotations))
        return out

    def with_read_only(self, read_only: bool | None) -> ToolSpec:
        """Return a copy with ``read_only`` set."""
        return replace(self, read_only=read_only)

    @cached_property
    def _validator(self) -> Validator:
        validator: Validator = validator_for(self.parameters)(self.parameters)
        return validator


def load_tools(data: Sequence[Mapping[str, Any]]) -> tuple[ToolSpec, ...]:
    """Build specs from a list of tool dicts; a repeated name raises `ToolSpecError`."""
    if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Sequence):
        raise ToolSpecError(None, f"expected a list of tools, got {_kind(data)}")
    specs: dict[str, ToolSpec] = {}
    for index, item in enumerate(data):
        try:
            spec = ToolSpec.from_dict(item)
        except ToolSpecError as exc:
            if exc.tool is not None:
                raise
            raise ToolSpecError(None, f"{exc.problem} (tools[{index}])") from exc
        if spec.name in specs:
            raise ToolSpecError(spec.name, f"duplicate tool name (tools[{index}])")
        specs[spec.name] = spec
    return tuple(specs.values())


def load_tools_file(path: str | os.PathLike[str]) -> tuple[ToolSpec, ...]:
    """Load specs from a JSON file holding a list of tools or ``{"tools": [...]}``."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ToolSpecError(None, f"tools file {file} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolSpecError(None, f"cannot read tools file {file}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolSpecError(
            None,
            f"tools file {file} is not valid JSON: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno}",
        ) from None
    except RecursionError:
        raise ToolSpecError(None, f"tools file {file} is nested too deeply") from None
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise ToolSpecError(
            None,
            f"tools file {file} must hold a JSON list of tools (or an object with a "
            f"'tools' list), got {_kind(data)}",
        )
    return load_tools(data)


def _normalise_parameters(name: str, raw: Any) -> dict[str, Any]:
    """Return a converted copy of a parameters schema, or raise `ToolSpecError`."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ToolSpecError(name, f"parameters must be an object, got {_kind(raw)}")
    schema: dict[str, Any] = _convert_bfcl(raw)
    kind = schema.pop("type", "object")
    if kind != "object":
        raise ToolSpecError(name, f"parameters must have type 'object', got {kind!r}")
    properties = schema.pop("properties", {})
    if not isinstance(properties, dict):
        raise ToolSpecError(
            name, f"parameters.properties must be an object, got {_kind(properties)}"
        )
    for key, sub in properties.items():
        if not isinstance(sub, dict):
            raise ToolSpecError(
                name, f"schema of argument {key!r} must be an object, got {_kind(sub)}"
            )
    required = schema.pop("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ToolSpecError(
            name, f"parameters.required must be a list of strings, got {required!r}"
        )
    missing = [r for r in required if r not in properties]
    if missing:
        raise ToolSpecError(name, f"required arguments {missing} are not in parameters.properties")

    required_set = set(required)
    normalised = {
        "type": "object",
        "properties": properties,
        "required": [key for key in properties if key in required_set],
        **schema,
    }
    try:
        _check_schema(normalised)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        raise ToolSpecError(
            name, f"parameters is not a valid JSON Schema at {where}: {exc.message}"
        ) from None
    return normalised


# Schemas already checked against their meta-schema, by canonical JSON text. A chat model
# or server builds every bound tool's spec again on each request, and the meta-schema
# check is most of that cost (about a millisecond a tool); a schema's validity depends on
# its content alone. Bounded: least recently checked out first.
_checked: BoundedMemo[bool] = BoundedMemo(1024)


def _check_schema(schema: dict[str, Any]) -> None:
    """`check_schema` of the schema's validator class, once per distinct valid schema;
    raises `SchemaError` (an invalid schema is checked again every time)."""
    try:
        key = json.dumps(schema, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # not plain JSON: check it every time
        validator_for(schema).check_schema(schema)
        return
    if _checked.get(key):
        return
    validator_for(schema).check_schema(schema)
    _checked.put(key, True)


def _convert_bfcl(node: Any) -> Any:
    """Copy a schema, rewriting BFCL type names (``dict``, ``float``, ...) to JSON Schema."""
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DATA_KEYWORDS:
                out[key] = copy.deepcopy(value)
            elif key == "type":
                kind = _convert_type(value)
                if kind is not None:
                    out[key] = kind
            else:
                out[key] = _convert_bfcl(value)
        return out
    if isinstance(node, list):
        return [_convert_bfcl(item) for item in node]
    return node


def _convert_type(kind: Any) -> Any:
    """Map one ``type`` value; None means "no type constraint"."""
    if isinstance(kind, str):
        return _BFCL_TYPES.get(kind, kind)
    if isinstance(kind, list):
        kinds = [_BFCL_TYPES.get(k, k) if isinstance(k, str) else k for k in kind]
        return None if None in kinds else kinds
    return kind


def _kind(value: Any) -> str:
    """Name a JSON value's type for error messages."""
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(
        type(value), type(value).__name__
    )
