"""Progress notifications of MCP tool calls, as `ProgressUpdate`s for a plain callback."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from mcp.shared.dispatcher import ProgressFnT

__all__ = ["ProgressCallback", "ProgressUpdate", "sdk_progress_callback"]

logger = logging.getLogger(__name__)

#: Longest progress message kept (servers' text is untrusted).
MAX_PROGRESS_MESSAGE = 200


@dataclass(frozen=True)
class ProgressUpdate:
    """One progress notification: how far tool ``tool`` of ``server`` is (of ``total``)."""

    server: str
    tool: str
    progress: float
    total: float | None = None
    message: str | None = None

    @property
    def fraction(self) -> float | None:
        """Progress as a fraction of the total, when the server gave a positive total."""
        if self.total is None or self.total <= 0:
            return None
        return max(0.0, min(1.0, self.progress / self.total))

    def line(self) -> str:
        """One line: ``tool 3/5 (60%): message``."""
        amount = f"{self.progress:g}" + (f"/{self.total:g}" if self.total is not None else "")
        fraction = self.fraction
        if fraction is not None:
            amount += f" ({fraction:.0%})"
        text = " ".join((self.message or "").split())
        return f"{self.tool} {amount}" + (f": {text}" if text else "")


#: Receives the progress of a call; runs on the hub's event loop thread, so keep it quick.
ProgressCallback = Callable[[ProgressUpdate], None]


def sdk_progress_callback(server: str, tool: str, *callbacks: ProgressCallback) -> ProgressFnT:
    """The SDK's progress callback for one call, handing each update to ``callbacks``.

    A callback that raises is logged and does not disturb the call.
    """

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        update = ProgressUpdate(
            server,
            tool,
            float(progress),
            None if total is None else float(total),
            message[:MAX_PROGRESS_MESSAGE] if message else None,
        )
        for callback in callbacks:
            try:
                callback(update)
            except Exception:
                logger.warning("MCP progress callback failed", exc_info=True)

    return on_progress
