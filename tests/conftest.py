"""Shared fixtures: the real embedded model, loaded once per test session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolweave.models import default_model_path
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolSpec, load_tools_file

ROOT = Path(__file__).resolve().parent.parent
#: Test folders, each a marker of the same name (`pytest -m unit` runs the fast ones).
GROUPS = ("unit", "model", "integration", "bench")
TOOLS_FILE = ROOT / "examples" / "tools" / "assistant_tools.json"
QUERIES_FILE = ROOT / "adapters" / "bench" / "data" / "tool_queries.json"


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    """SmolLM2-135M with room for long tool prompts and 16 sequences."""
    with Engine(default_model_path(), n_ctx=8192, n_seq_max=16) as eng:
        yield eng


@pytest.fixture(scope="session")
def assistant_tools() -> tuple[ToolSpec, ...]:
    return load_tools_file(TOOLS_FILE)


@pytest.fixture(scope="session")
def tool_queries() -> list[dict[str, str]]:
    data: list[dict[str, str]] = json.loads(QUERIES_FILE.read_text(encoding="utf-8"))
    return data


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = Path(str(item.path)).relative_to(ROOT / "tests").parts[0]
        if group in GROUPS:
            item.add_marker(group)
