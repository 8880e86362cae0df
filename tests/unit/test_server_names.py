"""Server names in an `MCPHub`: derived names are made unique, explicit ones must be."""

from __future__ import annotations

import pytest

from toolweave.adapters.mcp.config import ServerConfig
from toolweave.adapters.mcp.hub import ServerNameError, unique_server_names
from toolweave.errors import ToolweaveError


def names(*texts: str) -> list[str]:
    return [c.name for c in unique_server_names([ServerConfig.parse(t) for t in texts])]


def test_parse_records_whether_the_name_was_derived() -> None:
    assert ServerConfig.parse("python -m notes").name_derived is True
    assert ServerConfig.parse("notes=python -m notes").name_derived is False
    assert ServerConfig.parse("python -m notes", name="mine").name_derived is False
    assert ServerConfig(name="x", command=["x"]).name_derived is False
    assert ServerConfig.parse("python -m notes", trust_annotations=False).trust_annotations is False


def test_derived_names_get_a_suffix_and_step_aside_for_explicit_ones() -> None:
    assert names("python -m notes", "python -m notes", "python -m notes") == [
        "notes",
        "notes_2",
        "notes_3",
    ]
    assert names("python -m notes", "notes=python other.py") == ["notes_2", "notes"]
    assert names("python -m notes", "notes_2=x", "python -m notes") == [
        "notes",
        "notes_2",
        "notes_3",
    ]


def test_the_same_explicit_name_twice_is_an_error() -> None:
    with pytest.raises(
        ServerNameError, match="tool server 'a': two servers have this name"
    ) as info:
        names("a=python one.py", "a=python two.py")
    assert isinstance(info.value, ValueError) and isinstance(info.value, ToolweaveError)
