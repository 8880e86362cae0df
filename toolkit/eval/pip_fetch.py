"""Fetch one package file from the package index with pip, bounded in time (no install)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["FetchError", "pip_download"]


class FetchError(Exception):
    """pip could not fetch the file in time; the message is one line and pip's last words."""


def pip_download(
    requirement: str, into: Path, *, sdist: bool, pattern: str, timeout: float
) -> Path:
    """The file matching `pattern` that ``pip download REQUIREMENT`` puts in `into`: the
    source archive with `sdist`, else a wheel; no dependencies, never built."""
    binary = ["--no-binary", ":all:"] if sdist else ["--only-binary=:all:"]
    command = [
        sys.executable, "-m", "pip", "download", requirement, "--no-deps", *binary,
        "--disable-pip-version-check", "--retries", "2", "--timeout", "30", "-q",
        "-d", str(into),
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise FetchError(f"pip download of {requirement} took over {timeout:.0f} s") from None
    found = sorted(into.glob(pattern))
    if done.returncode != 0 or not found:
        last = ((done.stderr or done.stdout).strip().splitlines() or ["no output"])[-1]
        raise FetchError(
            f"pip download of {requirement} failed (exit {done.returncode}): {last[:200]}"
        )
    return found[0]
