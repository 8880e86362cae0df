"""Saved prompt states for `ChatToolweave`: the process's default `StateStore` over
``<cache root>/prompt-states``, and `PromptStates`, the mixin that picks a model's store
and starts each prompt from its longest saved prefix."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage

from toolweave.checkpoints import session_name
from toolweave.disk_cache import cache_root
from toolweave.events import Observer, PromptCacheEvent
from toolweave.native.engine import Engine
from toolweave.native.states.store import StateStore

__all__ = [
    "DEFAULT_STORE",
    "PromptStates",
    "conversation_session",
    "default_state_store",
    "default_store_dir",
]

#: ``ChatToolweave(state_store=DEFAULT_STORE)``, the default: the process's shared store.
DEFAULT_STORE = "default"


def default_store_dir() -> Path:
    """Where the default store keeps its files: ``<cache root>/prompt-states``."""
    return cache_root() / "prompt-states"


_DEFAULT_STORES: dict[Path, StateStore] = {}
_DEFAULT_STORES_LOCK = threading.Lock()


def default_state_store() -> StateStore:
    """The process's store over ``<cache root>/prompt-states`` (made on first use; its
    pending writes finish at exit). Processes sharing the directory at once are safe:
    every file is checksummed and written atomically, and a damaged one is skipped."""
    directory = default_store_dir().expanduser().resolve()
    with _DEFAULT_STORES_LOCK:
        store = _DEFAULT_STORES.get(directory)
        if store is None:
            store = StateStore(directory)
            _DEFAULT_STORES[directory] = store
            atexit.register(store.close)
        return store


def conversation_session(system: str | None, messages: Sequence[BaseMessage]) -> str:
    """The state store's session for a conversation: ``chat:`` and a digest of its
    system text and its messages up to the first user message.

    Every request of one conversation (an agent's turns, its call and answer prompts)
    shares that opening, so its states count against one budget of the store's policy
    (`CheckpointPolicy.max_per_session`); another conversation, in this process or a
    later one, has a budget of its own and does not evict them. The digest is the same
    in every process, so a new process resuming the conversation finds them.
    """
    head: list[Any] = [system]
    for message in messages:
        head.append([message.type, message.content])
        if isinstance(message, HumanMessage):
            break
    return session_name("chat", head)


class PromptStates:
    """The state-store side of `ChatToolweave`: a mixin over the model's fields declared
    below (declared for type checking only, so that pydantic takes none of them for a
    field of its own)."""

    if TYPE_CHECKING:
        state_store: Any
        reuse_prompt_cache: bool
        max_tokens: int
        observer: Observer | None

    @property
    def _stores_states(self) -> bool:
        return self.store is not None and self.reuse_prompt_cache

    @property
    def store(self) -> StateStore | None:
        """The state store this model restores prompts from (None: the live cache only)."""
        chosen = self.state_store
        if chosen is None or chosen is False:
            return None
        if chosen == DEFAULT_STORE or chosen is True:
            return default_state_store()
        return chosen

    def _restore(self, eng: Engine, prompt: list[int], restored: list[int], session: str) -> None:
        """Start `prompt` from the state store's longest saved prefix (no-op without one),
        appending to `restored` how many of its tokens came from a cache; the states it
        saves count against `session` (`conversation_session`).

        The decoder then finds the prompt cached and only runs its last token again."""
        store = self.store if self.reuse_prompt_cache else None
        if store is None:
            return
        store.prefill(eng, 0, prompt, self.max_tokens, session=session)
        record = store.last
        if record is not None:
            restored.append(record.reused)
        if self.observer is not None and record is not None:
            self.observer(
                PromptCacheEvent(
                    prompt_tokens=record.prompt_tokens,
                    reused=record.reused,
                    prefilled=record.prefilled,
                    source=record.source,
                    saved_at=record.saved_at,
                    ms=record.prompt_ms,
                )
            )
