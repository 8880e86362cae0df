"""Shared fixtures: the real embedded model, loaded once per test session."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
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


#: Cache folders a test session shares with the user's cache root (built or measured once:
#: the model zoo, the simulation model, the engine's numerics and costs). Prompt states
#: are not among them: each test session saves its own.
SHARED_CACHES = ("zoo", "sim", "numerics", "costs")
#: Entries of the user's cache root a test session never sees.
PRIVATE_CACHES = ("prompt-states", "prefix-states")


def pytest_configure(config: pytest.Config) -> None:
    """Point every process of this test session (pytest's and the ones tests start) at a
    cache root of its own, so no test restores a prompt state the user or an earlier test
    session saved, while the test processes of one session share theirs as a user's do.
    The root links the user's built models and measured numerics (see `SHARED_CACHES`)."""
    from toolweave.disk_cache import CACHE_DIR_ENV, cache_root

    user_root = cache_root()
    root = Path(tempfile.mkdtemp(prefix="toolweave-tests-"))
    for name in SHARED_CACHES:
        (user_root / name).mkdir(parents=True, exist_ok=True)  # built there, kept there
    if user_root.is_dir():
        for entry in user_root.iterdir():
            if entry.name not in PRIVATE_CACHES:
                os.symlink(entry, root / entry.name)
    config.stash[_USER_ROOT] = os.environ.get(CACHE_DIR_ENV)
    config.stash[_SESSION_ROOT] = root
    os.environ[CACHE_DIR_ENV] = str(root)


def pytest_unconfigure(config: pytest.Config) -> None:
    from toolweave.disk_cache import CACHE_DIR_ENV

    root = config.stash.get(_SESSION_ROOT, None)
    if root is None:
        return
    previous = config.stash[_USER_ROOT]
    if previous is None:
        os.environ.pop(CACHE_DIR_ENV, None)
    else:
        os.environ[CACHE_DIR_ENV] = previous
    shutil.rmtree(root, ignore_errors=True)  # links and this session's prompt states


_USER_ROOT = pytest.StashKey[str | None]()
_SESSION_ROOT = pytest.StashKey[Path]()


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
