"""The default thread count: performance cores only, one thread per physical core, at
most the cgroup CPU quota. Fake sysfs and cgroup trees stand in for the machines this
one is not (a hybrid laptop, a container with a quota)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolweave.native.threads import (
    cgroup_cpu_quota,
    count_core_records,
    default_threads,
    parse_cpu_list,
    performance_cpus,
    physical_cores,
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_cpu_lists_parse_like_the_kernel_writes_them() -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpu_list("5") == {5}
    assert parse_cpu_list("\n") == set()
    for bad in ("3-1", "a", "0-x", "-2"):
        with pytest.raises(ValueError):
            parse_cpu_list(bad)


def test_a_hybrid_laptop_gets_one_thread_per_performance_core(tmp_path: Path) -> None:
    # 2 P-cores with two threads each (CPUs 0-3), 8 E-cores of one thread (CPUs 4-11).
    sysfs = tmp_path / "cpu"
    for cpu in range(12):
        core = cpu // 2 if cpu < 4 else cpu
        _write(sysfs / f"cpu{cpu}" / "topology" / "physical_package_id", "0\n")
        _write(sysfs / f"cpu{cpu}" / "topology" / "core_id", f"{core}\n")
    atoms = _write(tmp_path / "cpu_atom" / "cpus", "4-11\n")
    every = set(range(12))
    assert physical_cores(every, sysfs=sysfs) == 10  # what the old default ran on
    assert performance_cpus(every, atoms) == {0, 1, 2, 3}
    assert physical_cores(performance_cpus(every, atoms), sysfs=sysfs) == 2
    # Pinned to E-cores only, or on a CPU that lists none: the CPUs as they are.
    assert performance_cpus({4, 5}, atoms) == {4, 5}
    assert performance_cpus(every, tmp_path / "missing") == every
    assert performance_cpus(every, _write(tmp_path / "bad", "x")) == every


def test_a_cgroup_v2_quota_caps_the_threads(tmp_path: Path) -> None:
    proc = _write(tmp_path / "proc-cgroup", "0::/docker/abc\n")
    root = tmp_path / "cg"
    assert cgroup_cpu_quota(root, proc) is None  # no files: no quota known
    limit = _write(root / "docker" / "abc" / "cpu.max", "250000 100000\n")
    assert cgroup_cpu_quota(root, proc) == 2  # 2.5 CPUs: 2 threads, never throttled
    _write(root / "docker" / "cpu.max", "100000 100000\n")  # a parent's limit is lower
    assert cgroup_cpu_quota(root, proc) == 1
    (root / "docker" / "cpu.max").write_text("max 100000\n")
    limit.write_text("max 100000\n")
    assert cgroup_cpu_quota(root, proc) is None
    limit.write_text("20000 100000\n")  # a fifth of a CPU still runs on one thread
    assert cgroup_cpu_quota(root, proc) == 1
    limit.write_text("garbage\n")
    assert cgroup_cpu_quota(root, proc) is None
    assert cgroup_cpu_quota(root, tmp_path / "no-proc-file") is None


def test_a_cgroup_v1_quota_caps_the_threads(tmp_path: Path) -> None:
    proc = _write(tmp_path / "proc-cgroup", "4:memory:/x\n3:cpu,cpuacct:/x\n1:name=systemd:/\n")
    folder = tmp_path / "cg" / "cpu,cpuacct" / "x"
    _write(folder / "cpu.cfs_period_us", "100000\n")
    quota = _write(folder / "cpu.cfs_quota_us", "300000\n")
    assert cgroup_cpu_quota(tmp_path / "cg", proc) == 3
    quota.write_text("-1\n")  # unlimited
    assert cgroup_cpu_quota(tmp_path / "cg", proc) is None
    _write(tmp_path / "bad-proc", "not a cgroup line\n")
    assert cgroup_cpu_quota(tmp_path / "cg", tmp_path / "bad-proc") is None


def test_windows_core_records_are_counted_by_relationship() -> None:
    def record(relationship: int, size: int) -> bytes:
        return relationship.to_bytes(4, "little") + size.to_bytes(4, "little") + bytes(size - 8)

    cores = record(0, 48) * 6
    assert count_core_records(cores) == 6
    assert count_core_records(cores + record(2, 80)) == 6  # a cache record is no core
    assert count_core_records(record(0, 48) + bytes(8)) == 1  # a size of 0 ends the walk
    assert count_core_records(b"") == 0


def test_this_machine_gets_between_one_thread_and_its_cpus() -> None:
    assert 1 <= default_threads() <= (os.cpu_count() or 1)
