"""What a prompt tells the model about a tool: its name, description and argument schema,
without what only the runtime reads.

A tool's spec carries more than the model needs to call it. MCP ``annotations``
(``readOnlyHint``, ``destructiveHint``, ...) are hints for the client, which classifies
and gates the tool by them; schemas generated from Python signatures (FastMCP, pydantic)
title every property with its own name ("Note Id" for ``note_id``) and the whole object
after the function ("delete_noteArguments"). In a tool prompt those are about a quarter
of the tokens of a typical MCP tool, every one of them prefilled and attended over on
every later step. The listing drops them; a title that says something the name does not
stays, as does every other keyword.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from toolweave.toolspec import ToolSpec

__all__ = ["listed_parameters", "listed_tool"]

# Keywords whose value is one subschema, a list of them, or a map of name -> subschema.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_NOT_WORD = re.compile(r"[^0-9a-z]+")


def listed_tool(spec: ToolSpec) -> dict[str, Any]:
    """The ``{"name", "description", "parameters"}`` dict a tool prompt lists."""
    return {
        "name": spec.name,
        "description": spec.description,
        "parameters": listed_parameters(spec.parameters),
    }


def listed_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an argument schema without its own title (the tool is named already) and
    without property titles that only repeat the property's name."""
    out = _strip(parameters, None)
    out.pop("title", None)
    return out


def _strip(schema: Mapping[str, Any], name: str | None) -> dict[str, Any]:
    """`schema` copied with its subschemas; its title dropped when it spells `name`."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and name is not None and _same_words(value, name):
            continue
        if key in _ONE and isinstance(value, Mapping):
            out[key] = _strip(value, None)
        elif key in _LIST and isinstance(value, list):
            out[key] = [_strip(v, None) if isinstance(v, Mapping) else v for v in value]
        elif key in _MAP and isinstance(value, Mapping):
            named = key == "properties"
            out[key] = {
                k: _strip(v, k if named else None) if isinstance(v, Mapping) else v
                for k, v in value.items()
            }
        else:
            out[key] = copy.deepcopy(value)  # the spec's own lists stay the spec's
    return out


def _same_words(title: object, name: str) -> bool:
    """Whether `title` is `name` written as words ("Note Id", "noteId", "note-id")."""
    if not isinstance(title, str):
        return False
    return _NOT_WORD.sub("", title.lower()) == _NOT_WORD.sub("", name.lower())
