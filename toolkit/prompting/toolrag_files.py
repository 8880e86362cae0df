"""ToolRAG's JSON files: their format tag, the embedder they hold, float32 matrices,
and reading and writing them (atomically; a damaged file is one clear ValueError)."""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from toolweave.disk_cache import atomic_write
from toolweave.prompting.embedding import Embedder, SerializableEmbedder, embedder_from_dict

__all__ = [
    "FORMAT",
    "check_format",
    "decode_matrix",
    "embedder_entry",
    "encode_matrix",
    "file_embedder",
    "read_file",
    "write_file",
]

#: The format tag of every ToolRAG file; ``kind`` tells a selector from an example store.
FORMAT = "toolweave-toolrag-v1"


def check_format(data: Mapping[str, Any], kind: str) -> None:
    """ValueError unless ``data`` is a ToolRAG file of ``kind``."""
    if data.get("format") != FORMAT or data.get("kind") != kind:
        raise ValueError(f"not a {kind} file of format {FORMAT}")


def embedder_entry(embedder: Embedder) -> dict[str, Any] | None:
    """The embedder as stored in a file: its ``to_dict``, None for a custom embedder."""
    return embedder.to_dict() if isinstance(embedder, SerializableEmbedder) else None


def file_embedder(data: Mapping[str, Any], embedder: Embedder | None) -> Embedder:
    """``embedder`` when given, else the one the file holds (ValueError if none)."""
    if embedder is not None:
        return embedder
    stored = data.get("embedder")
    if stored is None:
        raise ValueError("the file holds no embedder (it was a custom one): pass embedder=")
    return embedder_from_dict(stored)


def encode_matrix(matrix: np.ndarray) -> dict[str, Any]:
    """A float32 matrix as base64 of its little-endian bytes: 4x smaller than a list."""
    data = np.ascontiguousarray(matrix, dtype="<f4")
    return {"shape": list(data.shape), "float32": base64.b64encode(data.tobytes()).decode()}


def decode_matrix(data: Mapping[str, Any]) -> np.ndarray:
    """The matrix `encode_matrix` wrote; ValueError if it is malformed or truncated."""
    try:
        shape = [int(n) for n in data["shape"]]
        raw = base64.b64decode(data["float32"], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise ValueError(f"malformed matrix ({type(exc).__name__}: {exc})") from None
    if any(n < 0 for n in shape) or 4 * int(np.prod(shape)) != len(raw):
        raise ValueError(f"malformed matrix: {len(raw)} bytes do not make a {shape} float32")
    return np.frombuffer(raw, dtype="<f4").reshape(shape).astype(np.float32)


def write_file(path: str | os.PathLike[str], data: Mapping[str, Any]) -> None:
    """Write a ToolRAG file atomically (the old file or the new one, never a part)."""
    atomic_write(path, json.dumps(data).encode("utf-8"))


def read_file(path: str | os.PathLike[str], kind: str) -> dict[str, Any]:
    """A ToolRAG file of ``kind`` as a dict: OSError if unreadable, ValueError (one line,
    naming the file) if it is not JSON or not such a file."""
    p = Path(path)
    try:
        data = json.loads(p.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{p}: not a ToolRAG file ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{p}: not a {kind} file of format {FORMAT}")
    try:
        check_format(data, kind)
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None
    return data
