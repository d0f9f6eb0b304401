# SPDX-License-Identifier: MIT
"""Progress to the target in efficiency-corrected samples, with a constant or drifting noise scale.

McCandlish et al. 2018 (eq. 2.11, as in thrifty.perf.efficiency): a target needs
E(B) = E_min (1 + B / B_noise) examples at global batch B, so one step at batch B advances the job
by B / (1 + B / B_noise) samples-at-small-batch (E_min units); the target is E_min. Written per
unit of progress p, a step costs dsteps/dp = 1/B + 1/B_noise(p); so the steps from p0 to p1 are

    steps(p0, p1) = (p1 - p0) / B + I(p1) - I(p0),   I(p) = int_0^p dp' / B_noise(p')

which is exact for a constant B_noise (I = p / B_noise) and for a trace B_noise(p) interpolated
linearly between its points (I integrated on a fine grid)."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.io import read_csv

GRID_POINTS = 2001  # of the cumulative integral I(p) for a noise-scale trace


def progress_per_step(global_batch, noise_scale) -> np.ndarray:
    """B / (1 + B / B_noise): samples-at-small-batch one step adds (McCandlish et al. 2018)."""
    batch = np.asarray(global_batch, float)
    return batch / (1.0 + batch / np.asarray(noise_scale, float))


@dataclass(frozen=True)
class NoiseSchedule:
    """B_noise as a function of progress (in samples-at-small-batch), with I(p) tabulated."""

    progress: np.ndarray  # grid of p, from 0 to the target
    inverse_integral: np.ndarray  # I(p) on the grid
    noise_scale: np.ndarray  # B_noise(p) on the grid

    @classmethod
    def constant(cls, noise_scale: float, target_samples: float) -> "NoiseSchedule":
        if not (np.isfinite(noise_scale) and noise_scale > 0):
            raise ThriftyError(f"noise scale must be a positive number, got {noise_scale}")
        p = np.array([0.0, float(target_samples)])
        return cls(p, p / noise_scale, np.full(2, float(noise_scale)))

    @classmethod
    def from_points(cls, fraction, noise_scale, target_samples: float) -> "NoiseSchedule":
        """`fraction` of the target in [0, 1] (increasing) -> B_noise; held flat outside the points."""
        fraction, values = np.asarray(fraction, float), np.asarray(noise_scale, float)
        p = np.linspace(0.0, float(target_samples), GRID_POINTS)
        b = np.interp(p / target_samples, fraction, values)
        inv = 1.0 / b
        integral = np.concatenate([[0.0], np.cumsum((inv[1:] + inv[:-1]) / 2 * np.diff(p))])
        return cls(p, integral, b)

    def at(self, progress: float) -> float:
        return float(np.interp(progress, self.progress, self.noise_scale))

    def steps(self, p0: float, p1: float, global_batch: float) -> float:
        """Steps from progress p0 to p1 at batch B (formula in the module docstring)."""
        return (p1 - p0) / global_batch + float(np.interp(p1, self.progress, self.inverse_integral)
                                                - np.interp(p0, self.progress, self.inverse_integral))

    def advance(self, p0: float, steps: float, global_batch: float) -> float:
        """Progress after `steps` steps from p0: the inverse of `steps`, capped at the target."""
        total = self.progress / global_batch + self.inverse_integral  # steps from 0, increasing in p
        start = p0 / global_batch + float(np.interp(p0, self.progress, self.inverse_integral))
        return float(np.interp(start + steps, total, self.progress))


# B_noise is a batch size in samples: the largest models' critical batches are some 1e7 tokens
# (McCandlish et al. 2018); 1e300 had overflowed numpy in the noise estimate
MAX_NOISE_SCALE = 1e12


def read_noise_trace(path: Path, target_samples: float) -> NoiseSchedule:
    """A CSV `progress,noise_scale`: progress as a fraction of the target in [0, 1], increasing."""
    rows = read_csv(path, ThriftyError, "noise-scale trace", required=("progress", "noise_scale"))
    try:
        fraction = np.array([float(r["progress"]) for r in rows])
        values = np.array([float(r["noise_scale"]) for r in rows])
    except ValueError as exc:
        raise ThriftyError(f"noise-scale trace {path}: not a number ({exc})") from None
    if not (np.all(np.isfinite(values)) and np.all(values > 0) and np.all(values <= MAX_NOISE_SCALE)):
        raise ThriftyError(f"noise-scale trace {path}: noise_scale must be positive numbers up to {MAX_NOISE_SCALE:g}")
    if np.any((fraction < 0) | (fraction > 1)) or np.any(np.diff(fraction) <= 0):
        raise ThriftyError(f"noise-scale trace {path}: progress must increase within [0, 1] "
                           "(a fraction of the target)")
    return NoiseSchedule.from_points(fraction, values, target_samples)
