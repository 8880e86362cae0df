"""toolweave's cache directories: sizes, the limit's scope, atomic writes, LRU eviction,
and the numerics file reader (no model is loaded)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolweave.disk_cache import (
    CACHE_DIR_ENV,
    CACHE_LIMIT_ENV,
    DEFAULT_CACHE_LIMIT,
    atomic_write,
    cache_root,
    enforce_cache_limit,
    limit_scope,
    parse_size,
    resolve_cache_limit,
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(CACHE_LIMIT_ENV, raising=False)
    return tmp_path / "cache"


def test_sizes_parse_and_the_limit_resolves(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_size("2GiB") == 2 << 30
    assert parse_size("500 MB") == 500_000_000
    assert parse_size("1.5g") == 1_500_000_000
    assert parse_size("4096") == 4096
    assert parse_size("none") is None and parse_size("Unlimited") is None
    for bad in ("", "2 parsecs", "-1GB", "GiB"):
        with pytest.raises(ValueError, match="is not a size"):
            parse_size(bad)
    assert resolve_cache_limit() == DEFAULT_CACHE_LIMIT == 4 << 30
    assert resolve_cache_limit(123) == 123 and resolve_cache_limit("1KiB") == 1024
    monkeypatch.setenv(CACHE_LIMIT_ENV, "2GiB")
    assert resolve_cache_limit() == 2 << 30
    assert resolve_cache_limit("off") is None  # an argument beats the variable


def test_a_bad_limit_variable_warns_and_keeps_the_default(
    root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(CACHE_LIMIT_ENV, "lots")
    with caplog.at_level(logging.WARNING, "toolweave.cache"):
        assert resolve_cache_limit() == DEFAULT_CACHE_LIMIT
    (record,) = caplog.records
    assert CACHE_LIMIT_ENV in record.getMessage() and "\n" not in record.getMessage()


def test_directories_under_the_root_share_one_limit(root: Path, tmp_path: Path) -> None:
    assert cache_root() == root
    shared = limit_scope(root / "prompt-states")
    assert shared == [(root / n).resolve() for n in ("prompt-states", "prefix-states", "numerics")]
    assert limit_scope(root / "prefix-states" / "abc") == shared
    assert limit_scope(root / "mine") == [*shared, (root / "mine").resolve()]
    assert limit_scope(tmp_path / "elsewhere") == [(tmp_path / "elsewhere").resolve()]


def test_atomic_write_replaces_whole_files_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "a" / "state.twstate"
    assert atomic_write(target, b"old") == 3
    assert atomic_write(target, [b"new ", b"content"]) == 11
    assert target.read_bytes() == b"new content"

    def fail(fh: object) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(target, fail)
    assert target.read_bytes() == b"new content"
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.twstate"]


_CHILD = """
import sys, time
from toolweave.disk_cache import atomic_write
def chunks():
    yield b"TWSTATE2" + b"partial" * 1000
    print("writing", flush=True)
    time.sleep(60)
    yield b"never"
atomic_write(sys.argv[1], chunks())
"""


def test_a_write_killed_midway_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "prompt-states" / "k.twstate"
    atomic_write(target, b"the old, complete file")
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(target)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "writing"  # mid-write now
        child.kill()
    finally:
        child.wait(timeout=30)
    assert target.read_bytes() == b"the old, complete file"
    (tmp,) = [p for p in target.parent.iterdir() if p != target]
    assert tmp.name.startswith(".k.twstate.") and tmp.name.endswith(".tmp")
    # A fresh leftover may be another process's write in progress: kept; an old one goes.
    assert enforce_cache_limit([target.parent], None).deleted == ()
    old = time.time() - 7200
    os.utime(tmp, (old, old))
    assert enforce_cache_limit([target.parent], None).deleted == (tmp,)
    assert [p.name for p in target.parent.iterdir()] == ["k.twstate"]


def _file(path: Path, size: int, age_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    t = time.time() - age_s
    os.utime(path, (t, t))
    return path


def test_the_limit_evicts_least_recently_used_state_files_across_models(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    prompts = root / "prompt-states"
    prefixes = root / "prefix-states"
    oldest = _file(prompts / "a.twstate", 400, 500)
    model_a = _file(prefixes / "model-a" / "b.twstate", 300, 400)
    legacy = _file(prefixes / "model-b" / "c.state", 300, 300)
    recent = _file(prompts / "d.twstate", 300, 200)
    newest = _file(prefixes / "model-b" / "e.twstate", 200, 100)
    bound = _file(root / "numerics" / "bound.json", 50, 1000)  # counted, never evicted
    outside = _file(root / "bfcl-data" / "x.twstate", 5000, 2000)  # not a state directory
    dirs = limit_scope(prompts)
    with caplog.at_level(logging.INFO, "toolweave.cache"):
        done = enforce_cache_limit(dirs, 600)
    assert set(done.deleted) == {p.resolve() for p in (oldest, model_a, legacy)}
    assert done.freed == 1000 and done.total == 550 <= 600
    assert all(p.is_file() for p in (recent, newest, bound, outside))
    (line,) = [r.getMessage() for r in caplog.records]
    assert "evicted 3 least recently used files" in line
    assert enforce_cache_limit(dirs, 600).deleted == ()  # under the limit: nothing goes
    assert enforce_cache_limit(dirs, None).deleted == ()


def test_the_numerics_file_is_checked_before_it_is_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from toolweave.native import numerics

    bound = numerics.LogitBound(0.5, 1.5, (300,), (2, 4), 2, 2, 12.0)
    path = tmp_path / "k.json"
    numerics._write(path, "key", bound)
    assert numerics._read(path, "key") == bound
    assert numerics._read(tmp_path / "missing.json", "key") is None
    good = json.loads(path.read_text())
    cases = {
        "another model": ({**good}, "other-key"),
        "future format": ({**good, "format": "toolweave-logit-bound-v9"}, "key"),
        "malformed": ({**good, "max_delta": "0.5"}, "key"),
        "negative": ({**good, "max_delta": -1.0}, "key"),
    }
    for name, (data, key) in cases.items():
        path.write_text(json.dumps(data))
        caplog.clear()
        with caplog.at_level(logging.WARNING, "toolweave.numerics"):
            assert numerics._read(path, key) is None, name
        assert len(caplog.records) == 1, name
    for raw in (b"\x00\x01\x02\x03\x04", b'{"format": "toolweave-log', b"[]"):
        path.write_bytes(raw)
        assert numerics._read(path, "key") is None


def test_a_damaged_toolrag_file_is_one_clear_error(tmp_path: Path) -> None:
    import numpy as np

    from toolweave.prompting.toolrag_files import (
        FORMAT,
        decode_matrix,
        encode_matrix,
        read_file,
        write_file,
    )

    matrix = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = tmp_path / "selector.json"
    write_file(path, {"format": FORMAT, "kind": "tool-selector", "m": encode_matrix(matrix)})
    data = read_file(path, "tool-selector")
    assert np.array_equal(decode_matrix(data["m"]), matrix)
    short = {**data["m"], "shape": [3, 3]}
    for bad in (short, {"shape": [2, 3], "float32": "@@@"}, {"shape": "x"}):
        with pytest.raises(ValueError, match="malformed matrix"):
            decode_matrix(bad)
    with pytest.raises(ValueError, match="not a example-store file"):
        read_file(path, "example-store")
    path.write_bytes(b"\x00\x01\x02\x03\x04")
    with pytest.raises(ValueError, match=r"selector\.json: not a ToolRAG file"):
        read_file(path, "tool-selector")
