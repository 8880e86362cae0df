"""How many threads a pass runs on by default: one per performance core this process may
use, and no more than its CPU quota.

llama.cpp's own tools pick their default the same way (`cpu_get_num_math`):

- a second hardware thread of a core shares its arithmetic units and cache, and decoding
  is bound by them (or by memory bandwidth), so hyper-threads rarely help and often slow
  a serial step: one thread per physical core;
- on a hybrid CPU (Intel's P- and E-cores, Apple's performance and efficiency levels)
  the threads of a pass move in lockstep, so the slower efficiency cores hold every pass
  back: the performance cores only;
- a container limited to N CPUs (a cgroup CPU quota) gets at most N threads: more would
  spin against the quota and be throttled mid-pass. llama.cpp does not look at quotas.

llama-cpp-python's default (half the logical CPUs) is one thread on a 2-core machine.
Every reading is best effort: what cannot be read falls back to the next rule, and the
result is at least 1.
"""

from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys
from pathlib import Path

__all__ = [
    "cgroup_cpu_quota",
    "count_core_records",
    "default_threads",
    "math_cores",
    "parse_cpu_list",
    "performance_cpus",
    "physical_cores",
]

_CPU = Path("/sys/devices/system/cpu")
#: Where Linux lists the CPUs of each core type of a hybrid Intel CPU.
_EFFICIENCY_CPUS = Path("/sys/devices/cpu_atom/cpus")
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_PROC_CGROUP = Path("/proc/self/cgroup")


def _usable_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: every CPU the OS reports
        return set(range(os.cpu_count() or 1))


def parse_cpu_list(text: str) -> set[int]:
    """The CPUs of a Linux CPU list ("0-3,8,10-11"); ValueError if it is not one."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        start, end = int(first), int(last or first)
        if start < 0 or end < start or end - start > 65536:
            raise ValueError(f"not a CPU range: {part!r}")
        cpus.update(range(start, end + 1))
    return cpus


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


def performance_cpus(cpus: set[int], efficiency_list: Path = _EFFICIENCY_CPUS) -> set[int]:
    """`cpus` without the efficiency cores Linux lists for a hybrid Intel CPU; all of
    `cpus` where it lists none (or only those)."""
    try:
        efficiency = parse_cpu_list(efficiency_list.read_text())
    except (OSError, ValueError):
        return cpus
    return (cpus - efficiency) or cpus


def cgroup_cpu_quota(root: Path = _CGROUP_ROOT, proc_cgroup: Path = _PROC_CGROUP) -> int | None:
    """Whole CPUs this process's cgroup (or a parent of it) may use, cgroup v2 or v1;
    None where no quota is set or none can be read."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # v2: "0::/path", limit in cpu.max as "QUOTA PERIOD"
            for folder in _up_to(root, path):
                limits += _quota(folder / "cpu.max", None)
        elif "cpu" in controllers.split(","):  # v1: quota and period in two files
            mount = root / controllers
            if not mount.is_dir():
                mount = root / "cpu"
            for folder in _up_to(mount, path):
                limits += _quota(folder / "cpu.cfs_quota_us", folder / "cpu.cfs_period_us")
    if not limits:
        return None
    return max(1, math.floor(min(limits)))


def _up_to(mount: Path, path: str) -> list[Path]:
    """The cgroup folder of `path` under `mount` and each parent up to the mount. Inside a
    container the cgroup path may name a folder the container does not see: those are
    skipped by the reader."""
    parts = [p for p in path.strip().split("/") if p and p not in (".", "..")]
    return [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _quota(quota_file: Path, period_file: Path | None) -> list[float]:
    """[CPUs] from one cgroup's quota files, [] where unlimited or unreadable."""
    try:
        words = quota_file.read_text().split()
        if period_file is not None:
            words += period_file.read_text().split()
        quota, period = words[0], words[1]
        if quota == "max" or int(quota) <= 0 or int(period) <= 0:
            return []
        return [int(quota) / int(period)]
    except (OSError, ValueError, IndexError):
        return []


def _macos_performance_cores() -> int | None:
    # Apple silicon: the performance level's cores; Intel Macs: the physical cores.
    for key in ("hw.perflevel0.physicalcpu", "hw.physicalcpu"):
        try:
            out = subprocess.run(
                ["sysctl", "-n", key], capture_output=True, text=True, timeout=2, check=True
            )
            return max(1, int(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError, ValueError):
            continue
    return None


def count_core_records(buffer: bytes) -> int:
    """Processor-core records in a `GetLogicalProcessorInformationEx(RelationProcessorCore)`
    buffer: each starts with its relationship (0 for a core) and its size, both DWORDs."""
    cores, offset = 0, 0
    while offset + 8 <= len(buffer):
        relationship = int.from_bytes(buffer[offset : offset + 4], "little")
        size = int.from_bytes(buffer[offset + 4 : offset + 8], "little")
        if size < 8:
            break
        cores += relationship == 0
        offset += size
    return cores


def _windows_physical_cores() -> int | None:
    try:
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        size = ctypes.c_ulong(0)
        kernel32.GetLogicalProcessorInformationEx(0, None, ctypes.byref(size))
        if not 0 < size.value < 1 << 24:
            return None
        buffer = ctypes.create_string_buffer(size.value)
        if not kernel32.GetLogicalProcessorInformationEx(0, buffer, ctypes.byref(size)):
            return None
        return count_core_records(buffer.raw[: size.value]) or None
    except (AttributeError, OSError, ValueError):
        return None


def _halved(logical: int) -> int:
    """llama.cpp's guess where the cores cannot be read: half the logical CPUs past 4."""
    return logical if logical <= 4 else logical // 2


def math_cores() -> int:
    """Cores worth a thread of their own in a pass, before any quota."""
    if sys.platform.startswith("linux"):
        return physical_cores(performance_cpus(_usable_cpus()))
    logical = len(_usable_cpus())
    if sys.platform == "darwin":
        found = _macos_performance_cores()
    elif sys.platform == "win32":
        found = _windows_physical_cores()
    else:
        found = None
    return min(found, logical) if found else _halved(logical)


def default_threads() -> int:
    """Threads for every kind of pass when the caller names none."""
    quota = cgroup_cpu_quota() if sys.platform.startswith("linux") else None
    cores = math_cores()
    return max(1, min(cores, quota) if quota else cores)
