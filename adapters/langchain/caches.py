"""What `ChatToolweave` builds once and reuses: an engine per model file and engine
settings (context size, batch size, threads) in the process, and each chat model's
tool callers per tool set."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolweave.models import resolve_model
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolSpec

__all__ = ["CallerCache", "EngineSettings", "private_engine", "shared_engine"]


@dataclass(frozen=True)
class EngineSettings:
    """What an engine is built with besides its model file (None: the engine's default)."""

    n_ctx: int
    n_batch: int | None = None
    n_threads: int | None = None
    batch_invariant: bool = False


_ENGINES: dict[tuple[str, EngineSettings], Engine] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(model: str | None, settings: EngineSettings) -> Engine:
    """One engine per (model file, settings) in this process, loaded on first use;
    every user serialises on the engine's lock."""
    path = str(resolve_model(model))
    key = (path, settings)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = Engine(path, **_engine_kwargs(settings))
            _ENGINES[key] = engine
        return engine


def private_engine(model: str | None, settings: EngineSettings) -> Engine:
    """A new engine of `model` with `settings`, shared with nobody."""
    return Engine(str(resolve_model(model)), **_engine_kwargs(settings))


def _engine_kwargs(settings: EngineSettings) -> dict[str, Any]:
    """`Engine(...)` keywords of `settings`, leaving out what keeps its default."""
    kwargs: dict[str, Any] = {"n_ctx": settings.n_ctx}
    if settings.n_batch is not None:
        kwargs["n_batch"] = settings.n_batch
    if settings.n_threads is not None:
        kwargs["n_threads"] = settings.n_threads
    if settings.batch_invariant:
        kwargs["batch_invariant"] = True
    return kwargs


class CallerCache:
    """The most recently used `ToolCaller`s, one per (tools, system prompt, max calls):
    a caller compiles its grammar and prompt once, and agents repeat their tool sets."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._callers: OrderedDict[str, ToolCaller] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self,
        specs: Sequence[ToolSpec],
        system: str | None,
        max_calls: int | None,
        build: Callable[[], ToolCaller],
    ) -> ToolCaller:
        """The cached caller of this tool set, or the one `build` makes (then cached)."""
        key = json.dumps([[s.to_dict() for s in specs], system, max_calls], sort_keys=True)
        with self._lock:
            caller = self._callers.get(key)
            if caller is None:
                caller = build()
                self._callers[key] = caller
                while len(self._callers) > self.size:
                    self._callers.popitem(last=False)
            else:
                self._callers.move_to_end(key)
            return caller
