"""Text embedders for ToolRAG: the `Embedder` interface and two pure-numpy embedders.

An embedder turns texts into one L2-normalised float32 row each (an all-zero row for a
text without features), so a dot product is a cosine similarity. Both embedders here
hash their features into a fixed number of dimensions with a stable hash (CRC-32, the
same in every process) and a hashed sign, which halves the bias of collisions:

- `HashedTfidf`: word n-grams and character n-grams (within word boundaries) with
  sublinear term frequency and inverse document frequency; the word and character
  blocks are normalised apart and mixed with a fixed weight, so the many character
  grams do not drown the few words. Robust to inflections and file names.
- `Bm25Embedder`: word unigrams weighted as in BM25 (saturated term frequency with
  length normalisation, BM25 idf), the classic lexical retrieval baseline.

Both are fitted on a corpus (`fit` returns a new embedder holding the idf table) and
written to a JSON-ready dict with `to_dict`; `embedder_from_dict` reads it back.
A model-based embedder only needs to satisfy `Embedder`.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Bm25Embedder",
    "Embedder",
    "HashedTfidf",
    "SerializableEmbedder",
    "embedder_from_dict",
    "words",
]

_WORD = re.compile(r"[a-z0-9]+")


@runtime_checkable
class Embedder(Protocol):
    """Anything that embeds texts as L2-normalised rows (``len(texts) x dim`` float32)."""

    @property
    def name(self) -> str:
        """A short label for reports."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text; rows have norm 1, or 0 for a text without features."""
        ...


@runtime_checkable
class SerializableEmbedder(Embedder, Protocol):
    """An embedder that `embedder_from_dict` can rebuild from ``to_dict()``."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description, including any fitted statistics."""
        ...


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric runs: ``"final_report.pdf"`` -> final, report, pdf."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class HashedTfidf:
    """Hashed TF-IDF over word and character n-grams; see the module docstring.

    ``word_ngrams``/``char_ngrams`` are inclusive ``(min, max)`` ranges (``(0, 0)``
    turns a block off); ``char_weight`` is the share of the character block in the
    squared norm. Without `fit`, every idf is 1.
    """

    dim: int = 4096
    word_ngrams: tuple[int, int] = (1, 2)
    char_ngrams: tuple[int, int] = (3, 5)
    char_weight: float = 0.5
    idf: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return f"tfidf-w{_span(self.word_ngrams)}-c{_span(self.char_ngrams)}"

    def fit(self, corpus: Iterable[str]) -> HashedTfidf:
        """Return a copy whose idf comes from ``corpus`` (smoothed: ln((1+n)/(1+df)) + 1)."""
        texts = list(corpus)
        df = np.zeros(self.dim)
        for text in texts:
            for block in self._blocks(text):
                df[list({index for index, _ in block})] += 1
        idf = np.log((1 + len(texts)) / (1 + df)) + 1
        return replace(self, idf=idf.astype(np.float32))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        shares = (1.0 - self.char_weight, self.char_weight)
        for row, text in enumerate(texts):
            for share, block in zip(shares, self._blocks(text), strict=True):
                if share > 0 and block:
                    out[row] += math.sqrt(share) * self._weigh(block)
        return _normalise(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "hashed-tfidf",
            "dim": self.dim,
            "word_ngrams": list(self.word_ngrams),
            "char_ngrams": list(self.char_ngrams),
            "char_weight": self.char_weight,
            "idf": None if self.idf is None else self.idf.tolist(),
        }

    def _blocks(self, text: str) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        tokens = words(text)
        word_grams = [
            " ".join(tokens[i : i + n])
            for n in _range(self.word_ngrams)
            for i in range(len(tokens) - n + 1)
        ]
        char_grams = [
            padded[i : i + n]
            for token in tokens
            for padded in (f" {token} ",)
            for n in _range(self.char_ngrams)
            for i in range(len(padded) - n + 1)
        ]
        return _hashed(word_grams, "w", self.dim), _hashed(char_grams, "c", self.dim)

    def _weigh(self, block: list[tuple[int, float]]) -> np.ndarray:
        counts: Counter[tuple[int, float]] = Counter(block)
        vector = np.zeros(self.dim, dtype=np.float32)
        for (index, sign), count in counts.items():
            weight = 1.0 + math.log(count)
            if self.idf is not None:
                weight *= float(self.idf[index])
            vector[index] += sign * weight
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else vector


@dataclass(frozen=True)
class Bm25Embedder:
    """BM25-weighted word vectors: ``idf * tf (k1 + 1) / (tf + k1 (1 - b + b len/avg))``."""

    dim: int = 4096
    k1: float = 1.2
    b: float = 0.75
    average_length: float = 10.0
    idf: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return "bm25"

    def fit(self, corpus: Iterable[str]) -> Bm25Embedder:
        """Return a copy with BM25's idf, ln(1 + (n - df + 0.5)/(df + 0.5)), and mean length."""
        texts = [words(text) for text in corpus]
        df = np.zeros(self.dim)
        for tokens in texts:
            df[list({index for index, _ in _hashed(tokens, "w", self.dim)})] += 1
        n = len(texts)
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        average = sum(map(len, texts)) / n if n else self.average_length
        return replace(self, idf=idf.astype(np.float32), average_length=max(average, 1.0))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = words(text)
            scale = self.k1 * (1 - self.b + self.b * len(tokens) / self.average_length)
            for (index, sign), tf in Counter(_hashed(tokens, "w", self.dim)).items():
                idf = 1.0 if self.idf is None else float(self.idf[index])
                out[row, index] += sign * idf * tf * (self.k1 + 1) / (tf + scale)
        return _normalise(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "bm25",
            "dim": self.dim,
            "k1": self.k1,
            "b": self.b,
            "average_length": self.average_length,
            "idf": None if self.idf is None else self.idf.tolist(),
        }


def embedder_from_dict(data: Mapping[str, Any]) -> HashedTfidf | Bm25Embedder:
    """Rebuild an embedder written by ``to_dict``; ValueError for an unknown kind."""
    idf = data.get("idf")
    table = None if idf is None else np.asarray(idf, dtype=np.float32)
    kind = data.get("kind")
    if kind == "hashed-tfidf":
        return HashedTfidf(
            dim=int(data["dim"]),
            word_ngrams=_pair(data["word_ngrams"]),
            char_ngrams=_pair(data["char_ngrams"]),
            char_weight=float(data["char_weight"]),
            idf=table,
        )
    if kind == "bm25":
        return Bm25Embedder(
            dim=int(data["dim"]),
            k1=float(data["k1"]),
            b=float(data["b"]),
            average_length=float(data["average_length"]),
            idf=table,
        )
    raise ValueError(f"unknown embedder kind {kind!r} (known: hashed-tfidf, bm25)")


def _hashed(grams: Iterable[str], space: str, dim: int) -> list[tuple[int, float]]:
    """(bucket, sign) per gram; one CRC-32 gives both, the top bit choosing the sign."""
    out = []
    for gram in grams:
        code = zlib.crc32(f"{space}:{gram}".encode())
        out.append((code % dim, 1.0 if code >> 31 else -1.0))
    return out


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _range(span: tuple[int, int]) -> range:
    low, high = span
    return range(max(low, 1), high + 1) if high > 0 else range(0)


def _span(span: tuple[int, int]) -> str:
    return "0" if span[1] <= 0 else f"{span[0]}{span[1]}" if span[0] != span[1] else str(span[0])


def _pair(value: Any) -> tuple[int, int]:
    low, high = value
    return int(low), int(high)
