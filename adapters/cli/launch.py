"""The `toolweave` console entry: ask glibc for huge pages, then run the CLI.

An engine's context holds a KV buffer of n_ctx cells (47 MB for SmolLM2 at n_ctx=2048)
that llama.cpp clears when it creates the context, so every page is touched up front.
With 4 KiB pages that costs ~10 ms per 23 MB here (one page fault per page), which is
what the first request pays after an idle release (`toolweave.native.states.idle`). Backed by
2 MiB transparent huge pages the same buffer is cleared ~3x faster (measured: 21.5 ->
6.9 ms at n_ctx=2048, 38.7 -> 9.7 ms at 4096).

glibc only madvises its large allocations for huge pages when the tunable
`glibc.malloc.hugetlb=1` is set, and tunables are read once at process start. So, when the
kernel offers transparent huge pages on request (`madvise` mode) and glibc knows the
tunable (2.35+), this entry re-executes the same command once with the tunable added.
`TOOLWEAVE_HUGE_PAGES=0` turns it off; a library user sets the variable themselves
(`GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python app.py`). `huge_pages_active()` reports
whether this process runs with it.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["huge_pages_active", "huge_pages_env", "main"]

TUNABLE = "glibc.malloc.hugetlb"
_THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")
_OFF = {"0", "false", "no", "off"}


def _thp_mode(path: Path = _THP_MODE) -> str | None:
    """The kernel's THP mode (`always`, `madvise`, `never`), None if unknown."""
    try:
        text = path.read_text(encoding="ascii")
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def _glibc_has_tunable() -> bool:
    lib, version = platform.libc_ver()
    if lib != "glibc":
        return False
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (2, 35)


def huge_pages_active(environ: Mapping[str, str] | None = None) -> bool:
    """True when glibc was told to use huge pages for large allocations in this process."""
    env = os.environ if environ is None else environ
    return any(item.strip() == f"{TUNABLE}=1" for item in env.get("GLIBC_TUNABLES", "").split(":"))


def huge_pages_env(
    environ: Mapping[str, str] | None = None, thp_mode: str | None = None
) -> dict[str, str] | None:
    """The environment to re-execute with, or None when it would change nothing.

    None when: not Linux with glibc >= 2.35, the kernel's THP mode is not `madvise`
    (`always` needs no advice, `never` ignores it), the tunable is already set (to any
    value: the user decided), or `TOOLWEAVE_HUGE_PAGES` is off.
    """
    env = dict(os.environ if environ is None else environ)
    if env.get("TOOLWEAVE_HUGE_PAGES", "").strip().lower() in _OFF:
        return None
    if not sys.platform.startswith("linux") or not _glibc_has_tunable():
        return None
    if (thp_mode if thp_mode is not None else _thp_mode()) != "madvise":
        return None
    tunables = [t for t in env.get("GLIBC_TUNABLES", "").split(":") if t.strip()]
    if any(t.split("=", 1)[0].strip() == TUNABLE for t in tunables):
        return None
    env["GLIBC_TUNABLES"] = ":".join([*tunables, f"{TUNABLE}=1"])
    return env


def main() -> None:
    """Console entry: re-execute once with huge pages if that helps, then run the CLI."""
    env = huge_pages_env()
    if env is not None:
        with contextlib.suppress(OSError):  # could not re-execute: run as we are
            os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    from toolweave.adapters.cli.app import main as cli_main

    cli_main()
