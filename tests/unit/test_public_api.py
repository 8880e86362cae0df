"""The public API imports, and toolkit/ stays free of llama.cpp."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import toolweave
import toolweave.native


def test_all_names_resolve() -> None:
    for mod in (toolweave, toolweave.native):
        for name in mod.__all__:
            assert getattr(mod, name) is not None, (mod.__name__, name)


def test_toolkit_does_not_import_llama_cpp() -> None:
    code = (
        "import sys, toolweave, toolweave.eval.bfcl, toolweave.eval.scoring\n"
        "print('llama_cpp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    toolkit = Path(toolweave.__file__).parent
    for path in toolkit.rglob("*.py"):
        assert "llama_cpp" not in path.read_text(encoding="utf-8"), path
