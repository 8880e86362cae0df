"""How many threads a pass runs on by default: one per physical core this process may use.

llama.cpp's own tools default to the physical cores too: a second hardware thread of a
core shares its arithmetic units and cache, and decoding is bound by them (or by memory
bandwidth), so hyper-threads rarely help and often slow a serial step. llama-cpp-python's
default (half the logical CPUs) is one thread on a 2-core machine.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_threads", "physical_cores"]

_CPU = Path("/sys/devices/system/cpu")


def _usable_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: every CPU the OS reports
        return set(range(os.cpu_count() or 1))


def physical_cores(cpus: set[int] | None = None, sysfs: Path = _CPU) -> int:
    """Distinct physical cores among `cpus` (default: those this process may run on),
    read from the kernel's CPU topology; the CPU count where the topology is unreadable."""
    usable = _usable_cpus() if cpus is None else cpus
    cores: set[tuple[str, str]] = set()
    for cpu in usable:
        topo = sysfs / f"cpu{cpu}" / "topology"
        try:
            package = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            return max(1, len(usable))
        cores.add((package, core))
    return max(1, len(cores))


def default_threads() -> int:
    """Threads for every kind of pass when the caller names none."""
    return physical_cores()
