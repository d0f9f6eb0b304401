# SPDX-License-Identifier: MIT
"""Is this machine quiet enough to profile on? Other tasks' load (the runnable tasks before the
profile, and those outside the profile's own processes while it runs), CPU time the hypervisor
stole (/proc/stat), and how much repeated runs of one setting differed. A profile wants every core
(2 ranks, or 2 threads, on a 2-core machine): another task on one of them slows those runs up to
2x and the fit takes it as the job's. Load that arrives after the first reading (a neighbour's job
starting) is what the reading during the profile catches.

Thresholds (ours):
  load    other runnable tasks more than half a core beyond the cores the profile leaves free
          (cores - profile_cores + 0.5; 0.5 on a 2-core machine, where the profile takes both:
          a busy loop started during a profile read 0.9 there and passed the 1.0 of "half of
          every core" that this replaced, though it slowed the two-rank steps 1.7x)
  steal   > 5% of CPU time stolen during the window
  spread  runs of one setting differ by more than 20% (median over settings): two runs of a
          quiet machine differ by sd 0.09 sqrt 2 = 0.13 in log (perf.uncertainty), 20% is
          beyond their 90% quantile (0.21 in log, about 20%)
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from thrifty.errors import ThriftyError
from thrifty.processes import PROC, process_tree, procs_running, stat_fields

log = logging.getLogger(__name__)

Measured = TypeVar("Measured")  # what measure_quietly's `measure` returns (a profile)

BUSY_LOAD_MARGIN = 0.5  # a core's half, beyond the cores the profile leaves free
PROFILE_CORES = 2  # the profile runs 2 ranks of 1 thread, or 1 rank of 2 threads (thread scaling)
BUSY_STEAL_FRACTION = 0.05
BUSY_SPREAD = 0.20
ALLOW_BUSY_ENV = "THRIFTY_ALLOW_BUSY"  # "1": as --allow-busy (the test suite runs on loaded machines)


class BusyMachineError(ThriftyError):
    """The profiling machine was too busy for measurements to be trusted."""


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time of all cores from /proc/stat's first line, in clock ticks."""

    total: float
    steal: float

    @classmethod
    def read(cls, path: str = "/proc/stat") -> "CpuTimes":
        try:
            with open(path) as f:
                fields = [float(x) for x in f.readline().split()[1:9]]  # user .. steal
        except (OSError, ValueError):
            return cls(0.0, 0.0)  # not Linux: no steal reading
        return cls(sum(fields), fields[7] if len(fields) > 7 else 0.0)

    def steal_since(self, earlier: "CpuTimes") -> float:
        ticks = self.total - earlier.total
        return (self.steal - earlier.steal) / ticks if ticks > 0 else 0.0


@dataclass(frozen=True)
class Readings:
    """What the checks saw: before the profile, or during it (`others_load` then counts the tasks
    outside the profile's own processes; None where /proc cannot say)."""

    cores: int
    others_load: float | None
    steal_fraction: float
    run_spread: float | None  # median relative spread between runs of one setting
    profile_cores: int = PROFILE_CORES  # the cores the profile itself keeps busy

    def load_limit(self) -> float:
        """The other tasks' load beyond which the profile shares its cores (module docstring)."""
        return max(self.cores - self.profile_cores, 0) + BUSY_LOAD_MARGIN

    def reasons(self) -> list[str]:
        out = []
        if self.others_load is not None and self.others_load > self.load_limit():
            out.append(f"load {self.others_load:.1f} on {self.cores} cores")
        if self.steal_fraction > BUSY_STEAL_FRACTION:
            out.append(f"{self.steal_fraction:.0%} of CPU time stolen by the hypervisor")
        if self.run_spread is not None and self.run_spread > BUSY_SPREAD:
            out.append(f"runs of one setting differ by {self.run_spread:.0%}")
        return out

    def to_dict(self) -> dict:
        return {**asdict(self), "busy": bool(self.reasons())}


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def runnable_others(samples: int = 10, interval_s: float = 0.1) -> float:
    """Mean runnable tasks over `samples` reads of /proc/stat's procs_running, less this reader."""
    counts: list[float] = []
    for i in range(samples):
        try:
            counts.append(procs_running() - 1.0)
        except (OSError, StopIteration, ValueError):
            return 0.0
        if i + 1 < samples:
            time.sleep(interval_s)
    return max(sum(counts) / len(counts), 0.0) if counts else 0.0


def _runnable_threads(pids: set[int], proc: Path) -> int:
    count = 0
    for pid in pids:
        try:
            tasks = list((proc / str(pid) / "task").iterdir())
        except OSError:
            continue
        count += sum(1 for task in tasks if (fields := stat_fields(task / "stat")) and fields[0] == "R")
    return count


def runnable_outside(root: int, proc: Path = PROC) -> float | None:
    """Runnable tasks (threads) of the machine now that are not `root`'s or its descendants':
    /proc/stat's procs_running less the runnable threads of the tree (this reader among them)."""
    try:
        running = procs_running(proc)
        ours = _runnable_threads(process_tree([root], proc), proc)
    except (OSError, StopIteration, ValueError):
        return None
    return max(running - ours, 0.0)


class LoadBeside:
    """Samples `runnable_outside(os.getpid())` every `interval_s` on a thread while it is entered
    (the profile runs); `mean` is the load of other tasks the profile shared the machine with."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="thrifty-load-beside", daemon=True)

    def _sample(self) -> None:
        root = os.getpid()
        while not self._stop.wait(self.interval_s):
            value = runnable_outside(root)
            if value is not None:
                self.samples.append(value)

    def __enter__(self) -> "LoadBeside":
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


def read_before_profile(profile_cores: int = PROFILE_CORES) -> Readings:
    """Other tasks' load now: the runnable tasks sampled over a second, and steal over that second.
    Not the 1-minute load average: it lags both ways, and a build that ended seconds ago (`make
    demo` right after its install) would still read as a busy machine."""
    start = CpuTimes.read()
    now = runnable_others()
    return Readings(cores(), now, CpuTimes.read().steal_since(start), None, profile_cores)


def allowed(allow_busy: bool) -> bool:
    return allow_busy or os.environ.get(ALLOW_BUSY_ENV) == "1"


def check_quiet(readings: Readings, allow_busy: bool) -> None:
    """Raise BusyMachineError in one line when the readings say busy, unless allowed."""
    reasons = readings.reasons()
    if reasons:
        log.debug("busy readings (%s): %s", "allowed" if allowed(allow_busy) else "refused", ", ".join(reasons))
    if reasons and not allowed(allow_busy):
        raise BusyMachineError(f"the machine is busy: {', '.join(reasons)}; profile again when it is "
                               f"quiet or pass --allow-busy ({ALLOW_BUSY_ENV}=1)")


def measure_quietly(measure: Callable[[], tuple[Measured, float]], allow_busy: bool,
                    before: Callable[[], Readings] = read_before_profile,
                    attempts: int = 2, beside: Callable[[], LoadBeside] | None = None) -> tuple[Measured, dict]:
    """Check the machine, run `measure` (returns its result and the run spread it saw) and check
    the other tasks' load, the steal and the spread of that run; a busy run is measured again, up
    to `attempts` times, then refused. Returns the result and the readings (before and during) for
    the profile's meta. `beside` makes the load monitor (LoadBeside by default)."""
    first = before()
    check_quiet(first, allow_busy)
    attempt = 0
    while True:
        attempt += 1
        start = CpuTimes.read()
        with (beside or LoadBeside)() as load:
            result, spread = measure()
        during = Readings(first.cores, load.mean, CpuTimes.read().steal_since(start), spread, first.profile_cores)
        if during.reasons() and not allowed(allow_busy) and attempt < attempts:
            log.info("the machine was busy during the profile (%s): measuring again", ", ".join(during.reasons()))
            continue  # measure again: a burst of other work may have passed
        check_quiet(during, allow_busy)
        return result, {"before": first.to_dict(), "during": during.to_dict(), "attempts": attempt}
