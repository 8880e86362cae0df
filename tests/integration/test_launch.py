"""The console entry asks glibc for huge pages by re-executing itself once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolweave.adapters.cli.launch import TUNABLE, huge_pages_active, huge_pages_env


def _linux_glibc() -> bool:
    return huge_pages_env({}, thp_mode="madvise") is not None


@pytest.mark.skipif(not _linux_glibc(), reason="needs Linux with glibc >= 2.35")
def test_the_tunable_is_added_only_in_madvise_mode_and_once() -> None:
    env = huge_pages_env({"PATH": "/bin"}, thp_mode="madvise")
    assert env is not None and env["GLIBC_TUNABLES"] == f"{TUNABLE}=1" and env["PATH"] == "/bin"
    assert huge_pages_active(env)
    # other tunables are kept; a value the user chose is left alone (no second exec)
    kept = huge_pages_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, thp_mode="madvise")
    assert kept is not None
    assert kept["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{TUNABLE}=1"
    assert huge_pages_env(env, thp_mode="madvise") is None
    assert huge_pages_env({"GLIBC_TUNABLES": f"{TUNABLE}=0"}, thp_mode="madvise") is None
    assert not huge_pages_active({"GLIBC_TUNABLES": f"{TUNABLE}=0"})
    # the kernel already backs large mappings, or never will: nothing to gain
    assert huge_pages_env({}, thp_mode="always") is None
    assert huge_pages_env({}, thp_mode="never") is None
    assert huge_pages_env({"TOOLWEAVE_HUGE_PAGES": "0"}, thp_mode="madvise") is None


def test_the_entry_re_executes_with_huge_pages_and_runs_the_command(tmp_path: Path) -> None:
    if huge_pages_env({}) is None:
        pytest.skip("this kernel or libc gains nothing from the tunable")
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent(
            """
            import os, sys
            from toolweave.adapters.cli import launch
            if launch.huge_pages_active():
                print("active", os.environ["GLIBC_TUNABLES"], sys.argv[1:])
                sys.exit(0)
            launch.main()  # re-executes this script; the CLI never runs here
            """
        )
    )
    env = {
        k: v for k, v in os.environ.items() if k not in {"GLIBC_TUNABLES", "TOOLWEAVE_HUGE_PAGES"}
    }
    out = subprocess.run(
        [sys.executable, str(probe), "run", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split() == ["active", f"{TUNABLE}=1", "['run',", "'--help']"]
    # switched off: no re-execution, the real CLI answers
    env["TOOLWEAVE_HUGE_PAGES"] = "0"
    out = subprocess.run(
        [sys.executable, str(probe), "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "Usage: toolweave" in out.stdout
