"""The model zoo's specification and the fast GGUF metadata reader (no model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolweave.adapters.bench.gguf_meta import read_gguf_metadata
from toolweave.eval.zoo_spec import (
    ARCHS,
    QUANTS,
    ZOO_DIMS,
    ZOO_FAMILIES,
    arch_metadata,
    arch_tensors,
    family_named,
    template_member,
    vocab_member,
)


def test_families_are_distinct_and_buildable() -> None:
    names = [f.name for f in ZOO_FAMILIES]
    assert len(set(names)) == len(names)
    assert len({f.seed for f in ZOO_FAMILIES}) == len(names)
    for f in ZOO_FAMILIES:
        assert f.arch in ARCHS and f.quant in QUANTS
        assert vocab_member(f).endswith(f"/models/ggml-vocab-{f.vocab}.gguf")
        assert template_member(f).endswith(f"/models/templates/{f.template}")
        assert family_named(f.name) is f
    with pytest.raises(KeyError, match="known: qwen2"):
        family_named("gpt-5")


def test_k_quant_rows_fit_whole_blocks() -> None:
    # Q4_K packs 256 values: every row (ne0) of every matrix must be a multiple of it,
    # or llama.cpp falls back to another type and the K-quant kernels go untested.
    for arch in ARCHS:
        for name, shape in arch_tensors(arch, n_vocab=1000):
            if len(shape) == 2:
                assert shape[0] % 256 == 0, (arch, name, shape)


@pytest.mark.parametrize("arch", ARCHS)
def test_each_arch_has_unique_tensors_and_its_hyperparameters(arch: str) -> None:
    tensors = arch_tensors(arch, n_vocab=1000)
    names = [n for n, _ in tensors]
    assert len(set(names)) == len(names)
    assert ("token_embd.weight", (ZOO_DIMS.n_embd, 1000)) in tensors
    assert sum(n.startswith("blk.") for n in names) % ZOO_DIMS.n_layer == 0
    meta = arch_metadata(arch)
    assert meta["block_count"] == ZOO_DIMS.n_layer
    eps = (
        "attention.layer_norm_epsilon"
        if arch == "command-r"
        else "attention.layer_norm_rms_epsilon"
    )
    assert eps in meta
    with pytest.raises(KeyError, match="no zoo layout"):
        arch_tensors("mamba", 10)


def test_metadata_reader_matches_gguf_reader(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "small.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_uint32("llama.block_count", 2)
    writer.add_float32("llama.rope.freq_base", 10000.0)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)
    writer.add_token_list(["<s>", "a", "Zürich"])
    writer.add_token_types([3, 1, 1])
    writer.add_token_scores([0.0, -1.5, -2.0])
    writer.add_tensor("token_embd.weight", np.zeros((3, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ours = {e.name: e for e in read_gguf_metadata(path)}
    theirs = gguf.GGUFReader(path).fields
    for name, field in theirs.items():
        if name.startswith("GGUF."):
            continue
        assert ours[name].vtype == int(field.types[0]), name
        assert ours[name].value == pytest.approx(field.contents()), name
    assert set(ours) == {n for n in theirs if not n.startswith("GGUF.")}
    path.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 8 + b"\x05" + b"\x00" * 7)
    with pytest.raises(ValueError, match="truncated"):
        read_gguf_metadata(path)
