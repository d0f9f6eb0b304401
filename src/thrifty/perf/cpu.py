# SPDX-License-Identifier: MIT
"""How a rank's compute scales with the threads of a bigger CPU VM: Amdahl's law with a serial
fraction measured on the profiling machine at 1 and 2 threads.

  T(p) = T(1) * (s + (1 - s) / p)            (Amdahl 1967)
  s    = 2 T(2) / T(1) - 1                   (the same law solved for two measurements)
The serial fraction depends on the batch: small batches leave threads idle. It is measured per
profiled batch and interpolated in log batch (held constant outside the measured range). Threads
are the VM's vCPUs, as on the machine that measured it (1 and 2 vCPUs).

Its uncertainty: the sd of s over a bootstrap of the measured steps (1- and 2-thread steps
resampled apart, Efron & Tibshirani 1993), computed before s is clipped to [0, 1], and at most
that of s uniform on [0, 1]; a clipped s is flagged `at_bound` (1: two threads gained nothing, as
on a busy machine). On a VM with p threads
  d log T(p) / ds = (1 - 1/p) / (s + (1 - s) / p)     (delta method for the projection's interval)

Measured beside other tasks' load (`contended`: the profile ran on a busy machine, --allow-busy),
the second thread may have waited for a core the other tasks held, so the measured s is an upper
bound and the true one anywhere down to 0 (perfect scaling). The delta method's sd (at most 0.29,
that of s uniform on [0, 1]) cannot say that on a big VM: at p = 96, T(96) at s = 1 is 96x T(96)
at s = 0 and the sd moves log T by 0.29. So a contended profile's interval on T(p) has its low
end moved down by T(p; 0) / T(p; s), to the perfect-scaling time or below it; its high end stays,
since s cannot be higher than measured (a symmetric widening put the high end at 96 T(1)). Two
profiles of ResNet-18, the second on a busy machine, measured s = 0.10-0.17 and 1.0, and their
192-vCPU intervals did not overlap (issue 22); neither did those of tests/train/test_profiler.py's
loaded and quiet profiles once in a loaded suite.

A serial fraction measured lower at a larger batch can make T(p) at that batch, on many threads,
shorter than at a smaller one (ResNet-18 on 60 vCPUs: 27.5 ms at local batch 2, 25.9 ms at 4); a
larger batch of the same model on the same VM never takes less time, so a VM's projected times
are held non-decreasing in the batch (`nondecreasing_in_batch`, over a fixed grid of batches).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from thrifty.errors import ModelError

BOOTSTRAP_DRAWS = 400
UNKNOWN_SD = 12**-0.5  # the sd of s uniform on [0, 1]: a serial fraction known to be no more than that


@dataclass(frozen=True)
class ThreadScaling:
    local_batch: np.ndarray  # increasing
    serial_fraction: np.ndarray  # s in [0, 1] at each batch
    serial_fraction_sd: np.ndarray  # bootstrap sd of s at each batch
    at_bound: np.ndarray  # bool: s was clipped to 0 or 1
    contended: bool = False  # measured beside other tasks' load: s is an upper bound (module docstring)

    @classmethod
    def from_measurements(cls, local_batch: Sequence[float], one_thread_steps_s: Sequence[Sequence[float]],
                          two_threads_steps_s: Sequence[Sequence[float]], seed: int = 0) -> "ThreadScaling":
        """From the compute times of every measured step (at least two per batch and thread count)."""
        b = np.asarray(local_batch, float)
        steps = [[np.asarray(x, float) for x in per_batch] for per_batch in (one_thread_steps_s, two_threads_steps_s)]
        if b.size == 0 or any(len(per_batch) != b.size for per_batch in steps):
            raise ModelError("thread scaling needs the 1- and 2-thread step times of every batch")
        if any(x.size < 2 or not np.all(np.isfinite(x)) or np.any(x <= 0) for per_batch in steps for x in per_batch):
            raise ModelError("thread scaling needs at least two positive 1- and 2-thread step times per batch")
        rng = np.random.default_rng(seed)
        serial, sd = np.empty(b.size), np.empty(b.size)
        for i, (t1, t2) in enumerate(zip(*steps, strict=True)):
            serial[i] = 2.0 * t2.mean() / t1.mean() - 1.0  # Amdahl solved for s with p = 2
            draws = (2.0 * rng.choice(t2, (BOOTSTRAP_DRAWS, t2.size)).mean(axis=1)
                     / rng.choice(t1, (BOOTSTRAP_DRAWS, t1.size)).mean(axis=1) - 1.0)
            sd[i] = min(draws.std(ddof=1), UNKNOWN_SD)
        order = np.argsort(b)
        clipped = np.clip(serial, 0.0, 1.0)
        return cls(b[order], clipped[order], sd[order], (clipped != serial)[order])

    def serial_at(self, local_batch) -> np.ndarray:
        return self._interp(local_batch, self.serial_fraction)

    def serial_sd_at(self, local_batch) -> np.ndarray:
        return self._interp(local_batch, self.serial_fraction_sd)

    def _interp(self, local_batch, values: np.ndarray) -> np.ndarray:
        return np.interp(np.log(np.asarray(local_batch, float)), np.log(self.local_batch), values)

    def slowdown(self, local_batch, threads) -> np.ndarray:
        """T(p) / T(1) = s + (1 - s) / p."""
        s = self.serial_at(local_batch)
        return s + (1.0 - s) / np.asarray(threads, float)

    def slowdown_sd_log(self, local_batch, threads) -> np.ndarray:
        """sd of log T(p) from the serial fraction's sd (delta method, module docstring)."""
        p = np.asarray(threads, float)
        return (1.0 - 1.0 / p) / self.slowdown(local_batch, p) * self.serial_sd_at(local_batch)

    def low_end_factor(self, local_batch, threads) -> np.ndarray:
        """What the low end of T(p)'s interval is multiplied by: T(p; 0) / T(p; s) for a contended
        profile (its s is an upper bound, module docstring), 1 otherwise. The high end stays."""
        p = np.asarray(threads, float)
        perfect = 1.0 / (p * self.slowdown(local_batch, p))  # T(p; 0) / T(1) = 1 / p
        return perfect if self.contended else np.ones_like(perfect)

    def to_dict(self) -> dict:
        return {"local_batch": self.local_batch.tolist(), "serial_fraction": self.serial_fraction.tolist(),
                "serial_fraction_sd": self.serial_fraction_sd.tolist(), "at_bound": self.at_bound.tolist(),
                "contended": self.contended}

    @classmethod
    def from_dict(cls, data: dict) -> "ThreadScaling":
        return cls(np.asarray(data["local_batch"], float), np.asarray(data["serial_fraction"], float),
                   np.asarray(data["serial_fraction_sd"], float), np.asarray(data["at_bound"], bool),
                   bool(data.get("contended", False)))


GRID_PER_OCTAVE = 16  # the batch grid nondecreasing_in_batch holds a projection above: 16 points a doubling


def nondecreasing_in_batch(step_time: Callable[[np.ndarray, np.ndarray], np.ndarray], batch,
                           threads) -> np.ndarray:
    """`step_time(batch, threads)` at each (batch, threads), held non-decreasing in the batch (module
    docstring): the largest of its own value and the values on a fixed grid of batches from 1 up to
    it, GRID_PER_OCTAVE a doubling, at the same threads. A fixed grid, so a configuration's
    projection does not depend on which other batches are projected beside it; between two grid
    points a dip of at most 1/16 of a doubling's change can remain."""
    batch, threads = np.asarray(batch, float), np.asarray(threads, float)
    own = np.asarray(step_time(batch, threads), float)
    if batch.size == 0:
        return own
    at = np.floor(GRID_PER_OCTAVE * np.log2(np.maximum(batch, 1.0)) + 1e-9).astype(int)  # the last grid point <= b
    grid = 2.0 ** (np.arange(int(at.max()) + 1) / GRID_PER_OCTAVE)
    levels, which = np.unique(threads, return_inverse=True)
    on_grid = np.asarray(step_time(np.tile(grid, len(levels)), np.repeat(levels, len(grid))), float)
    envelope = np.fmax.accumulate(on_grid.reshape(len(levels), len(grid)), axis=1)  # NaN on the grid skipped
    return np.fmax(own, envelope[which, at])
