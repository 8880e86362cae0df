"""Constructor arguments of `ChatToolweave` that are not its own: the one-line error
naming the closest known argument, and whether two model names mean one file."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from toolweave.errors import ModelError
from toolweave.models import resolve_model

__all__ = ["same_model", "unknown_argument"]

#: Names other LangChain chat models use for what ChatToolweave calls differently.
SYNONYMS = {
    "num_ctx": "n_ctx",
    "context_length": "n_ctx",
    "num_thread": "n_threads",
    "num_threads": "n_threads",
    "num_batch": "n_batch",
    "num_predict": "max_tokens",
    "max_new_tokens": "max_tokens",
    "model_name": "model",
    "model_id": "model",
}

#: Arguments of hosted-model clients that mean nothing to a model in this process.
REMOTE_ONLY = frozenset(
    {"api_key", "base_url", "timeout", "max_retries", "organization", "keep_alive"}
)


def unknown_argument(name: str, known: Iterable[str], owner: str = "ChatToolweave") -> str:
    """The error message for an argument `owner` does not take."""
    head = f"{owner}() got an unexpected argument {name!r}"
    if name in REMOTE_ONLY:
        return f"{head}: it configures a hosted API, and this model runs in the process"
    hint = SYNONYMS.get(name)
    if hint is None:
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = close[0] if close else None
    return f"{head}; did you mean {hint!r}?" if hint else head


def same_model(a: object, b: object) -> bool:
    """Whether two model arguments (names or paths) mean the same GGUF file."""
    try:
        return resolve_model(str(a)).resolve() == resolve_model(str(b)).resolve()
    except ModelError:
        return str(a) == str(b)
