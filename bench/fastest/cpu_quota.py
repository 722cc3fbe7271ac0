"""CPU quotas for benchmark processes: a cgroup per process that lets it use a share of one CPU.

Works on cgroup v2 (``cpu.max`` in a child of the unified hierarchy, with the cpu controller
enabled in the parent's ``cgroup.subtree_control``) and on cgroup v1 (``cpu.cfs_period_us`` and
``cpu.cfs_quota_us`` in the cpu controller's hierarchy), whichever holds the cpu controller on
this machine, detected at run time from ``/proc/self/mounts``. A hybrid layout (v1 controllers
plus an empty ``unified`` v2 mount) counts as v1, since that is where the cpu controller is.
"""

from __future__ import annotations

import time
from pathlib import Path

# The kernel's smallest quota (1 ms) in a period as short as the share allows: quota left unused
# while a worker waits for the others cannot pile up into a long full-speed burst, so it computes
# at its share's speed whatever its share of the layers — like a slower CPU, not a throttled one.
QUOTA_US = 1_000
MAX_PERIOD_US = 1_000_000  # both v1 and v2 refuse longer periods


class CpuQuotaError(RuntimeError):
    """The machine offers no way to limit a process's CPU share (said in words)."""


def _unescape(field: str) -> str:
    # /proc/self/mounts writes spaces, tabs and newlines in paths as octal escapes
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, ch)
    return field


def find_cpu_hierarchy(mounts: str) -> tuple[int, Path]:
    """``(version, mount point)`` of the cgroup hierarchy that holds the cpu controller.

    ``mounts`` is the text of ``/proc/self/mounts``. A v2 mount counts only when its
    ``cgroup.controllers`` lists ``cpu`` (in a hybrid layout the v1 cpu mount holds it instead).
    Raises :class:`CpuQuotaError` when no mount has it.
    """
    v1 = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        where, fstype, options = Path(_unescape(fields[1])), fields[2], fields[3].split(",")
        if fstype == "cgroup2":
            try:
                controllers = (where / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if "cpu" in controllers:
                return 2, where
        elif fstype == "cgroup" and "cpu" in options and v1 is None:
            v1 = where
    if v1 is not None:
        return 1, v1
    raise CpuQuotaError("no cgroup hierarchy on this machine has the cpu controller "
                        "(neither cgroup v2 with cpu in cgroup.controllers nor a v1 cpu mount)")


class CpuQuota:
    """Limits processes to a share of one CPU, one cgroup each; :meth:`close` removes the cgroups.

    Attributes:
        version: 1 or 2, the cgroup version in use.
        root: the hierarchy's mount point; the cgroups are made directly under it.
        tag: prefix of the cgroups' names (unique to the run).
        made: the cgroups made so far.
    """

    def __init__(self, tag: str, mounts: str | None = None) -> None:
        if mounts is None:
            mounts = Path("/proc/self/mounts").read_text()
        self.version, self.root = find_cpu_hierarchy(mounts)
        self.tag = tag
        self.made: list[Path] = []

    def limit(self, name: str, pid: int, share: float) -> Path:
        """Put process ``pid`` in a new cgroup ``<tag>-<name>`` that may use ``share`` of one CPU."""
        if not QUOTA_US / MAX_PERIOD_US <= share <= 1:
            raise ValueError(f"a CPU share must be between {QUOTA_US / MAX_PERIOD_US} and 1, got {share}")
        period_us = int(QUOTA_US / share)
        cg = self.root / f"{self.tag}-{name}"
        if self.version == 2:
            self._enable_cpu_controller()
        cg.mkdir()
        self.made.append(cg)
        if self.version == 2:
            (cg / "cpu.max").write_text(f"{QUOTA_US} {period_us}")
        else:
            (cg / "cpu.cfs_period_us").write_text(str(period_us))
            (cg / "cpu.cfs_quota_us").write_text(str(QUOTA_US))
        (cg / "cgroup.procs").write_text(str(pid))
        return cg

    def _enable_cpu_controller(self) -> None:
        # v2 hands a controller to children only when the parent lists it in subtree_control.
        control = self.root / "cgroup.subtree_control"
        if "cpu" in control.read_text().split():
            return
        try:
            control.write_text("+cpu")
        except OSError as e:
            raise CpuQuotaError(f"cannot enable the cpu controller in {control}: {e} (a cgroup that holds "
                                "processes itself cannot hand controllers to children, e.g. in a container)") from e

    def close(self, wait_s: float = 10.0) -> None:
        """Remove the cgroups. A group whose last process is still exiting cannot be removed
        yet (EBUSY): each is tried again for up to ``wait_s`` seconds; one still busy then is left."""
        deadline = time.monotonic() + wait_s
        for cg in reversed(self.made):
            while True:
                try:
                    cg.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
        self.made.clear()
