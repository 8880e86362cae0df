"""Quantize a GGUF model file with llama.cpp's own quantizer (`llama_model_quantize`).

llama.cpp picks each tensor's type from the file type as its ``llama-quantize`` tool
does (Q4_K_M keeps some tensors in Q6_K, 1-D tensors stay F32) and falls back per
tensor when a row length does not fit the type's block.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import llama_cpp
from llama_cpp import _logger as _llama_logger

from toolweave.errors import ModelError
from toolweave.native.threads import default_threads

__all__ = ["QUANT_FILE_TYPES", "quantize_model"]

#: Quantization names and llama.cpp's file types.
QUANT_FILE_TYPES: dict[str, int] = {
    "F16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16,
    "Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
    "Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
    "Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M,
    "Q5_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_K_M,
    "Q6_K": llama_cpp.LLAMA_FTYPE_MOSTLY_Q6_K,
}


def quantize_model(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    quant: str,
    *,
    n_threads: int | None = None,
) -> Path:
    """Write `source` quantized to `quant` (a `QUANT_FILE_TYPES` name) as `target`."""
    src, dst = Path(source), Path(target)
    if quant not in QUANT_FILE_TYPES:
        known = ", ".join(QUANT_FILE_TYPES)
        raise ModelError(f"unknown quantization {quant!r} (known: {known})")
    if not src.is_file():
        raise ModelError(f"model file not found: {src}")
    _llama_logger.set_verbose(False)  # llama.cpp logs every tensor otherwise
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = QUANT_FILE_TYPES[quant]
    params.nthread = n_threads or default_threads()
    rc = llama_cpp.llama_model_quantize(os.fsencode(src), os.fsencode(dst), ctypes.byref(params))
    if rc != 0 or not dst.is_file():
        raise ModelError(f"llama.cpp could not quantize {src} to {quant} (code {rc})")
    return dst
