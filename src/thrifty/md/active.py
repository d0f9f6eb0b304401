"""Active learning for a nanoconfinement campaign: which points to simulate next, and when to stop.
No torch: the surrogate comes in as anything with `spread` (and `predict` for the stopping test).

The pick (one point per free worker): score every candidate by the ensemble's uncertainty
    u(x) = mean over bins b of the two profiles of sd_m(y_m,b(x)) / s_b
(the members' standard deviation in units of each bin's training spread s_b, `Ensemble.spread`),
then take candidates greedily in order of decreasing u, skipping any closer than `min_distance` to
one already taken, distance measured in the parameter box scaled to [0, 1] per parameter
(z+ = 1, 2, 3 -> 0, 0.5, 1). Without that rule a batch of k would be k near-copies of the one most
uncertain point. If the rule leaves fewer than k, the rest are the most uncertain of those skipped.
The candidates are a pool drawn uniformly from the box (z+ uniform over its integers).

The stop: the surrogate meets its target on runs it has not trained on - the batch it picked,
simulated, scored before it is added to the training set - with the published metric
(md.surrogate_metrics: the share of bins within the MD error bar).
"""

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.md.params import ParameterBox
from thrifty.md.runs import Run, grid_arrays
from thrifty.md.surrogate_metrics import Accuracy, accuracy

DEFAULT_MIN_DISTANCE = 0.15  # in the unit box: 15% of every range, or 0.3 of the way between two z+ values
DEFAULT_POOL = 2000


class Uncertain(Protocol):
    def spread(self, points: np.ndarray) -> np.ndarray: ...


class Predicts(Protocol):
    config: object  # with .bins

    def predict(self, points: np.ndarray): ...  # -> md.surrogate.Prediction


def pick_batch(model: Uncertain, pool: np.ndarray, k: int, box: ParameterBox,
               min_distance: float = DEFAULT_MIN_DISTANCE) -> np.ndarray:
    """Indices into `pool` of the k points to simulate next (most uncertain first)."""
    if not 1 <= k <= len(pool):
        raise ThriftyError(f"cannot pick {k} points from a pool of {len(pool)}")
    order = np.argsort(-np.asarray(model.spread(pool)), kind="stable")
    unit = box.unit(pool)
    chosen: list[int] = []
    for i in order:
        if all(np.linalg.norm(unit[i] - unit[j]) >= min_distance for j in chosen):
            chosen.append(int(i))
            if len(chosen) == k:
                return np.array(chosen)
    rest = [int(i) for i in order if i not in chosen]
    return np.array(chosen + rest[:k - len(chosen)])


def next_points(model: Uncertain, box: ParameterBox, k: int, rng: np.random.Generator,
                pool_size: int = DEFAULT_POOL, min_distance: float = DEFAULT_MIN_DISTANCE) -> np.ndarray:
    """The next k points (k, 6) from a fresh uniform pool of the box."""
    pool = box.sample(pool_size, rng)
    return pool[pick_batch(model, pool, k, box, min_distance)]


@dataclass(frozen=True)
class StopTest:
    met: bool
    accuracy: Accuracy
    runs: int  # held-out runs it was measured on


def stopping_test(model: Predicts, unseen: list[Run], target_within_error: float = 0.95) -> StopTest:
    """Whether the surrogate's share of bins within the MD error bar on `unseen` runs (not trained
    on) reaches the target (the published surrogate reached 0.95-0.965)."""
    if not unseen:
        raise ThriftyError("the stopping test needs at least one run the surrogate has not trained on")
    points, density, error = grid_arrays(unseen, model.config.bins)
    score = accuracy(points, model.predict(points).mean, density, error)
    return StopTest(score.within_error >= target_within_error, score, len(unseen))
