"""ToolRAG's JSON files: their format tag, the embedder they hold, float32 matrices."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import numpy as np

from toolweave.prompting.embedding import Embedder, SerializableEmbedder, embedder_from_dict

__all__ = [
    "FORMAT",
    "check_format",
    "decode_matrix",
    "embedder_entry",
    "encode_matrix",
    "file_embedder",
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
    """The matrix `encode_matrix` wrote."""
    raw = base64.b64decode(data["float32"])
    return np.frombuffer(raw, dtype="<f4").reshape(data["shape"]).astype(np.float32)
