# SPDX-License-Identifier: MIT
"""Active learning for a nanoconfinement campaign: which points to simulate next, and when to stop.
No torch: the surrogate comes in as anything with `disagreement` (and `predict` for the stopping test).

What a run would teach the model at x, in units of the MD's own noise (md.surrogate.ensemble
`Ensemble.disagreement`): u(x) = mean over bins of var_members(x) / e(x)^2, e the error bar a run
there would have (md.surrogate.md_noise). A point where the members agree to within the MD noise is
not worth a run however noisy MD is there: the pick targets what the model does not know, not what
MD cannot resolve.

The pick is expected variance reduction over the box (active learning "ALC", Cohn, Ghahramani &
Jordan, "Active learning with statistical models", JAIR 1996; Seo et al., IJCNN 2000), with the
model's uncertainty correlated over a length `length` in the unit box (md.params.ParameterBox.unit;
z+ 1, 2, 3 at 0, 0.5, 1, so valencies barely share): a run at x with noise variance 1 (in those
units) cuts the variance at x by the share u(x) / (1 + u(x)) (the Gaussian posterior update), and at
r by that share times rho(x, r)^2, rho = exp(-|x - r|^2 / (2 length^2)). The gain of x is
    G(x) = mean over the reference points r of u(r) rho(x, r)^2 u(x) / (1 + u(x)),
the reference points being the candidates themselves (a uniform pool of the box). A batch is taken
greedily: after each pick the variance at every point is cut as that run would cut it, so the next
pick goes where uncertainty is left (diversity within the batch). Across batches: no candidate
within `min_distance` of a point already simulated or picked (`taken`), nor of another pick of the
batch; if that rule leaves fewer than k, the rest are the highest-gain candidates it skipped.

The stop (md.surrogate.metrics): the surrogate's share of profile bins within 2 MD error bars, a
metric an exact predictor scores about 0.95 on, on at least `min_runs` runs it has not trained on.
"""

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.md.params import ParameterBox
from thrifty.md.runs import Run

DEFAULT_MIN_DISTANCE = 0.1  # in the unit box: 10% of every range; a valency step is 0.5
DEFAULT_LENGTH = 0.2  # the correlation length of the model's uncertainty in the unit box
DEFAULT_POOL = 2000
DEFAULT_TARGET = 0.9  # share of bins within 2 MD error bars; an exact predictor: about 0.95
MIN_STOP_RUNS = 30  # unseen runs the stop is measured on: a share of ~1000+ bins over 30 points


class Uncertain(Protocol):
    def disagreement(self, points: np.ndarray) -> np.ndarray: ...


class HasBins(Protocol):
    @property
    def bins(self) -> int: ...  # profile bins of the grid (md.surrogate.ensemble.SurrogateConfig)


class Predicts(Protocol):
    @property
    def config(self) -> HasBins: ...

    def predict(self, points: np.ndarray): ...  # -> md.surrogate.ensemble.Prediction


def _correlation(a: np.ndarray, b: np.ndarray, length: float) -> np.ndarray:
    return np.exp(-((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / (2 * length ** 2))


def pick_batch(model: Uncertain, pool: np.ndarray, k: int, box: ParameterBox,
               min_distance: float = DEFAULT_MIN_DISTANCE, taken: np.ndarray | None = None,
               length: float = DEFAULT_LENGTH) -> np.ndarray:
    """Indices into `pool` of the k points to simulate next (in the order picked)."""
    if not 1 <= k <= len(pool):
        raise ThriftyError(f"cannot pick {k} points from a pool of {len(pool)}")
    unit = box.unit(pool)
    variance = np.asarray(model.disagreement(pool), float)  # u(r), cut as picks are made
    rho2 = _correlation(unit, unit, length) ** 2
    blocked = np.zeros(len(pool), bool)
    if taken is not None and len(taken):
        blocked |= np.sqrt(((unit[:, None, :] - box.unit(taken)[None, :, :]) ** 2).sum(-1)).min(axis=1) < min_distance
    chosen: list[int] = []
    for _ in range(k):
        share = variance / (1 + variance)
        gain = (rho2 @ variance) / len(pool) * share
        gain[chosen] = -np.inf
        free = np.flatnonzero(~blocked & np.isfinite(gain))
        best = int(free[np.argmax(gain[free])]) if len(free) else int(np.argmax(gain))
        chosen.append(best)
        variance = variance * (1 - rho2[best] * share[best])
        blocked |= np.linalg.norm(unit - unit[best], axis=1) < min_distance
    return np.array(chosen)


def next_points(model: Uncertain, box: ParameterBox, k: int, rng: np.random.Generator,
                pool_size: int = DEFAULT_POOL, min_distance: float = DEFAULT_MIN_DISTANCE,
                taken: np.ndarray | None = None) -> np.ndarray:
    """The next k points (k, 6) from a fresh uniform pool of the box, away from `taken`."""
    pool = box.sample(pool_size, rng)
    return pool[pick_batch(model, pool, k, box, min_distance, taken)]


@dataclass(frozen=True)
class HeldOut:
    """Runs a surrogate has not trained on, with it and the baselines fitted on the same runs it was."""
    model: Predicts
    runs: list[Run]
    baselines: dict = field(default_factory=dict)  # name -> predict(points) -> (n, 2, bins) (md.surrogate.baselines)


@dataclass(frozen=True)
class StopTest:
    met: bool
    within_2_bars: float  # the surrogate's share of reached bins within 2 MD error bars
    scores: dict  # md.surrogate.metrics.score of the surrogate and of each baseline
    runs: int  # unseen runs it was measured on


def stopping_test(tests: list[HeldOut], target_within_2_bars: float = DEFAULT_TARGET,
                  min_runs: int = MIN_STOP_RUNS) -> StopTest:
    """Whether the surrogate's share of bins within 2 MD error bars on unseen runs reaches the target,
    pooled over `tests` (each batch scored by the surrogate that had not seen it); never met on
    fewer than `min_runs` runs. The baselines are scored beside it on the same runs."""
    from thrifty.md.surrogate.md_noise import held_out_arrays
    from thrifty.md.surrogate.metrics import score
    if not any(t.runs for t in tests):
        raise ThriftyError("the stopping test needs at least one run the surrogate has not trained on")
    parts: dict[str, list[np.ndarray]] = {}
    arrays = []
    for test in (t for t in tests if t.runs):
        points, density, error = held_out_arrays(test.runs, test.model.config.bins)
        arrays.append((points, density, error))
        parts.setdefault("surrogate", []).append(test.model.predict(points).mean)
        for name, baseline in test.baselines.items():
            parts.setdefault(name, []).append(baseline.predict(points))
    points, density, error = (np.concatenate(a) for a in zip(*arrays, strict=True))
    scores = {name: score(points, np.concatenate(p), density, error) for name, p in parts.items()
              if len(p) == len(arrays)}
    share = scores["surrogate"]["within_2_bars"]
    return StopTest(len(points) >= min_runs and share >= target_within_2_bars, share, scores, len(points))
