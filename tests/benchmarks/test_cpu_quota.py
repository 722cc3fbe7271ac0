"""The benchmark's CPU quota (bench/fastest/cpu_quota.py) on cgroup v1 and v2.

Which version holds the cpu controller is read from mount tables of each layout; the real test
limits a busy process with the kernel of this machine, whichever version it has.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import missing

_PATH = Path(__file__).resolve().parents[2] / "bench" / "fastest" / "cpu_quota.py"
_spec = importlib.util.spec_from_file_location("cpu_quota", _PATH)
Q = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(Q)


def _v2_mount(root: Path, controllers: str) -> Path:
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("\n")
    return root


def test_cgroup_v2_with_the_cpu_controller_is_chosen(tmp_path):
    v2 = _v2_mount(tmp_path / "unified root", "cpuset cpu io memory pids")
    mounts = f"cgroup2 {str(v2).replace(' ', chr(92) + '040')} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"
    assert Q.find_cpu_hierarchy(mounts) == (2, v2)


def test_hybrid_layout_uses_the_v1_cpu_mount(tmp_path):
    # systemd's hybrid layout: controllers on v1, an empty v2 mount at .../unified
    unified = _v2_mount(tmp_path / "unified", "hugetlb")
    cpu = tmp_path / "cpu"
    mounts = "\n".join([
        "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0",
        f"cgroup {tmp_path / 'cpuacct'} cgroup rw,relatime,cpuacct 0 0",
        f"cgroup {cpu} cgroup rw,relatime,cpu 0 0",
        f"cgroup2 {unified} cgroup2 rw,relatime 0 0",
    ])
    assert Q.find_cpu_hierarchy(mounts) == (1, cpu)
    both = f"cgroup {tmp_path / 'cpu,cpuacct'} cgroup rw,nosuid,cpu,cpuacct 0 0"
    assert Q.find_cpu_hierarchy(both) == (1, tmp_path / "cpu,cpuacct")


def test_no_cpu_controller_is_said_in_words(tmp_path):
    v2 = _v2_mount(tmp_path / "v2", "memory pids")
    with pytest.raises(Q.CpuQuotaError, match="cpu controller"):
        Q.find_cpu_hierarchy(f"cgroup2 {v2} cgroup2 rw 0 0\nproc /proc proc rw 0 0")


def test_v2_enables_the_controller_in_the_parent_then_writes_cpu_max(tmp_path):
    # The files a v2 kernel offers, as plain files: no v2 cpu controller is free on every machine.
    v2 = _v2_mount(tmp_path / "v2", "cpu memory")
    quota = Q.CpuQuota("herd-test", mounts=f"cgroup2 {v2} cgroup2 rw 0 0")
    cg = quota.limit("w3", 4242, 0.4)
    assert (v2 / "cgroup.subtree_control").read_text() == "+cpu"
    assert (cg / "cpu.max").read_text() == "1000 2500"
    assert (cg / "cgroup.procs").read_text() == "4242"
    assert not (cg / "cpu.cfs_quota_us").exists()
    with pytest.raises(ValueError, match="share"):
        quota.limit("w4", 4242, 1.5)


def _cpu_stat(cg: Path) -> dict[str, int]:
    # cpu.stat of the cgroup: nr_periods, nr_throttled, … (the same keys on v1 and v2)
    return {k: int(v) for k, v in (ln.split() for ln in (cg / "cpu.stat").read_text().splitlines())}


def test_real_cgroup_holds_a_busy_process_to_its_share():
    if os.geteuid() != 0:
        missing("making a cgroup needs root")
    quota = Q.CpuQuota(f"herd-test-{os.getpid()}")
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        cg = quota.limit("spin", spin.pid, 0.1)
        proc = psutil.Process(spin.pid)
        cpu0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
        # The kernel counts the periods in which it throttled the process: wait for 100 periods
        # (1 s), most of them throttled, as a process that wants a whole CPU must be.
        deadline = time.monotonic() + 20
        while (stat := _cpu_stat(cg))["nr_periods"] < 100:
            assert time.monotonic() < deadline, f"the cgroup saw {stat} in 20 s (version {quota.version})"
            time.sleep(0.05)
        used = (sum(proc.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0)
        assert stat["nr_throttled"] >= stat["nr_periods"] // 2, stat
        # At most 10 % of a CPU (1 ms per 10 ms); unlimited, it would take a whole core on
        # this machine unless five other processes kept both cores busy.
        assert used <= 0.3, f"the limited process used {used:.0%} of a CPU (version {quota.version})"
    finally:
        spin.kill()
        spin.wait(timeout=5)
        quota.close()
    assert not cg.exists()
