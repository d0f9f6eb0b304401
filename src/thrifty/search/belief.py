"""What the search believes about each candidate's mean step time: a lognormal (mu, sd) in log
seconds, from the measurements so far.

- measured: the windows' mean; sd = its relative standard error (delta method in log space).
- unmeasured: the step-time model of thrifty.perf.steptime,
      T = (C_t(b)^g + N(n, nodes)^g)^(1/g),   C_t(b) = C_ref(b) / s_t
  fitted with `fit_step_time` on the reference type (the one with the most measured
  configurations, at two local batches or more), and composed across types on the premise that
  VM types differ in their processors, not in the fabric:
  * network N (a_intra, b_intra, a_inter, b_inter): refitted to every measured window's sync time
    of every type (linear least squares, slopes kept from the reference fit where the windows
    span one worker count only); the reference fit's values where no sync was measured;
  * compute speed s_t, in log space a normal prior updated by each measured configuration
    (conjugate normal-normal): prior mean price parity, log(price per worker / the reference's),
    a neutral guess that makes every type equally cost-efficient in compute, sd prior_type_sd;
    each measured configuration i of the type observes log(C_ref(b_i) / compute_i) with
    compute_i = step - sync (sync predicted when not reported) and variance
    transfer_sd^2 + (sync_rel_error * sync_i / compute_i)^2, so a window that is nearly all
    sync says little about the processor:
        1/v = 1/sd0^2 + sum 1/v_i,   m = v (m0/sd0^2 + sum x_i/v_i)
  sd: the reference fit's 90% interval (`StepTimeModel.interval`) as a log sd, widened by the
  speed's posterior sd (zero for the reference type).
- model error (memory cliffs, odd sync modes): a Gaussian process on the log residuals of the
  measured configurations (search.residuals) shifts mu and adds its sd, so a measured
  configuration corrects and sharpens its neighbours; misspecification_sd is its prior sd.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from thrifty.errors import ModelError, ThriftyError
from thrifty.perf.steptime import StepTimeModel, fit_step_time, predict_step_time
from thrifty.search.config import Config
from thrifty.search.residuals import krige

Z90 = 1.6448536269514722  # standard normal quantile of 0.95: a 90% interval is mu +- Z90 sd
NETWORK = slice(3, 7)
UNSEEN_SYNC_SHARE = 0.5  # an unmeasured kind of sync may take half the step as easily as none  # a_intra_s, b_intra_s, a_inter_s, b_inter_s in perf.steptime.PARAM_NAMES


@dataclass(frozen=True)
class Measured:
    """Mean and relative standard error of one configuration's step times, all windows pooled,
    with the mean sync time when the backend reports it."""

    mean_s: float
    rel_se: float
    steps: int
    sync_s: float | None = None

    @classmethod
    def of(cls, times: np.ndarray, sync_s: float | None = None) -> "Measured":
        times = np.asarray(times, float)
        se = float(np.std(times, ddof=1) / np.sqrt(len(times))) if len(times) > 1 else float("inf")
        return cls(float(times.mean()), se / float(times.mean()), len(times), sync_s)


@dataclass(frozen=True)
class BeliefSettings:
    misspecification_sd: float = 0.10  # prior sd of the model's log error (search.residuals)
    transfer_sd: float = 0.15  # log sd of one configuration's evidence on its type's speed
    sync_rel_error: float = 0.05  # relative error of a measured mean sync time
    prior_type_sd: float = 0.50  # log sd of an unmeasured type's speed around price parity
    max_sd: float = 2.0  # a poorly determined fit's interval is capped: beyond 27x at 90% it says nothing
    unmeasured_network_sd: float = 1.0  # log sd of a sync time no measurement of its kind has shown


def _shape(configs: Sequence[Config]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([c.num_nodes for c in configs], float), np.array([c.num_workers for c in configs], float),
            np.array([c.local_batch for c in configs], float))


def _fit(configs: Sequence[Config], measured: Mapping[Config, Measured]) -> StepTimeModel | None:
    if len({c.local_batch for c in configs}) < 2:
        return None
    try:
        return fit_step_time(*_shape(configs), [measured[c].mean_s for c in configs])
    except ModelError:
        return None


def _refit_network(params: np.ndarray, measured: Mapping[Config, Measured]) -> np.ndarray:
    """Ring all-reduce N = a + b max(n - 2, 0) inside a node and across nodes (docs/design.md), fitted
    to measured sync times; the slope stays the reference's when one worker count was seen. With no
    multi-node configuration measured, the network across nodes is taken as inside one (the fit's
    premise, perf.steptime), from the refitted values."""
    params = params.copy()
    synced = [c for c, m in measured.items() if m.sync_s is not None and c.num_workers > 1]
    for multi_node, (a, b) in ((False, (3, 4)), (True, (5, 6))):
        rows = [c for c in synced if (c.num_nodes > 1) == multi_node]
        if not rows:
            continue
        extra = np.array([max(c.num_workers - 2, 0) for c in rows], float)
        sync = np.array([measured[c].sync_s for c in rows])
        if len(np.unique(extra)) > 1:
            params[b] = max(float(np.polyfit(extra, sync, 1)[0]), 0.0)
        params[a] = max(float(np.mean(sync - params[b] * extra)), 0.0)
    if not any(c.num_nodes > 1 for c in measured):
        params[5:7] = params[3:5]
    return params


def _unmeasured_network_sd(params: np.ndarray, configs: Sequence[Config], measured: Mapping[Config, Measured],
                           settings: "BeliefSettings") -> np.ndarray:
    """Extra log sd of configurations whose network kind (several workers in one node, or several
    nodes) no measured configuration has shown: the guessed sync time is uncertain by
    `unmeasured_network_sd` in log, which moves log T by about that times sync's share of the step,
    taken as at least UNSEEN_SYNC_SHARE (a guessed sync may be far too small: with no multi-worker
    measurement at all, the fit guesses 1 ms)."""
    nodes, workers, _ = _shape(configs)
    seen_intra = any(c.num_workers > 1 and c.num_nodes == 1 for c in measured)
    seen_inter = any(c.num_nodes > 1 for c in measured)
    unseen = (workers > 1) & np.where(nodes > 1, not seen_inter, not seen_intra)
    share = _network_only(params, configs) / predict_step_time(params, *_shape(configs))
    return np.where(unseen, settings.unmeasured_network_sd * np.clip(share, UNSEEN_SYNC_SHARE, 1.0), 0.0)


def _network_only(params: np.ndarray, configs: Sequence[Config]) -> np.ndarray:
    net = params.copy()
    net[:2] = (1e-12, 0.0)  # no compute
    return np.where(_shape(configs)[1] > 1, predict_step_time(net, *_shape(configs)), 0.0)


def _compute_only(params: np.ndarray, configs: Sequence[Config]) -> np.ndarray:
    compute = params.copy()
    compute[NETWORK] = 0.0
    return predict_step_time(compute, *_shape(configs))


def _speed(params: np.ndarray, seen: Sequence[Config], measured: Mapping[Config, Measured],
           prior_log_speed: float, settings: "BeliefSettings") -> tuple[float, float]:
    """(log s_t, its sd): the conjugate update in the module docstring."""
    precision, weighted = 1 / settings.prior_type_sd**2, prior_log_speed / settings.prior_type_sd**2
    if seen:
        step = np.array([measured[c].mean_s for c in seen])
        sync = np.array([measured[c].sync_s if measured[c].sync_s is not None else np.nan for c in seen])
        sync = np.where(np.isnan(sync), _network_only(params, seen), sync)
        compute = np.maximum(step - sync, 0.05 * step)  # a step is never all sync
        observed = np.log(_compute_only(params, seen)) - np.log(compute)
        variance = settings.transfer_sd**2 + (settings.sync_rel_error * sync / compute) ** 2
        precision += float(np.sum(1 / variance))
        weighted += float(np.sum(observed / variance))
    return weighted / precision, float(np.sqrt(1 / precision))


def step_time_floor(candidates: Sequence[Config], mu: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """Lower bound of each candidate's log step time (-inf where none), from the belief (mu, sd)
    of step_time_belief: a step on more nodes is never faster than on fewer nodes of the same type,
    workers per node and local batch (the compute is the same, the all-reduce only grows: ring
    all-reduce, docs/design.md), so the low end of such a twin's 90% interval bounds it (a measured
    twin's interval is its measurement's)."""
    floor = np.full(len(candidates), -np.inf)
    low = np.asarray(mu) - Z90 * np.asarray(sd)
    twins: dict[tuple, list[int]] = {}
    for i, c in enumerate(candidates):
        twins.setdefault((c.instance_type, c.num_workers // c.num_nodes, c.local_batch), []).append(i)
    for members in twins.values():
        for i in members:
            fewer = [low[j] for j in members if candidates[j].num_nodes < candidates[i].num_nodes]
            if fewer:
                floor[i] = max(fewer)
    return floor


def _at_speed(model: StepTimeModel, log_speed: float) -> StepTimeModel:
    """The fit on a type whose compute is s = exp(log_speed) times as fast: a_c and b_c divided by
    s, and their covariance with them (Cov(x / s) = Cov(x) / s^2), so the interval keeps the fit's
    relative uncertainty instead of growing with the speed."""
    factor = float(np.exp(-log_speed))
    params = model.params.copy()
    params[:2] *= factor
    covariance = model.covariance
    if covariance is not None:
        scale = np.array([factor if i < 2 else 1.0 for i in model.free_indices])
        covariance = covariance * np.outer(scale, scale)
    return replace(model, params=params, covariance=covariance)


def step_time_belief(candidates: Sequence[Config], measured: Mapping[Config, Measured],
                     worker_price: Mapping[str, float],
                     settings: BeliefSettings = BeliefSettings()) -> tuple[np.ndarray, np.ndarray]:
    """(mu, sd) of log mean step time for every candidate, in the order given; `worker_price`
    is each type's $/h per worker (for the price-parity prior)."""
    by_type: dict[str, list[Config]] = {}
    for config in sorted(measured):
        by_type.setdefault(config.instance_type, []).append(config)
    fits = {t: m for t, cs in by_type.items() if (m := _fit(cs, measured)) is not None}
    if not fits:
        raise ThriftyError("the search needs measurements at two local batch sizes on one VM type "
                           "before it can predict anything")
    reference = max(fits, key=lambda t: (len(by_type[t]), t))
    base = fits[reference]
    params = _refit_network(base.params, measured)
    index = {c: i for i, c in enumerate(candidates)}
    mu, sd = np.empty(len(candidates)), np.empty(len(candidates))
    groups: dict[str, list[Config]] = {}
    for config in candidates:
        groups.setdefault(config.instance_type, []).append(config)
    for name, configs in groups.items():
        if name == reference:
            log_speed, speed_sd = 0.0, 0.0
        else:  # prior: price parity, twice the price per worker, compute twice as fast
            log_speed, speed_sd = _speed(params, by_type.get(name, []), measured,
                                         np.log(worker_price[name] / worker_price[reference]), settings)
        model = _at_speed(replace(base, params=params), log_speed)
        with np.errstate(over="ignore", invalid="ignore"):  # a far extrapolation's sd may be unbounded: capped
            fit_sd = np.nan_to_num(model.fit_sd_log(*_shape(configs)), nan=np.inf)
        rows = [index[c] for c in configs]
        mu[rows] = np.log(model.predict(*_shape(configs)))
        sd[rows] = np.sqrt(np.minimum(fit_sd, settings.max_sd) ** 2 + speed_sd**2
                           + _unmeasured_network_sd(model.params, configs, measured, settings) ** 2)
    seen = [c for c in candidates if c in measured]
    unseen = [index[c] for c in candidates if c not in measured]
    residuals = np.array([np.log(measured[c].mean_s) - mu[index[c]] for c in seen])
    error, error_sd = krige(seen, residuals, np.array([measured[c].rel_se for c in seen]),
                            [candidates[i] for i in unseen], settings.misspecification_sd)
    mu[unseen] += error
    sd[unseen] = np.hypot(sd[unseen], error_sd)
    for c in seen:
        mu[index[c]], sd[index[c]] = np.log(measured[c].mean_s), measured[c].rel_se
    return mu, sd
