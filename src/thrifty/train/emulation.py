# SPDX-License-Identifier: MIT
"""Make a rank slower on purpose, for experiments and tests of heterogeneous training.

- `sleep` (portable default): after computing, sleep (f - 1) x the measured compute time, so
  compute takes f times as long. Sleeping frees the core, which keeps 4 emulated workers on a
  2-core machine from slowing each other more than the profile says.
- `cgroup` (root, cgroup v1 cpu controller): the rank runs in its own cpu cgroup with CFS quota
  period / f, i.e. 1/f of a core. Groups live under one directory per run and are removed at the
  end, by the rank and again by the launcher in case a rank was killed.
"""

import os
import time
from pathlib import Path

from thrifty.train.hetero import HeteroError, SlowdownSchedule

CGROUP_CPU_ROOT = Path("/sys/fs/cgroup/cpu")
CFS_PERIOD_US = 100_000
EMULATIONS = ("sleep", "cgroup")


def cgroup_run_dir(tag: str) -> Path:
    return CGROUP_CPU_ROOT / f"thrifty-{tag}"


def check_cgroup_support() -> None:
    if os.geteuid() != 0:
        raise HeteroError("--emulate cgroup needs root; use --emulate sleep")
    if not (CGROUP_CPU_ROOT / "cpu.cfs_quota_us").exists():
        raise HeteroError(f"--emulate cgroup needs the cgroup v1 cpu controller at {CGROUP_CPU_ROOT}; "
                          "use --emulate sleep")


def remove_cgroups(tag: str) -> None:
    """Remove a run's cgroups; processes still inside move back to the root group first."""
    run_dir = cgroup_run_dir(tag)
    if not run_dir.exists():
        return
    for group in sorted(run_dir.iterdir()):
        if group.is_dir():
            _evacuate(group)
            group.rmdir()
    _evacuate(run_dir)
    run_dir.rmdir()


def _evacuate(group: Path) -> None:
    for pid in (group / "cgroup.procs").read_text().split():
        try:
            (CGROUP_CPU_ROOT / "cgroup.procs").write_text(pid)
        except ProcessLookupError:
            pass


class Slowdown:
    """Applies rank `rank`'s slowdown from the schedule; `after_compute` returns seconds it slept."""

    def __init__(self, schedule: SlowdownSchedule | None, rank: int, mode: str = "sleep",
                 tag: str | None = None) -> None:
        if mode not in EMULATIONS:
            raise HeteroError(f"unknown emulation {mode!r}; choose sleep or cgroup")
        self.schedule, self.rank, self.mode = schedule, rank, mode
        self.group: Path | None = None
        self._quota_factor: float | None = None
        if schedule is not None and mode == "cgroup":
            check_cgroup_support()
            run_dir = cgroup_run_dir(tag or str(os.getppid()))
            run_dir.mkdir(exist_ok=True)
            self.group = run_dir / f"rank{rank}"
            self.group.mkdir(exist_ok=True)
            (self.group / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (self.group / "cgroup.procs").write_text(str(os.getpid()))

    def factor(self, step: int) -> float:
        return 1.0 if self.schedule is None else self.schedule.at(step)[self.rank]

    def before_step(self, step: int) -> None:
        """cgroup mode: set this step's quota (written only when the factor changes)."""
        if self.group is None:
            return
        f = self.factor(step)
        if f != self._quota_factor:
            quota = -1 if f <= 1.0 else max(1000, int(CFS_PERIOD_US / f))
            (self.group / "cpu.cfs_quota_us").write_text(str(quota))
            self._quota_factor = f

    def after_compute(self, step: int, compute_s: float) -> float:
        if self.schedule is None or self.mode != "sleep":
            return 0.0
        extra = (self.factor(step) - 1.0) * compute_s
        if extra <= 0:
            return 0.0
        start = time.perf_counter()
        time.sleep(extra)
        return time.perf_counter() - start

    def close(self) -> None:
        if self.group is not None and self.group.exists():
            _evacuate(self.group)
            self.group.rmdir()
            self.group = None
