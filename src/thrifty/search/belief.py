# SPDX-License-Identifier: MIT
"""What the search believes about each candidate's mean step time: a lognormal (mu, sd) in log
seconds, from the measurements so far.

- measured: the windows' mean; sd = its relative standard error (delta method in log space).
- unmeasured: the step-time model of thrifty.perf.steptime,
      T = (C_t(b)^g + N(n, nodes)^g)^(1/g),   C_t(b) = C_ref(b) / s_t
  fitted with `fit_step_time` on the reference type (the one with the most measured
  configurations, at two local batches or more), and composed across types on the premise that
  VM types differ in their processors, not in the fabric:
  * network N (a_intra, b_intra, a_inter, b_inter): refitted to every measured window's sync time
    of every type (a robust fit in log space, _robust_ring; where the windows span one worker
    count only, the slope is halfway between a flat and a proportional ring:
    UNIDENTIFIED_SLOPE_SHARE); the reference fit's values where no sync was measured;
  * compute speed s_t, in log space a normal prior updated by each measured configuration
    (conjugate normal-normal): prior mean price parity, log(price per worker / the reference's),
    a neutral guess that makes every type equally cost-efficient in compute, sd prior_type_sd;
    each measured configuration i of the type observes log(C_ref(b_i) / compute_i) with
    compute_i = step - sync (sync predicted when not reported) and variance
    transfer_sd^2 + (sync_rel_error * sync_i / compute_i)^2, so a window that is nearly all
    sync says little about the processor:
        1/v = 1/sd0^2 + sum 1/v_i,   m = v (m0/sd0^2 + sum x_i/v_i)
  sd: the reference fit's own log sd (`StepTimeModel.fit_sd_log`), widened by the speed's
  posterior sd (zero for the reference type), the sync's (_sync_sd, _unmeasured_network_sd) and,
  where the reference saw fewer than three local batches, the compute curve's shape away from
  them (_batch_shape_sd).
- model error (memory cliffs, odd sync modes): a Gaussian process on the log residuals of the
  measured configurations (search.residuals) shifts mu and adds its sd, so a measured
  configuration corrects and sharpens its neighbours; misspecification_sd is its prior sd.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from thrifty.errors import ModelError, ThriftyError
from thrifty.perf.steptime import StepTimeModel, fit_step_time, predict_step_time
from thrifty.perf.uncertainty import EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING, UNSEEN_NETWORK_SIGMA_LOG, UNSEEN_SYNC_SHARE
from thrifty.search.config import Config
from thrifty.search.residuals import krige

Z90 = 1.6448536269514722  # standard normal quantile of 0.95: a 90% interval is mu +- Z90 sd
NETWORK = slice(3, 7)  # a_intra_s, b_intra_s, a_inter_s, b_inter_s in perf.steptime.PARAM_NAMES
OVERLAP = 8  # overlap_g in perf.steptime.PARAM_NAMES
SYNC_HUBER_SCALE = 0.2  # log: a sync 22% off the ring fit counts in full, a 2x mode (0.69) linearly
# Syncs of one kind measured at one worker count n_m leave the ring's slope unidentified: the
# measured s_m = a + b (n_m - 2) lies anywhere between a sync flat in the workers (b = 0: a
# bandwidth-bound ring, 2 (n-1)/n S/BW) and one growing in proportion to n - 1 (a = b =
# s_m / (n_m - 1): a latency-bound ring, 2 (n-1) alpha; Thakur, Rabenseifner and Gropp 2005,
# "Optimization of Collective Communication Operations in MPICH"). The slope is taken halfway,
# b = UNIDENTIFIED_SLOPE_SHARE s_m / (n_m - 1), and the sync's spread per doubling of workers
# (BeliefSettings.sync_sd_per_doubling) puts both ends inside its 90% interval for up to about
# three doublings away (64 workers measured, 8 predicted); further out the proportional end
# falls outside it (the halfway line is within log 2 of the flat end at any distance).
# The reference fit's slope, the choice before, is its starting guess (perf.steptime: 0.1 ms a
# worker) wherever no fit saw two worker counts, so the sync came out flat: after one probe on
# 16 or 64 nodes every smaller count looked as slow to sync, and 3-hour time jobs on one VM type
# settled on the largest (benchmarks/bench_search_real.py, Pollux-shaped one-type groups, 3-hour
# time jobs: +3.1% to +34.5% and +4.4% to +42.7% median over the oracle before, +2.8% to +5.4%
# and +3.7% to +42.7% after; docs/search.md).
UNIDENTIFIED_SLOPE_SHARE = 0.5


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
    unmeasured_network_sd: float = UNSEEN_NETWORK_SIGMA_LOG  # log sd of a sync no measurement of its kind has shown
    sync_prior_sd: float = 0.5  # prior log sd of one configuration's sync around the ring fit (_sync_sd)
    sync_prior_weight: float = 2.0  # pseudo-observations behind sync_prior_sd
    sync_sd_per_doubling: float = 0.35  # the ring fit's log sd per doubling of workers beyond those measured


def _shape(configs: Sequence[Config]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([c.num_nodes for c in configs], float), np.array([c.num_workers for c in configs], float),
            np.array([c.local_batch for c in configs], float))


def _fit(configs: Sequence[Config], measured: Mapping[Config, Measured]) -> StepTimeModel | None:
    """The reference fit on one type's measured configurations. Where every multi-worker one
    reports its sync time (thrifty train's step stream: the wait for the slowest rank plus the
    collective, the part of the step that compute does not hide), the compute C = T - sync is
    fitted alone, as one rank's, and the network comes from the syncs (_refit_network): fitted
    to whole steps, a few mostly-sync windows let the fit trade compute for sync, and that split
    extrapolated to other local batches and types by several-fold. Else the whole model is
    fitted to the step times (perf.steptime)."""
    if len({c.local_batch for c in configs}) < 2:
        return None
    synced = all(c.num_workers == 1 or measured[c].sync_s is not None for c in configs)
    try:
        if synced:
            compute = [measured[c].mean_s - (measured[c].sync_s or 0.0) if c.num_workers > 1 else measured[c].mean_s
                       for c in configs]
            steps = [m if m > 0.05 * measured[c].mean_s else 0.05 * measured[c].mean_s  # a step is never all sync
                     for m, c in zip(compute, configs, strict=False)]
            ones = np.ones(len(configs))
            return fit_step_time(ones, ones, [c.local_batch for c in configs], steps)
        return fit_step_time(*_shape(configs), [measured[c].mean_s for c in configs])
    except ModelError:
        return None


def _network_rows(measured: Mapping[Config, Measured], multi_node: bool) -> list[Config]:
    return [c for c, m in measured.items() if m.sync_s is not None and c.num_workers > 1
            and (c.num_nodes > 1) == multi_node]


def _ring(a: float, b: float, workers) -> np.ndarray:
    return a + b * np.maximum(np.asarray(workers, float) - 2.0, 0.0)


def _robust_ring(extra: np.ndarray, sync: np.ndarray, slope: float | None) -> tuple[float, float]:
    """(a, b) of N = a + b extra fitted to measured sync times in log space with a Huber loss
    (scale SYNC_HUBER_SCALE): sync times cluster in modes (an uncontended ring, a contended one at
    2x or 4x), so one slow mode pulls a least-squares mean by its whole factor and a robust fit
    by a bounded step, and with most configurations in the fast mode the fit lands on it (Huber
    1964; Pollux, Qiao et al. OSDI 2021, fits its sync term per placement for the same reason).
    `slope` None: fitted (several worker counts); else b is held at it."""
    from scipy.optimize import least_squares
    floor = 1e-9

    def residuals(theta: np.ndarray) -> np.ndarray:
        a, b = (theta[0], theta[1]) if slope is None else (theta[0], slope)
        return np.log(np.maximum(a + b * extra, floor)) - np.log(np.maximum(sync, floor))

    a0 = float(np.exp(np.median(np.log(np.maximum(sync - (slope or 0.0) * extra, floor)))))
    start = np.array([max(a0, floor), a0 * 0.01]) if slope is None else np.array([max(a0, floor)])
    bounds = (np.full(len(start), floor), np.full(len(start), np.inf))
    fit = least_squares(residuals, start, bounds=bounds, loss="huber", f_scale=SYNC_HUBER_SCALE)
    return (float(fit.x[0]), float(fit.x[1])) if slope is None else (float(fit.x[0]), float(slope))


def _ring_slope(extra: np.ndarray, sync: np.ndarray) -> float | None:
    """The slope b for _robust_ring: None (fitted) across several worker counts; at one count
    n_m = extra + 2, UNIDENTIFIED_SLOPE_SHARE s_m / (n_m - 1), s_m the median sync (robust to a
    slow mode, as the ring fit is; a sync is never negative)."""
    if len(np.unique(extra)) > 1:
        return None
    return UNIDENTIFIED_SLOPE_SHARE * max(float(np.median(sync)), 0.0) / float(extra[0] + 1)


def _refit_network(params: np.ndarray, measured: Mapping[Config, Measured]) -> np.ndarray:
    """Ring all-reduce N = a + b max(n - 2, 0) inside a node and across nodes (docs/design.md), fitted
    robustly to measured sync times (_robust_ring); where one worker count was seen, with the
    slope halfway between a flat and a proportional ring (_ring_slope). With no multi-node
    configuration measured, the network across nodes is taken as
    inside one (the fit's premise, perf.steptime), from the refitted values."""
    params = params.copy()
    for multi_node, (a, b) in ((False, (3, 4)), (True, (5, 6))):
        rows = _network_rows(measured, multi_node)
        if not rows:
            continue
        extra = np.array([max(c.num_workers - 2, 0) for c in rows], float)
        sync = np.array([measured[c].sync_s for c in rows], float)
        params[a], params[b] = _robust_ring(extra, sync, _ring_slope(extra, sync))
    if not any(c.num_nodes > 1 for c in measured):
        params[5:7] = params[3:5]
    return params


def _sync_sd(params: np.ndarray, configs: Sequence[Config], measured: Mapping[Config, Measured],
             settings: "BeliefSettings") -> np.ndarray:
    """Log sd of an unmeasured configuration's sync time around the ring fit, for the kinds of
    network (one node, several) measured at all (NaN for the others: _unmeasured_network_sd).
    One configuration's sync is its own draw of the fabric's modes and of its placement, not a
    smooth function of the others, so the scatter of the measured syncs around the ring fit is
    the spread of the next one: s^2 = (k0 s0^2 + sum r_i^2) / (k0 + n - q), q the ring parameters fitted, (a conjugate estimate of a
    variance with prior s0 = sync_prior_sd on k0 = sync_prior_weight pseudo-observations), and
    the ring's extrapolation in worker count adds sync_sd_per_doubling per doubling of workers
    beyond those measured of the kind (one worker count leaves the ring's slope unidentified)."""
    nodes, workers, _ = _shape(configs)
    out = np.full(len(configs), np.nan)
    for multi_node, (a, b) in ((False, (3, 4)), (True, (5, 6))):
        rows = _network_rows(measured, multi_node)
        if not rows:
            continue
        seen_workers = np.array([c.num_workers for c in rows], float)
        sync = np.array([measured[c].sync_s for c in rows], float)
        fitted = _ring(params[a], params[b], seen_workers)
        r = np.log(np.maximum(sync, 1e-9)) - np.log(np.maximum(fitted, 1e-9))
        k0, s0 = settings.sync_prior_weight, settings.sync_prior_sd
        fitted_params = 2 if len(np.unique(seen_workers)) > 1 else 1  # what _refit_network fitted: its residuals are that many short
        scatter = np.sqrt((k0 * s0**2 + float(np.sum(r**2))) / (k0 + max(len(r) - fitted_params, 0)))
        away = np.min(np.abs(np.log2(workers[:, None] / seen_workers[None, :])), axis=1)
        kind = (workers > 1) & ((nodes > 1) == multi_node)
        out[kind] = np.hypot(scatter, settings.sync_sd_per_doubling * away[kind])
    return out


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
        twins.setdefault((c.instance_type, c.num_workers / c.num_nodes, c.local_batch), []).append(i)
    for members in twins.values():
        for i in members:
            fewer = [low[j] for j in members if candidates[j].num_nodes < candidates[i].num_nodes]
            if fewer:
                floor[i] = max(fewer)
    return floor


def _batch_shape_sd(base: StepTimeModel, fitted_on: Sequence[Config], configs: Sequence[Config]) -> np.ndarray:
    """Log sd of compute at each configuration's local batch from the compute curve's unidentified
    shape: a reference fit on fewer than three local batches holds the exponent p of
    C = a + b b_local^p at its start (perf.steptime), so the curve passes through the measured
    batches and its error grows with the distance from them; each doubling away from the nearest
    adds EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING (perf.uncertainty: an exponent off by about 0.15
    moves log C by 0.1 a doubling). Zero where p was fitted (its covariance is in fit_sd_log)."""
    if "compute_exponent" not in base.fixed:
        return np.zeros(len(configs))
    measured = np.log2([c.local_batch for c in fitted_on])
    local = np.log2([c.local_batch for c in configs])
    return EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING * np.min(np.abs(local[:, None] - measured[None, :]), axis=1)


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
    if any(m.sync_s is not None for m in measured.values()):
        params[OVERLAP] = 1.0  # a measured sync is the exposed part of the step: T = C + sync
    index = {c: i for i, c in enumerate(candidates)}
    mu, sd = np.empty(len(candidates)), np.empty(len(candidates))
    groups: dict[str, list[Config]] = {}
    for config in candidates:
        groups.setdefault(config.instance_type, []).append(config)
    fitted: dict[Config, float] = {}  # measured: the model's step time with its own measured sync
    parity = {name: float(np.log(worker_price[name] / worker_price[reference])) for name in groups}
    # prior: price parity (twice the price per worker, compute twice as fast), shifted by how far
    # the measured types sit off it on average (the reference's 0 included): the workload's own
    # speed per dollar, so an unmeasured type's prior does not hinge on which type is the reference
    speeds = {name: (0.0, 0.0) if name == reference else _speed(params, by_type[name], measured, parity[name], settings)
              for name in by_type if name in groups}
    offset = float(np.mean([speeds[name][0] - parity[name] for name in speeds])) if speeds else 0.0
    for name, configs in groups.items():
        log_speed, speed_sd = speeds[name] if name in speeds else _speed(params, [], measured,
                                                                          parity[name] + offset, settings)
        model = _at_speed(replace(base, params=params), log_speed)
        with np.errstate(over="ignore", invalid="ignore"):  # a far extrapolation's sd may be unbounded: capped
            fit_sd = np.nan_to_num(model.fit_sd_log(*_shape(configs)), nan=np.inf)
        rows = [index[c] for c in configs]
        step = model.predict(*_shape(configs))
        mu[rows] = np.log(step)
        g = model.params[8]
        share = (_network_only(model.params, configs) / step) ** g  # d log T / d log N
        sync_sd = _sync_sd(model.params, configs, measured, settings)
        network_sd = np.where(np.isnan(sync_sd), _unmeasured_network_sd(model.params, configs, measured, settings),
                              share * np.nan_to_num(sync_sd))
        shape_sd = _batch_shape_sd(base, by_type[reference], configs) * (1.0 - share)
        sd[rows] = np.sqrt(np.minimum(fit_sd, settings.max_sd) ** 2 + speed_sd**2 + network_sd**2 + shape_sd**2)
        compute = _compute_only(model.params, configs)
        for c, t, c_s in zip(configs, step, compute, strict=False):
            if c in measured:
                sync = measured[c].sync_s
                fitted[c] = float(t) if sync is None or c.num_workers == 1 else float((c_s**g + sync**g) ** (1 / g))
    seen = [c for c in candidates if c in measured]
    unseen = [index[c] for c in candidates if c not in measured]
    # the model's error left once each measured configuration's own sync is known: what its
    # neighbours share (compute: a memory cliff); its sync's draw is its own (_sync_sd)
    residuals = np.array([np.log(measured[c].mean_s) - np.log(fitted[c]) for c in seen])
    error, error_sd = krige(seen, residuals, np.array([measured[c].rel_se for c in seen]),
                            [candidates[i] for i in unseen], settings.misspecification_sd)
    mu[unseen] += error
    sd[unseen] = np.hypot(sd[unseen], error_sd)
    for c in seen:
        mu[index[c]], sd[index[c]] = np.log(measured[c].mean_s), measured[c].rel_se
    return mu, sd
