"""The zoo builder's cache rules, without building a model."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from toolweave.adapters.bench.zoo import ZooUnavailable, _locked, build_zoo
from toolweave.eval.zoo_spec import ZOO_REVISION, family_named


def test_a_held_lock_is_waited_for_a_bounded_time(tmp_path: Path) -> None:
    said: list[str] = []
    with _locked(tmp_path / ".lock", 5.0, said.append):
        box: list[BaseException] = []

        def build() -> None:
            try:
                build_zoo(
                    [family_named("phi3")],
                    directory=tmp_path,
                    progress=said.append,
                    lock_timeout_s=0.6,
                )
            except BaseException as exc:
                box.append(exc)

        worker = threading.Thread(target=build)
        worker.start()
        worker.join(10)
    assert not worker.is_alive()
    assert len(box) == 1 and isinstance(box[0], ZooUnavailable), box
    assert "held the zoo lock" in str(box[0])
    assert said == ["zoo: waiting for another process building the zoo"]


def test_a_built_zoo_is_found_without_the_lock_or_the_sdist(tmp_path: Path) -> None:
    phi = family_named("phi3")
    (tmp_path / phi.file_name).write_bytes(b"GGUF" + bytes(60))
    (tmp_path / "zoo-phi3.jinja").write_text("{{ messages }}", encoding="utf-8")
    entry = {"file": phi.file_name, "size": 64, "n_vocab": 32064, "template_file": "zoo-phi3.jinja"}
    doc = {"version": "0.3.36", "revision": ZOO_REVISION, "models": {"phi3": entry}}
    (tmp_path / "zoo.json").write_text(json.dumps(doc), encoding="utf-8")
    with _locked(tmp_path / ".lock", 5.0, lambda _m: None):  # held: must not be needed
        zoo = build_zoo([phi], directory=tmp_path, lock_timeout_s=0.1)
    assert zoo.build_s is None and zoo.model("phi3").n_vocab == 32064
    assert zoo.model("phi3").template == "{{ messages }}"
    # A file of the wrong size is not trusted: the zoo wants to rebuild it (and waits).
    (tmp_path / phi.file_name).write_bytes(b"GGUF")
    with _locked(tmp_path / ".lock", 5.0, lambda _m: None), pytest.raises(ZooUnavailable):
        build_zoo([phi], directory=tmp_path, lock_timeout_s=0.1)
