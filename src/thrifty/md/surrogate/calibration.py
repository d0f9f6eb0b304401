# SPDX-License-Identifier: MIT
"""An honest band, and held-out scores beside the baselines, by cross-validation.

The band for an MD run's profile at a new point is mean +- q sqrt(sd^2 + e^2): sd the ensemble's
spread (the model's uncertainty), e the error bar such a run would have (md.surrogate.md_noise), q one
scale fitted so that the band covers `level` of the bins of runs the ensemble did NOT train on:
the `level` quantile of |MD - mean| / sqrt(sd^2 + e^2) over the reached bins of out-of-fold
predictions (K-fold cross-validation: K ensembles, each trained without one fold and predicting
it). That is normalised split-conformal calibration (Papadopoulos et al., "Inductive confidence
machines for regression", ECML 2002; Lei et al., "Distribution-free predictive inference for
regression", JASA 2018), with cross-validation folds in place of one split.

The same out-of-fold predictions score the network and the three baselines (md.surrogate.baselines,
each fitted on the same K-1 folds) on every run: what `thrifty md train-surrogate` reports.
"""

from dataclasses import dataclass, replace

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.md.runs import Run
from thrifty.md.surrogate.baselines import baselines
from thrifty.md.surrogate.ensemble import (
    Ensemble,
    SurrogateConfig,
    folds,
    train_ensemble,
)
from thrifty.md.surrogate.md_noise import held_out_arrays
from thrifty.md.surrogate.metrics import reached, score

NETWORK = "network"
LEVEL = 0.9


@dataclass(frozen=True)
class CrossValidation:
    points: np.ndarray  # (n, 6), the runs in their order
    simulated: np.ndarray  # (n, 2, bins) symmetrised MD profiles
    error: np.ndarray  # (n, 2, bins) their error bars
    predicted: dict[str, np.ndarray]  # out-of-fold profiles of the network and each baseline
    spread: np.ndarray  # (n, 2, bins) the out-of-fold ensembles' sd
    noise: np.ndarray  # (n, 2, bins) their predicted MD error bars

    def scores(self) -> dict[str, dict]:
        return {name: score(self.points, p, self.simulated, self.error) for name, p in self.predicted.items()}

    def band_scale(self, level: float = LEVEL) -> float:
        mask = reached(self.simulated, self.error)
        ratio = np.abs(self.simulated - self.predicted[NETWORK]) / np.sqrt(self.spread ** 2 + self.noise ** 2)
        return float(np.quantile(ratio[mask], level))


def _folds_work(runs: int, k: int, need: int) -> bool:
    """Whether k folds of `runs` hold out at least 2 runs each and train on at least `need` (the
    largest fold held out)."""
    return k >= 2 and runs >= 2 * k and runs - -(-runs // k) >= need


def _working_folds(runs: int, need: int) -> list[int]:
    """The fold counts that `runs` runs can serve (_folds_work), in order."""
    return [k for k in range(2, runs // 2 + 1) if _folds_work(runs, k, need)]


def cross_validate(runs: list[Run], config: SurrogateConfig, k: int = 5) -> CrossValidation:
    """Out-of-fold predictions of the network and the baselines for every run (k folds)."""
    need = max(5, config.members)  # runs a surrogate trains on
    if not _folds_work(len(runs), k, need):
        why = (f"cross-validation over {k} folds holds out at least 2 runs a fold and trains on at least {need} "
               f"(a surrogate of {config.members} members)")
        works = _working_folds(len(runs), need)
        if works:
            span = f"{works[0]}" + (f" to {works[-1]}" if len(works) > 1 else "")
            raise ThriftyError(f"{why}: with {len(runs)} runs give --folds {span}")
        fewest = next(n for n in range(4, 10 * need) if _working_folds(n, need))
        raise ThriftyError(f"{why}: {len(runs)} run{'' if len(runs) == 1 else 's'} {'is' if len(runs) == 1 else 'are'} too few for any --folds (at least {fewest})")
    points, simulated, error = held_out_arrays(runs, config.bins)
    predicted = {NETWORK: np.zeros_like(simulated)}
    spread, noise = np.zeros_like(simulated), np.zeros_like(simulated)
    for f, held in enumerate(folds(len(runs), k, config.seed + 1)):
        train = [r for i, r in enumerate(runs) if i not in set(held.tolist())]
        model = train_ensemble(train, replace(config, seed=config.seed * 100 + f + 1))
        out = model.predict(points[held])
        predicted[NETWORK][held], spread[held], noise[held] = out.mean, out.std, out.noise_molar
        for name, baseline in baselines(train, config.box_nm, config.bins).items():
            predicted.setdefault(name, np.zeros_like(simulated))[held] = baseline.predict(points[held])
    return CrossValidation(points, simulated, error, predicted, spread, noise)


def fit_surrogate(runs: list[Run], config: SurrogateConfig, k: int = 5,
                  level: float = LEVEL) -> tuple[Ensemble, CrossValidation]:
    """The ensemble trained on every run, its band scale calibrated by k-fold cross-validation; and
    the cross-validation (held-out scores of the network and the baselines)."""
    cv = cross_validate(runs, config, k)
    model = train_ensemble(runs, config)
    model.band_scale = cv.band_scale(level)
    return model, cv
