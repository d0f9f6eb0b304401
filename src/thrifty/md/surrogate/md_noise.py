# SPDX-License-Identifier: MIT
"""The MD's own noise: the surrogate's data in the form it learns from, and a model of the error bar
a run would have at a point not simulated.

Training data: each run's profiles and error bars on the reduced grid (md.runs.grid_arrays),
folded about the mid-plane (md.surrogate.shapes.fold). An error bar of 0 (a bin the ions never
reached) is floored at ERROR_FLOOR_MOLAR, about one ion seen once in a run's 100-200 samples of a
0.8 nm^3 bin (1 ion / 0.8 nm^3 = 2.1 M, over 150 samples 0.014 M): the resolution of these runs.

The error-bar model: a power law in the density, log e = a + b log(rho + ERROR_FLOOR_MOLAR), fitted
by least squares to every folded bin of the training runs (a counting error grows like sqrt(rho),
b = 1/2, at a fixed run length; the runs stop at an error tolerance, so a and b are fitted). It
stands in for the error bar of a run not yet made: in the acquisition (model uncertainty against
MD noise) and in the predicted band. No torch.
"""

from dataclasses import dataclass

import numpy as np

from thrifty.md.runs import Run, grid_arrays
from thrifty.md.surrogate.shapes import fold, fold_error, mirror

ERROR_FLOOR_MOLAR = 0.01


@dataclass(frozen=True)
class TrainingData:
    points: np.ndarray  # (n, 6)
    half: np.ndarray  # (n, 2, bins / 2) folded densities, molar
    half_error: np.ndarray  # (n, 2, bins / 2) their error bars, floored

    @classmethod
    def of(cls, runs: list[Run], bins: int) -> "TrainingData":
        points, density, error = grid_arrays(runs, bins)
        return cls(points, fold(density), np.maximum(fold_error(error), ERROR_FLOOR_MOLAR))


@dataclass(frozen=True)
class NoiseModel:
    log_scale: float
    exponent: float

    @classmethod
    def fit(cls, density: np.ndarray, error: np.ndarray) -> "NoiseModel":
        x = np.log(np.ravel(density).clip(0) + ERROR_FLOOR_MOLAR)
        y = np.log(np.maximum(np.ravel(error), ERROR_FLOOR_MOLAR))
        exponent, log_scale = np.polyfit(x, y, 1)
        return cls(float(log_scale), float(exponent))

    def error(self, density: np.ndarray) -> np.ndarray:
        """The error bar (molar) an MD run would have at this density (molar)."""
        return np.maximum(np.exp(self.log_scale + self.exponent * np.log(np.clip(density, 0, None)
                                                                         + ERROR_FLOOR_MOLAR)), ERROR_FLOOR_MOLAR)


def held_out_arrays(runs: list[Run], bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points (n, 6), densities and error bars (n, 2, bins) of runs to score a prediction against: on
    the grid, symmetrised (folded and mirrored: the better estimate of the truth), bars not floored."""
    points, density, error = grid_arrays(runs, bins)
    return points, mirror(fold(density)), mirror(fold_error(error))
