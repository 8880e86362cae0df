"""The simulated memory-bound model: a random-weight qwen2 GGUF of about 1B parameters.

Built with the model zoo's own functions (`toolweave.adapters.bench.zoo`) from the
llama-cpp-python sdist's qwen2 vocabulary and the Qwen2.5 chat template, written as F16
in a child process (bounded in time and checked against free disk first), quantized to
Q4_K_M by llama.cpp and cached in ``<cache root>/sim/`` with a manifest and a lock.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import queue
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolweave.disk_cache import atomic_write, cache_root, format_size
from toolweave.errors import ModelError, ToolweaveError
from toolweave.eval.zoo_spec import SDIST_VERSION, ZooDims, ZooFamily, arch_tensors

if TYPE_CHECKING:
    pass

__all__ = ["SIM_FAMILY", "build_sim_model", "n_params", "sim_dims", "sim_dir"]

#: Bumped whenever a built simulation model would change: a new cache folder.
SIM_REVISION = 1
MANIFEST = "sim.json"
#: The simulated family: Qwen2.5's tokenizer, template and architecture.
SIM_FAMILY = ZooFamily(
    "sim",
    "a 1B Qwen2.5-like model (random weights)",
    vocab="qwen2",
    template="Qwen-Qwen2.5-7B-Instruct.jinja",
    arch="qwen2",
    quant="Q4_K_M",
    syntax="hermes",
)
#: Longest build (generating, writing F16, quantizing) before it is stopped.
BUILD_TIMEOUT_S = 1800.0
#: Bytes per parameter of the Q4_K_M file, an upper estimate for the disk check.
Q4_BYTES_PER_PARAM = 0.75
HEAD_DIM = 128
Progress = Callable[[str], None]


# ============================================================ the model
def sim_dims(n_layer: int = 16, n_embd: int = 2048) -> ZooDims:
    """Qwen2-like dims: heads of 128, 8 query heads per KV head, FFN 2.75x the width
    (multiples of 256, so Q4_K covers every matrix). 16 x 2048 is about 1.0B parameters."""
    if n_layer < 1 or n_embd < 256 or n_embd % 256:
        raise ValueError(f"need n_layer >= 1 and n_embd a multiple of 256, got {n_layer}, {n_embd}")
    n_head = n_embd // HEAD_DIM
    n_ff = round(2.75 * n_embd / 256) * 256
    return ZooDims(n_layer, n_embd, n_head, max(1, n_head // 8), n_ff, n_ctx_train=8192)


def n_params(dims: ZooDims, n_vocab: int = 151936) -> int:
    return sum(math.prod(shape) for _, shape in arch_tensors("qwen2", n_vocab, dims))


def sim_dir(dims: ZooDims, version: str = SDIST_VERSION) -> Path:
    tag = f"L{dims.n_layer}-E{dims.n_embd}"
    return cache_root() / "sim" / f"{version}-{tag}-r{SIM_REVISION}"


def build_sim_model(
    n_layer: int = 16,
    n_embd: int = 2048,
    *,
    version: str = SDIST_VERSION,
    directory: Path | None = None,
    progress: Progress | None = None,
    timeout_s: float = BUILD_TIMEOUT_S,
) -> Path:
    """The simulation GGUF (Q4_K_M) of `n_layer` x `n_embd`, built once and cached with
    a manifest; a lock keeps parallel processes from building it twice. The build runs
    in a child process stopped after `timeout_s`; free disk is checked first."""
    from toolweave.adapters.bench.zoo import LOCK_TIMEOUT_S, _locked

    say = progress or (lambda _msg: None)
    dims = sim_dims(n_layer, n_embd)
    folder = directory or sim_dir(dims, version)
    folder.mkdir(parents=True, exist_ok=True)
    found = _manifest(folder, version, dims)
    if found is not None:
        return found
    with _locked(folder / ".lock", LOCK_TIMEOUT_S, say):
        found = _manifest(folder, version, dims)
        if found is not None:
            return found
        params = n_params(dims)
        need = int(params * (2 + Q4_BYTES_PER_PARAM)) + (256 << 20)
        free = shutil.disk_usage(folder).free
        if free < need:
            raise ModelError(
                f"sim: building needs {format_size(need)} free in {folder}, {format_size(free)} are"
            )
        say(
            f"sim: building {params / 1e9:.2f}B parameters ({dims.n_layer} layers, width "
            f"{dims.n_embd}) in {folder}; needs {format_size(need)} of disk while building"
        )
        t0 = time.perf_counter()
        entry = _build_in_child(folder, version, dims, say, timeout_s)
        entry.update(params=params, build_s=round(time.perf_counter() - t0, 1))
        doc = {"version": version, "revision": SIM_REVISION, "dims": _dims_dict(dims), **entry}
        atomic_write(folder / MANIFEST, json.dumps(doc, indent=1).encode("utf-8"))
        say(
            f"sim: {entry['file']} {format_size(entry['size'])} (F16 was "
            f"{format_size(entry['f16_size'])}) built in {entry['build_s']:.0f} s"
        )
    return folder / entry["file"]


def _dims_dict(dims: ZooDims) -> dict[str, int]:
    return {k: int(getattr(dims, k)) for k in ZooDims.__dataclass_fields__}


def _manifest(folder: Path, version: str, dims: ZooDims) -> Path | None:
    """The built model if the manifest matches and its file is intact, else None."""
    try:
        doc = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        path = folder / str(doc["file"])
        ok = (
            doc["version"] == version
            and doc["revision"] == SIM_REVISION
            and doc["dims"] == _dims_dict(dims)
            and path.is_file()
            and path.stat().st_size == doc["size"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return path if ok else None


def _build_in_child(
    folder: Path, version: str, dims: ZooDims, say: Progress, timeout_s: float
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    inbox: mp.Queue[tuple[str, Any]] = ctx.Queue()
    child = ctx.Process(target=_build_worker, args=(folder, version, dims, inbox), daemon=True)
    child.start()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                kind, value = inbox.get(timeout=0.5)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise ModelError(f"sim: the build took over {timeout_s:.0f} s") from None
                if not child.is_alive():
                    raise ModelError(f"sim: the build died (exit {child.exitcode})") from None
                continue
            if kind == "say":
                say(str(value))
            elif kind == "error":
                raise ModelError(f"sim: {value}")
            else:
                return dict(value)
    finally:
        if child.is_alive():
            child.terminate()
        child.join(10)


def _build_worker(folder: Path, version: str, dims: ZooDims, out: mp.Queue[Any]) -> None:
    """In the child: read the vocab and template, write F16, quantize; report on `out`."""
    from toolweave.adapters.bench.zoo import _read_members, _sdist, _write_model
    from toolweave.eval.zoo_spec import template_member, vocab_member
    from toolweave.native.quantize import quantize_model

    def say(msg: str) -> None:
        out.put(("say", msg))

    try:
        fam = SIM_FAMILY
        target = folder / f"sim-{fam.arch}-L{dims.n_layer}-E{dims.n_embd}-{fam.quant}.gguf"
        with _sdist(folder, version, say) as sdist:
            members = _read_members(sdist, [fam], version)
        template = members[template_member(fam, version)].decode("utf-8")
        with tempfile.TemporaryDirectory(prefix="build-sim-", dir=folder) as tmp:
            vocab = Path(tmp) / "vocab.gguf"
            vocab.write_bytes(members[vocab_member(fam, version)])
            f16 = Path(tmp) / "model-f16.gguf"
            t0 = time.perf_counter()
            say("sim: [1/2] generating seeded random weights and writing F16")
            n_vocab = _write_model(f16, fam, vocab, template, dims)
            f16_size = f16.stat().st_size
            say(f"sim: [1/2] F16 {format_size(f16_size)} in {time.perf_counter() - t0:.0f} s")
            t0 = time.perf_counter()
            say(f"sim: [2/2] quantizing to {fam.quant} with llama.cpp")
            partial = Path(tmp) / "model-quant.gguf"
            quantize_model(f16, partial, fam.quant)
            os.replace(partial, target)
            say(f"sim: [2/2] quantized in {time.perf_counter() - t0:.0f} s")
        out.put(("done", {"file": target.name, "size": target.stat().st_size,
                          "f16_size": f16_size, "n_vocab": n_vocab}))  # fmt: skip
    except ToolweaveError as exc:
        out.put(("error", str(exc)))
    except Exception as exc:  # one line to the parent, which raises it
        out.put(("error", f"{type(exc).__name__}: {exc}"))
