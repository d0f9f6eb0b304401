# SPDX-License-Identifier: MIT
"""Predictors without a network, to show whether the network earns its place. Each has
`predict(points) -> (n, 2, bins)` molar profiles on the reduced grid. No torch.

- Flat: each ion's known count spread evenly over the width it can reach (md.surrogate.shapes);
  no training.
- Nearest run: the profile (on the reduced grid) of the training run nearest in scaled parameter
  space (md.surrogate.domain.scaled: continuous parameters over their training range, integers per
  step).
- Gaussian process on the parameters (md.surrogate.gp): one kernel shared by all bins of the
  folded half-profiles (inputs scaled as for the nearest run), its mean mirrored and
  negative densities clipped to 0.
"""

from dataclasses import dataclass

import numpy as np

from thrifty.md.runs import Run
from thrifty.md.surrogate.domain import nearest_distance, scaled
from thrifty.md.surrogate.gp import GaussianProcess
from thrifty.md.surrogate.md_noise import TrainingData
from thrifty.md.surrogate.shapes import flat_profiles, mirror


@dataclass(frozen=True)
class Flat:
    box_nm: float | None
    bins: int

    def predict(self, points: np.ndarray) -> np.ndarray:
        return flat_profiles(points, self.box_nm, self.bins)


class NearestRun:
    def __init__(self, runs: list[Run], bins: int) -> None:
        data = TrainingData.of(runs, bins)
        self.points, self.profiles = data.points, mirror(data.half)
        self.low, self.high = self.points.min(axis=0), self.points.max(axis=0)

    def predict(self, points: np.ndarray) -> np.ndarray:
        _, index = nearest_distance(scaled(points, self.low, self.high), scaled(self.points, self.low, self.high))
        return self.profiles[index]


class GaussianProcessBaseline:
    def __init__(self, runs: list[Run], bins: int) -> None:
        data = TrainingData.of(runs, bins)
        self.low, self.high = data.points.min(axis=0), data.points.max(axis=0)
        self.varies = self.high > self.low  # a parameter fixed in training is no input
        self.shape = data.half.shape[1:]
        self.gp = GaussianProcess(self._inputs(data.points), data.half.reshape(len(data.points), -1))

    def _inputs(self, points: np.ndarray) -> np.ndarray:
        return scaled(points, self.low, self.high)[:, self.varies]

    def predict(self, points: np.ndarray) -> np.ndarray:
        mean, _ = self.gp.predict(self._inputs(np.atleast_2d(points)))
        return mirror(np.clip(mean, 0, None).reshape(-1, *self.shape))


def baselines(runs: list[Run], box_nm: float | None, bins: int) -> dict:
    """The three baselines fitted on `runs`, by name."""
    return {"flat": Flat(box_nm, bins), "nearest run": NearestRun(runs, bins),
            "gaussian process": GaussianProcessBaseline(runs, bins)}
