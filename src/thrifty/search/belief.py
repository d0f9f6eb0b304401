"""What the search believes about each candidate's mean step time: a lognormal (mu, sd) in log
seconds, from the measurements so far.

- measured: the window's mean; sd = its relative standard error (delta method in log space).
- unmeasured, type with a fit: thrifty.perf.steptime fitted on that type's measured
  configurations (one row each: the per-configuration mean), `StepTimeModel.interval` at 90%
  turned into sd, widened by a floor for model misspecification (the fit's own interval knows
  nothing of memory cliffs or odd sync modes).
- unmeasured, type without a fit: the best-fitted type's model shifted by that type's measured
  log-ratio (if any of its configurations was measured), else by price parity (speed proportional
  to price per node: a neutral prior that makes every type equally cost-efficient), with a wide sd.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from thrifty.errors import ModelError, ThriftyError
from thrifty.perf.steptime import StepTimeModel, fit_step_time
from thrifty.search.config import Config

Z90 = 1.6448536269514722  # standard normal quantile of 0.95: a 90% interval is mu +- Z90 sd


@dataclass(frozen=True)
class Measured:
    """Mean and relative standard error of one configuration's step times, all windows pooled."""

    mean_s: float
    rel_se: float
    steps: int

    @classmethod
    def of(cls, times: np.ndarray) -> "Measured":
        times = np.asarray(times, float)
        se = float(np.std(times, ddof=1) / np.sqrt(len(times))) if len(times) > 1 else float("inf")
        return cls(float(times.mean()), se / float(times.mean()), len(times))


@dataclass(frozen=True)
class BeliefSettings:
    misspecification_sd: float = 0.10  # floor on a fitted prediction's log sd
    transfer_sd: float = 0.15  # extra log sd when a type borrows another type's model shape
    prior_type_sd: float = 0.50  # log sd of an unmeasured type's speed around price parity


def _fit(configs: Sequence[Config], measured: Mapping[Config, Measured]) -> StepTimeModel | None:
    if len({c.local_batch for c in configs}) < 2:
        return None
    try:
        return fit_step_time([c.num_nodes for c in configs], [c.num_workers for c in configs],
                             [c.local_batch for c in configs], [measured[c].mean_s for c in configs])
    except ModelError:
        return None


def _predict(model: StepTimeModel, configs: Sequence[Config]) -> tuple[np.ndarray, np.ndarray]:
    args = ([c.num_nodes for c in configs], [c.num_workers for c in configs], [c.local_batch for c in configs])
    low, high = model.interval(*args, level=0.9)
    return np.log(model.predict(*args)), np.log(high / low) / (2 * Z90)


def step_time_belief(candidates: Sequence[Config], measured: Mapping[Config, Measured],
                     node_price: Mapping[str, float],
                     settings: BeliefSettings = BeliefSettings()) -> tuple[np.ndarray, np.ndarray]:
    """(mu, sd) of log mean step time for every candidate, in the order given."""
    by_type: dict[str, list[Config]] = {}
    for config in measured:
        by_type.setdefault(config.instance_type, []).append(config)
    models = {t: m for t, cs in by_type.items() if (m := _fit(sorted(cs), measured)) is not None}
    if not models:
        raise ThriftyError("the search needs measurements at two local batch sizes on one VM type "
                           "before it can predict anything")
    reference = max(models, key=lambda t: (len(by_type[t]), t))
    index = {c: i for i, c in enumerate(candidates)}
    mu, sd = np.empty(len(candidates)), np.empty(len(candidates))
    groups: dict[str, list[Config]] = {}
    for config in candidates:
        if config in measured:
            m = measured[config]
            mu[index[config]], sd[index[config]] = np.log(m.mean_s), m.rel_se
        else:
            groups.setdefault(config.instance_type, []).append(config)
    for name, configs in groups.items():
        rows = [index[c] for c in configs]
        if name in models:
            centre, spread = _predict(models[name], configs)
            mu[rows], sd[rows] = centre, np.hypot(spread, settings.misspecification_sd)
            continue
        centre, spread = _predict(models[reference], configs)
        base_sd = np.hypot(spread, settings.misspecification_sd)
        seen = by_type.get(name)
        if seen:  # the type's measured speed relative to the reference model
            ref_mu, _ = _predict(models[reference], seen)
            shift = float(np.mean(np.log([measured[c].mean_s for c in seen]) - ref_mu))
            mu[rows], sd[rows] = centre + shift, np.hypot(base_sd, settings.transfer_sd)
        else:  # price parity: twice the price per node, half the step time
            shift = np.log(node_price[reference] / node_price[name])
            mu[rows], sd[rows] = centre + shift, np.hypot(base_sd, settings.prior_type_sd)
    return mu, sd
