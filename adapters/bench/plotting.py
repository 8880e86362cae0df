"""Matplotlib for the benchmark plots: headless, and a clear error when it is missing."""

from __future__ import annotations

from types import ModuleType

from toolweave.errors import ToolweaveError

__all__ = ["pyplot"]


def pyplot() -> ModuleType:
    """`matplotlib.pyplot` on the Agg backend; `ToolweaveError` without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        raise ToolweaveError("--plot needs matplotlib: pip install 'toolweave[bench]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
