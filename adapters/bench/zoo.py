"""Build the model zoo: tiny random-weight GGUFs with the real tokenizers and templates.

Nothing comes from a model hub. The llama-cpp-python sdist (a PyPI package) ships
llama.cpp's vocab-only GGUFs and chat templates; `build_zoo` downloads it without
building it (``pip download --no-binary :all:``, or uses ``$TOOLWEAVE_ZOO_SDIST``),
reads only the members it needs from the tar, and writes one model per family of
`toolweave.eval.zoo_spec`: the vocabulary's tokenizer metadata copied, the family's
template as ``tokenizer.chat_template``, seeded random weights for a 2-layer
architecture, quantized by llama.cpp's own quantizer. The models live in
``<cache root>/zoo/<sdist version>-r<revision>/`` with a manifest; they are built once
(a lock file keeps parallel test processes from building them twice).

``python -m toolweave.adapters.bench.zoo`` builds the zoo and prints where it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from toolweave.disk_cache import atomic_write, cache_root, format_size
from toolweave.errors import ModelError, ToolweaveError
from toolweave.eval.pip_fetch import FetchError, pip_download
from toolweave.eval.zoo_spec import (
    SDIST_VERSION,
    ZOO_DIMS,
    ZOO_FAMILIES,
    ZOO_REVISION,
    ZooDims,
    ZooFamily,
    arch_metadata,
    arch_tensors,
    template_member,
    vocab_member,
)

__all__ = [
    "SDIST_ENV",
    "Zoo",
    "ZooModel",
    "ZooUnavailable",
    "build_zoo",
    "zoo_dir",
]

#: A local llama-cpp-python sdist (.tar.gz) to use instead of downloading one.
SDIST_ENV = "TOOLWEAVE_ZOO_SDIST"
#: Longest wait for `pip download` of the sdist (about 77 MB).
DOWNLOAD_TIMEOUT_S = 900.0
#: Longest wait for another process building the same zoo.
LOCK_TIMEOUT_S = 1800.0
#: Largest sdist member read (the largest vocab GGUF is 16 MB).
MAX_MEMBER_BYTES = 64 << 20
#: Standard deviation of the token embedding: the tied output then gives logits of a
#: spread of about 8, so greedy choices are rarely near ties.
EMBED_STD = 0.5
MANIFEST = "zoo.json"

Progress = Callable[[str], None]


class ZooUnavailable(ToolweaveError):
    """The sdist the zoo is built from cannot be had (offline, pip failed)."""


@dataclass(frozen=True)
class ZooModel:
    """One built zoo model."""

    family: ZooFamily
    path: Path
    size: int
    n_vocab: int
    template_path: Path

    @property
    def template(self) -> str:
        return self.template_path.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Zoo:
    """The built zoo: its folder, its models, and how long building took (None when it
    was already built)."""

    directory: Path
    version: str
    models: tuple[ZooModel, ...]
    build_s: float | None = None

    def model(self, name: str) -> ZooModel:
        for m in self.models:
            if m.family.name == name:
                return m
        raise KeyError(f"the zoo has no model {name!r}")

    @property
    def total_bytes(self) -> int:
        return sum(m.size for m in self.models)


def zoo_dir(version: str = SDIST_VERSION) -> Path:
    """Where the zoo of sdist `version` lives."""
    return cache_root() / "zoo" / f"{version}-r{ZOO_REVISION}"


def build_zoo(
    families: Sequence[ZooFamily] = ZOO_FAMILIES,
    *,
    version: str = SDIST_VERSION,
    directory: Path | None = None,
    progress: Progress | None = None,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
) -> Zoo:
    """The zoo's models for `families`, building those not built yet."""
    say = progress or (lambda _msg: None)
    folder = directory or zoo_dir(version)
    folder.mkdir(parents=True, exist_ok=True)
    found = _read_manifest(folder, version)
    if all(f.name in found for f in families):
        return Zoo(folder, version, tuple(_model(folder, f, found[f.name]) for f in families))
    with _locked(folder / ".lock", lock_timeout_s, say):
        found = _read_manifest(folder, version)  # another process may have built them
        missing = [f for f in families if f.name not in found]
        start = time.perf_counter()
        if missing:
            say(f"zoo: building {len(missing)} model(s) in {folder}")
            with _sdist(folder, version, say) as sdist:
                members = _read_members(sdist, missing, version)
                for i, family in enumerate(missing, 1):
                    t0 = time.perf_counter()
                    entry = _build_family(folder, family, members, version, ZOO_DIMS)
                    found[family.name] = entry
                    _write_manifest(folder, version, found)
                    say(
                        f"zoo: [{i}/{len(missing)}] {family.name} ({family.arch}, "
                        f"{entry['n_vocab']} tokens, {family.quant}): "
                        f"{format_size(entry['size'])} in {time.perf_counter() - t0:.1f} s"
                    )
        build_s = time.perf_counter() - start if missing else None
    zoo = Zoo(folder, version, tuple(_model(folder, f, found[f.name]) for f in families), build_s)
    if build_s is not None:
        say(
            f"zoo: {len(zoo.models)} models, {format_size(zoo.total_bytes)}, "
            f"built in {build_s:.1f} s"
        )
    return zoo


# ---------------------------------------------------------------------- manifest
def _read_manifest(folder: Path, version: str) -> dict[str, dict[str, Any]]:
    """Built families whose files are still there (a damaged manifest counts as none)."""
    try:
        doc = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("version") != version:
        return {}
    if doc.get("revision") != ZOO_REVISION:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name, entry in dict(doc.get("models", {})).items():
        path = folder / str(entry.get("file", ""))
        if path.is_file() and path.stat().st_size == entry.get("size"):
            out[name] = entry
    return out


def _write_manifest(folder: Path, version: str, models: dict[str, dict[str, Any]]) -> None:
    doc = {"version": version, "revision": ZOO_REVISION, "models": models}
    atomic_write(folder / MANIFEST, json.dumps(doc, indent=1).encode("utf-8"))


def _model(folder: Path, family: ZooFamily, entry: dict[str, Any]) -> ZooModel:
    return ZooModel(
        family,
        folder / entry["file"],
        int(entry["size"]),
        int(entry["n_vocab"]),
        folder / entry["template_file"],
    )


@contextlib.contextmanager
def _locked(path: Path, timeout_s: float, say: Progress) -> Iterator[None]:
    """Hold an exclusive lock on `path`, waiting at most `timeout_s` for it."""
    with path.open("a+b") as fh:
        deadline = time.monotonic() + timeout_s
        told = False
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ZooUnavailable(
                        f"another process held the zoo lock {path} for over {timeout_s:.0f} s"
                    ) from None
                if not told:
                    say("zoo: waiting for another process building the zoo")
                    told = True
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ---------------------------------------------------------------------- the sdist
@contextlib.contextmanager
def _sdist(folder: Path, version: str, say: Progress) -> Iterator[Path]:
    """The sdist: ``$TOOLWEAVE_ZOO_SDIST``, else downloaded into a temporary folder
    (deleted afterwards: the zoo keeps only what it built)."""
    local = os.environ.get(SDIST_ENV)
    if local:
        path = Path(local)
        if not path.is_file():
            raise ZooUnavailable(f"${SDIST_ENV} names no file: {path}")
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="sdist-", dir=folder))
    try:
        say(f"zoo: downloading the llama-cpp-python {version} sdist (about 77 MB, not built)")
        try:
            archive = pip_download(
                f"llama-cpp-python=={version}",
                tmp,
                sdist=True,
                pattern="llama_cpp_python-*.tar.gz",
                timeout=DOWNLOAD_TIMEOUT_S,
            )
        except FetchError as exc:
            msg = f"cannot download the llama-cpp-python {version} sdist: {exc}"
            raise ZooUnavailable(msg) from None
        yield archive
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_members(sdist: Path, families: Sequence[ZooFamily], version: str) -> dict[str, bytes]:
    """The vocab GGUFs and templates `families` need, read in one pass over the tar."""
    wanted = {vocab_member(f, version) for f in families} | {
        template_member(f, version) for f in families
    }
    got: dict[str, bytes] = {}
    try:
        with tarfile.open(sdist, "r:gz") as tar:
            for member in tar:
                if member.name not in wanted or not member.isfile():
                    continue
                if member.size > MAX_MEMBER_BYTES:
                    raise ZooUnavailable(f"{member.name} is {member.size} bytes: not a vocab file")
                fh = tar.extractfile(member)
                if fh is not None:
                    got[member.name] = fh.read()
                if len(got) == len(wanted):
                    break
    except (OSError, tarfile.TarError) as exc:
        raise ZooUnavailable(f"cannot read the sdist {sdist}: {exc}") from None
    lost = sorted(wanted - set(got))
    if lost:
        raise ZooUnavailable(f"the sdist {sdist.name} has no {', '.join(lost)}")
    return got


# ---------------------------------------------------------------------- one model
def _build_family(
    folder: Path, family: ZooFamily, members: dict[str, bytes], version: str, dims: ZooDims
) -> dict[str, Any]:
    """Write the family's model (and its template) into `folder`; its manifest entry."""
    from toolweave.native.quantize import quantize_model

    template = members[template_member(family, version)]
    template_text = template.decode("utf-8")
    template_file = f"zoo-{family.name}.jinja"
    atomic_write(folder / template_file, template)
    target = folder / family.file_name
    with tempfile.TemporaryDirectory(prefix=f"build-{family.name}-", dir=folder) as tmp:
        vocab_path = Path(tmp) / "vocab.gguf"
        vocab_path.write_bytes(members[vocab_member(family, version)])
        f16 = Path(tmp) / "model-f16.gguf"
        n_vocab = _write_model(f16, family, vocab_path, template_text, dims)
        if family.quant == "F16":
            os.replace(f16, target)
        else:
            partial = Path(tmp) / "model-quant.gguf"
            quantize_model(f16, partial, family.quant)
            os.replace(partial, target)
    return {
        "file": target.name,
        "size": target.stat().st_size,
        "n_vocab": n_vocab,
        "template_file": template_file,
        "arch": family.arch,
        "quant": family.quant,
    }


def _write_model(path: Path, family: ZooFamily, vocab: Path, template: str, dims: ZooDims) -> int:
    """Write an F16 GGUF of `family` at `path`; returns its vocabulary size."""
    import gguf

    from toolweave.adapters.bench.gguf_meta import read_gguf_metadata

    try:
        entries = read_gguf_metadata(vocab)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{family.vocab}: cannot read the vocab file: {exc}") from None
    tokens = next((e for e in entries if e.name == "tokenizer.ggml.tokens"), None)
    if tokens is None:
        raise ModelError(f"{family.vocab}: the vocab file has no tokenizer.ggml.tokens")
    n_vocab = len(tokens.value)
    writer = gguf.GGUFWriter(path, family.arch)
    writer.add_name(f"toolweave zoo {family.name} (random weights)")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for key, value in arch_metadata(family.arch, dims).items():
        name = f"{family.arch}.{key}"
        if isinstance(value, int):
            writer.add_uint32(name, value)
        else:
            writer.add_float32(name, value)
    for e in entries:
        if not e.name.startswith("tokenizer.") or e.name.startswith("tokenizer.chat_template"):
            continue
        sub = None if e.sub_type is None else gguf.GGUFValueType(e.sub_type)
        writer.add_key_value(e.name, e.value, gguf.GGUFValueType(e.vtype), sub_type=sub)
    writer.add_chat_template(template)
    rng = np.random.default_rng(family.seed)
    for name, shape in arch_tensors(family.arch, n_vocab, dims):
        writer.add_tensor(name, _weights(rng, name, shape))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return n_vocab


def _weights(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Seeded weights for one tensor (numpy shape: ggml's reversed)."""
    np_shape = tuple(reversed(shape))
    if len(shape) == 1:
        if name.endswith(".bias"):
            return (0.02 * rng.standard_normal(np_shape)).astype(np.float32)
        return np.ones(np_shape, dtype=np.float32)  # norms: unit scale
    std = EMBED_STD if name == "token_embd.weight" else shape[0] ** -0.5
    return (std * rng.standard_normal(np_shape, dtype=np.float32)).astype(np.float16)


def main() -> None:
    """Build the zoo (if needed) and print its models."""
    try:
        zoo = build_zoo(progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    except ToolweaveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    for m in zoo.models:
        print(f"{m.family.name:10} {m.family.quant:7} {format_size(m.size):>9}  {m.path}")
    print(f"{len(zoo.models)} models, {format_size(zoo.total_bytes)} in {zoo.directory}")


if __name__ == "__main__":
    main()
