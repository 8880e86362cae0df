"""What `ChatToolweave` builds once and reuses: an engine per (model file, context
size) in the process, and each chat model's tool callers per tool set."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from toolweave.models import resolve_model
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.toolspec import ToolSpec

__all__ = ["CallerCache", "shared_engine"]

_ENGINES: dict[tuple[str, int], Engine] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(model: str | None, n_ctx: int) -> Engine:
    """One engine per (model file, context size) in this process, loaded on first use;
    every user serialises on the engine's lock."""
    path = str(resolve_model(model))
    with _ENGINES_LOCK:
        engine = _ENGINES.get((path, n_ctx))
        if engine is None:
            engine = Engine(path, n_ctx=n_ctx)
            _ENGINES[(path, n_ctx)] = engine
        return engine


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
