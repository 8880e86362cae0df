"""The wheel holds every package and data file of the source tree.

`[tool.setuptools] packages` in pyproject.toml is written by hand; this keeps it honest.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Source folder -> the package it installs as (`package-dir` in pyproject.toml).
PACKAGE_DIRS = {
    "toolkit": "toolweave",
    "native": "toolweave.native",
    "adapters": "toolweave.adapters",
}
DATA_FILES = ("adapters/demo_servers/*.json", "adapters/bench/data/*.json", "toolkit/py.typed")


def _installed_path(source: Path) -> str:
    """Where a file of the source tree lands in the wheel."""
    top, *rest = source.relative_to(ROOT).parts
    return "/".join([*PACKAGE_DIRS[top].split("."), *rest])


def test_the_wheel_holds_every_package_and_data_file(tmp_path: Path) -> None:
    # Built from a copy, so setuptools' build/ folder never lands in the checkout.
    source = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for top in PACKAGE_DIRS:
        shutil.copytree(ROOT / top, source / top, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    # No build isolation and no dependencies: only toolweave is built, nothing downloaded.
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("toolweave-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    inits = [p for top in PACKAGE_DIRS for p in (ROOT / top).rglob("__init__.py")]
    assert inits
    missing = [_installed_path(p) for p in inits if _installed_path(p) not in names]
    assert not missing, f"packages missing from pyproject.toml: {missing}"
    data = [p for pattern in DATA_FILES for p in ROOT.glob(pattern)]
    assert len(data) >= 3
    missing = [_installed_path(p) for p in data if _installed_path(p) not in names]
    assert not missing, f"data files missing from the wheel: {missing}"
