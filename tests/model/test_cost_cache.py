"""The quick cost table kept on disk: a second engine on the same model reads the first
one's table instead of measuring; a stale, tampered, foreign or oversized file is
measured again."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from toolweave.models import default_model_path
from toolweave.native.calibration import engine_costs
from toolweave.native.cost_cache import MAX_AGE_S, MAX_BYTES, cost_file, read_costs
from toolweave.native.engine import Engine


def test_a_second_engine_reads_the_first_ones_table(tmp_path: Path) -> None:
    with Engine(default_model_path(), n_ctx=1024, n_seq_max=4) as first:
        measured = engine_costs(first, cache_dir=tmp_path)
        path = cost_file(first, tmp_path)
    assert path.is_file() and path.parent == tmp_path
    with Engine(default_model_path(), n_ctx=1024, n_seq_max=4) as second:
        t0 = time.perf_counter()
        table = engine_costs(second, cache_dir=tmp_path)
        read_ms = (time.perf_counter() - t0) * 1000
    assert table.to_dict() == measured.to_dict()
    assert read_ms < measured.measure_ms  # read, not measured again
    # Another engine size is another key: measured, and kept beside the first.
    with Engine(default_model_path(), n_ctx=1024, n_seq_max=3) as other:
        engine_costs(other, cache_dir=tmp_path)
        assert cost_file(other, tmp_path) != path
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_stale_tampered_foreign_or_huge_files_are_measured_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Engine(default_model_path(), n_ctx=1024, n_seq_max=4) as eng:
        engine_costs(eng, cache_dir=tmp_path)
        path = cost_file(eng, tmp_path)
        good = json.loads(path.read_text(encoding="utf-8"))
        assert read_costs(path, eng) is not None
        assert read_costs(path, eng, now=good["saved"] + MAX_AGE_S + 1) is None  # a day old
        caplog.set_level(logging.WARNING, logger="toolweave.costs")
        bad_docs = [
            {**good, "serial_step_ms": "fast"},
            {**good, "serial_step_ms": float("nan")},
            {**good, "key": "another-model"},
            {**good, "sequences_ms": {"-1": 3.0}},
            {**good, "n_threads": True},
            {**good, "format": "something else"},
        ]
        for doc in bad_docs:
            path.write_text(json.dumps(doc), encoding="utf-8")
            caplog.clear()
            assert read_costs(path, eng) is None, doc
            assert "measuring the engine's costs again" in caplog.text
        path.write_bytes(b"{" + b" " * MAX_BYTES + b"}")
        assert read_costs(path, eng) is None
        path.write_bytes(b"\x00not json")
        assert read_costs(path, eng) is None
        assert read_costs(tmp_path / "missing.json", eng) is None
