# SPDX-License-Identifier: MIT
"""Step-time model of synchronous data parallelism, fitted by bounded least squares on log time.

  compute   T_c(b, r)     = (a_c + b_c * b^p) * (1 + k * (r - 1))
                            Pollux/AdaptDL (OSDI 2021) is the case p = 1, k = 0. The exponent p in
                            [0.5, 2] is ours: per-sample cost falls with b while a device is
                            under-used and rises once the working set leaves the cache (measured on
                            this CPU: 0.27 ms/sample at b = 8, 0.12 at 128, 0.13 at 256). The factor
                            for r = workers / nodes ranks sharing one machine is ours too: co-located
                            ranks contend for cores and memory bandwidth, and the slowest sets the pace.
  network   T_n(n, nodes) = a_n + b_n * max(n - 2, 0)  for n > 1; separate (a_n, b_n) inside one
                            node and across nodes; 0 for n = 1    (ring all-reduce, docs/design.md)
  overlap   T             = (T_c^g + T_n^g)^(1/g), g in [1, 10]  (Pollux: g = 1 no overlap)
Fitted to the log step times and, on rows of several ranks whose samples give a rank's compute (a
sync_time_s column to take from the step, or a compute_time_s column), to the log compute too, as Pollux
fits its compute term to the steps without synchronisation and the whole model to the steps with
it (AdaptDL's goodput.fit_perf_params): the split between compute and network is then measured,
not left to a handful of step times to decide (bench_steptime_fit, docs/models.md). The residual
scatter is the step times' alone: a row's two residuals share its noise.
Parameters the samples cannot identify (across-node terms without multi-node samples, the slope in
n without samples at n > 2, k without co-located ranks, p with fewer than three batch sizes) are held
fixed and reported as such; free parameters that end on a bound are reported too (`at_bound`). A
kind of network no sample showed is taken as the other kind: across nodes as inside one (a lower
bound), inside one node as across nodes (an upper bound), and its interval widens (below).
The planner applies k only to the profiled machine: projected cloud VMs run one rank per VM or per GPU.

Prediction interval, in log step time, a sum of variances (perf.uncertainty gives the constants):
  fit       residual scatter + parameter covariance (delta method); an exact fit, whose residuals
            say nothing, takes EXACT_FIT_SIGMA_LOG instead
  launch    the launch-to-launch spread: what repeated rounds of one setting differed by in the
            profile, never below LAUNCH_SIGMA_LOG_FLOOR
  distance  EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING x the distance (in doublings of nodes, workers and
            local batch) to the nearest profiled configuration
  network   UNSEEN_NETWORK_SIGMA_LOG x the sync's share of the step (at least UNSEEN_SYNC_SHARE), for
            a configuration whose kind of network (ranks in one node, several nodes) no sample showed
"""

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import ndtri

from thrifty.errors import ModelError
from thrifty.io import read_json, write_json_atomic
from thrifty.perf.uncertainty import (
    EXACT_FIT_SIGMA_LOG,
    EXACT_RESIDUAL_LOG,
    EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING,
    LAUNCH_SIGMA_LOG_FLOOR,
    UNSEEN_NETWORK_SIGMA_LOG,
    UNSEEN_SYNC_SHARE,
    doublings_away,
)

log = logging.getLogger(__name__)

PARAM_NAMES = ("a_compute_s", "b_compute_s_per_sample", "compute_exponent", "a_intra_s", "b_intra_s",
               "a_inter_s", "b_inter_s", "contention_per_rank", "overlap_g")
LOWER = np.array([1e-9, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
UPPER = np.array([np.inf, np.inf, 2.0, np.inf, np.inf, np.inf, np.inf, 2.0, 10.0])
MODEL_VERSION = 3  # 3: launch spread, profiled configurations and parameters at a bound stored
# what a fit can stand on: a step of 1 us to 11 days, batches and worker counts a cluster can hold
STEP_TIME_RANGE_S = (1e-6, 1e6)
STEP_PARTS_SLACK = 2.0  # compute + sync beyond twice the step: other units or swapped columns (_check_samples)
MAX_LOCAL_BATCH, MAX_WORKERS = 1e7, 1e5
MIN_COMPUTE_SHARE = 0.05  # a measured compute below this share of its step is taken for a measurement error


def compute_time(params: np.ndarray, local_batch) -> np.ndarray:
    """T_c for one rank alone on its machine (no contention), vectorised over local batches."""
    a_c, b_c, p = params[:3]
    return a_c + b_c * np.asarray(local_batch, float) ** p
MODEL_KIND = "thrifty.steptime"


def rank_compute_time(params: np.ndarray, nodes, workers, local_batch) -> np.ndarray:
    """T_c of one of `workers / nodes` ranks sharing a machine: contention stretches it."""
    ranks_per_node = np.asarray(workers, float) / np.asarray(nodes, float)
    return compute_time(params, local_batch) * (1.0 + params[7] * (ranks_per_node - 1.0))


def network_time(params: np.ndarray, nodes, workers) -> np.ndarray:
    """T_n: the ring all-reduce inside one node or across nodes; 0 for one rank."""
    a_i, b_i, a_x, b_x = params[3:7]
    nodes, workers = np.asarray(nodes, float), np.asarray(workers, float)
    extra = np.maximum(workers - 2.0, 0.0)
    network = np.where(nodes > 1, a_x + b_x * extra, a_i + b_i * extra)
    return np.where(workers > 1, network, 0.0)


def predict_step_time(params: np.ndarray, nodes, workers, local_batch, compute_slowdown=1.0) -> np.ndarray:
    """Step time in seconds, vectorised over configurations (arrays broadcast together);
    `compute_slowdown` stretches T_c (a rank slowed on purpose, train.emulation)."""
    g = params[8]
    compute = rank_compute_time(params, nodes, workers, local_batch) * np.asarray(compute_slowdown, float)
    network = network_time(params, nodes, workers)
    return (compute**g + network**g) ** (1.0 / g)


@dataclass
class StepTimeModel:
    """A fitted step-time model; `sigma_log` is the residual deviation of log step time."""

    params: np.ndarray
    fixed: list[str] = field(default_factory=list)
    sigma_log: float = 0.0
    covariance: np.ndarray | None = None  # of the free parameters, in the order of PARAM_NAMES
    n_samples: int = 0
    train_mdape: float = float("nan")
    launch_sigma_log: float = LAUNCH_SIGMA_LOG_FLOOR  # launch-to-launch spread of log step time
    profiled: np.ndarray | None = None  # (k, 3): nodes, workers, local batch fitted; None: no widening
    at_bound: list[str] = field(default_factory=list)  # free parameters the fit left on a bound

    def predict(self, nodes, workers, local_batch, compute_slowdown=1.0) -> np.ndarray:
        return predict_step_time(self.params, nodes, workers, local_batch, compute_slowdown)

    @property
    def underdetermined(self) -> bool:
        """Fitted to no more samples than free parameters: no degrees of freedom left for an error estimate."""
        return 0 < self.n_samples <= len(self.free_indices)

    @property
    def exact(self) -> bool:
        """Underdetermined and passing through its samples (residuals within EXACT_RESIDUAL_LOG,
        `sigma_log` being their root sum of squares): the residuals carry no error estimate."""
        return self.underdetermined and self.sigma_log <= EXACT_RESIDUAL_LOG

    def fit_sd_log(self, nodes, workers, local_batch) -> np.ndarray:
        """The fit's own deviation of log step time: residual scatter plus parameter uncertainty."""
        centre = np.log(self.predict(nodes, workers, local_batch))
        variance = np.full_like(centre, self.sigma_log**2)
        free = self.free_indices
        if self.covariance is not None and len(free):
            grads = []
            for i in free:  # d log T / d theta_i by central differences
                step = 1e-6 * max(abs(self.params[i]), 1e-6)
                up, down = self.params.copy(), self.params.copy()
                up[i] += step
                down[i] = max(down[i] - step, LOWER[i])
                grads.append((np.log(predict_step_time(up, nodes, workers, local_batch))
                              - np.log(predict_step_time(down, nodes, workers, local_batch)))
                             / (up[i] - down[i]))
            jac = np.stack(grads, axis=-1)
            variance = variance + np.einsum("...i,ij,...j->...", jac, self.covariance, jac)
        return np.sqrt(variance)

    def unseen_network_sd_log(self, nodes, workers, local_batch) -> np.ndarray:
        """Extra deviation of log step time where the samples showed no sync of the configuration's
        kind (several ranks in one node, or several nodes): the fit guessed that network
        (perf.uncertainty.UNSEEN_NETWORK_SIGMA_LOG, times the sync's share of the step)."""
        nodes, workers = np.asarray(nodes, float), np.asarray(workers, float)
        unseen = (workers > 1) & np.where(nodes > 1, "a_inter_s" in self.fixed, "a_intra_s" in self.fixed)
        share = network_time(self.params, nodes, workers) / self.predict(nodes, workers, local_batch)
        return np.where(unseen, UNSEEN_NETWORK_SIGMA_LOG * np.clip(share, UNSEEN_SYNC_SHARE, 1.0), 0.0)

    def sd_log(self, nodes, workers, local_batch) -> np.ndarray:
        """Deviation of log step time of a new launch: the fit's (for an underdetermined fit, its
        residuals' root sum of squares, at least EXACT_FIT_SIGMA_LOG), the launch-to-launch spread, the distance to the profiled configurations and a
        kind of network no sample showed."""
        fit = np.full(np.shape(self.predict(nodes, workers, local_batch)), max(EXACT_FIT_SIGMA_LOG, self.sigma_log)) \
            if self.underdetermined else self.fit_sd_log(nodes, workers, local_batch)
        away = 0.0 if self.profiled is None else doublings_away(self.profiled, nodes, workers, local_batch)
        return np.sqrt(fit**2 + self.launch_sigma_log**2 + (EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING * away) ** 2
                       + self.unseen_network_sd_log(nodes, workers, local_batch) ** 2)

    def interval(self, nodes, workers, local_batch, level: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Prediction interval of a new launch's step time (sd_log, normal in log space)."""
        centre = np.log(self.predict(nodes, workers, local_batch))
        spread = ndtri(0.5 + level / 2) * self.sd_log(nodes, workers, local_batch)  # normal quantile
        return np.exp(centre - spread), np.exp(centre + spread)

    @property
    def free_indices(self) -> list[int]:
        return [i for i, name in enumerate(PARAM_NAMES) if name not in self.fixed]

    def to_dict(self) -> dict:
        return {"kind": MODEL_KIND, "version": MODEL_VERSION,
                "params": dict(zip(PARAM_NAMES, map(float, self.params), strict=False)), "fixed": self.fixed,
                "at_bound": self.at_bound, "sigma_log": self.sigma_log, "n_samples": self.n_samples,
                "train_mdape": self.train_mdape, "exact_fit": self.exact,
                "launch_sigma_log": self.launch_sigma_log,
                "profiled_configs": None if self.profiled is None else self.profiled.tolist(),
                "covariance": None if self.covariance is None else self.covariance.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> "StepTimeModel":
        if not isinstance(data, dict) or data.get("kind") != MODEL_KIND:
            raise ModelError("not a thrifty step-time model (missing kind 'thrifty.steptime')")
        if data.get("version") in (1, 2):
            raise ModelError(f"step-time model version {data['version']} (an older thrifty): without its "
                             "profiled configurations and launch spread its interval would be too narrow; fit it again")
        if data.get("version") != MODEL_VERSION:  # a newer thrifty's, or none: its fields may mean other things
            raise ModelError(f"step-time model version {data.get('version')!r}: this thrifty reads version "
                             f"{MODEL_VERSION}; fit it again")
        try:
            params = np.array([float(data["params"][name]) for name in PARAM_NAMES])
            cov = data["covariance"]  # required: without it the interval would be silently narrower
            profiled = data["profiled_configs"]
            model = cls(params=params, fixed=list(data.get("fixed", [])),
                        sigma_log=float(data["sigma_log"]),
                        covariance=None if cov is None else np.array(cov, float),
                        n_samples=int(data.get("n_samples", 0)),
                        train_mdape=float("nan") if data.get("train_mdape") is None else float(data["train_mdape"]),
                        launch_sigma_log=float(data["launch_sigma_log"]),
                        profiled=None if profiled is None else np.array(profiled, float).reshape(-1, 3),
                        at_bound=list(data.get("at_bound", [])))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"step-time model is incomplete or malformed: {exc}") from None
        if not np.all(np.isfinite(params)) or np.any(params < LOWER) or np.any(params > UPPER):
            raise ModelError("step-time model has parameters outside their valid ranges")
        free = len(model.free_indices)
        if model.covariance is None and model.n_samples > free:
            raise ModelError("step-time model has no covariance although it was fitted to more samples "
                             "than parameters: its interval would be too narrow; fit it again")
        if model.covariance is not None and (model.covariance.shape != (free, free)
                                             or not np.all(np.isfinite(model.covariance))):
            raise ModelError(f"step-time model's covariance must be a finite {free}x{free} matrix")
        for name, value in (("sigma_log", model.sigma_log), ("launch_sigma_log", model.launch_sigma_log)):
            if not (math.isfinite(value) and value >= 0):
                raise ModelError(f"step-time model's {name} must be a number >= 0")
        if model.profiled is not None and (not np.all(np.isfinite(model.profiled)) or np.any(model.profiled < 1)):
            raise ModelError("step-time model's profiled configurations must be positive numbers")
        return model

    def save(self, path: Path) -> None:
        # JSON has no NaN (an exact fit's train_mdape): null, which from_dict reads back as NaN
        write_json_atomic(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: Path) -> "StepTimeModel":
        return cls.from_dict(read_json(path, ModelError, "model file"))


def mdape(predicted, observed) -> float:
    """Median absolute percentage error, in percent."""
    predicted, observed = np.asarray(predicted, float), np.asarray(observed, float)
    return float(np.median(np.abs(predicted - observed) / observed) * 100)


def check_configs(nodes, workers, batch, what: str = "configuration") -> None:
    """Configurations a fit can stand on or a prediction can be asked for: finite, whole counts of
    processes and machines, num_workers >= num_nodes >= 1, local_batch in [1, MAX_LOCAL_BATCH] and
    num_workers up to MAX_WORKERS (raises ModelError naming `what`)."""
    nodes, workers, batch = (np.asarray(x, float) for x in (nodes, workers, batch))
    if not all(np.all(np.isfinite(x)) for x in (nodes, workers, batch)) or np.any(batch > MAX_LOCAL_BATCH) \
            or np.any(workers > MAX_WORKERS):
        raise ModelError(f"need finite sizes: local_batch up to {MAX_LOCAL_BATCH:g} and num_workers up to "
                         f"{MAX_WORKERS:g} in every {what}")
    if np.any(workers < 1) or np.any(nodes < 1) or np.any(batch < 1) or np.any(nodes > workers):
        raise ModelError(f"need num_workers >= num_nodes >= 1 and local_batch >= 1 in every {what}")
    if np.any(workers != np.round(workers)) or np.any(nodes != np.round(nodes)):
        raise ModelError(f"num_workers and num_nodes count processes and machines: whole numbers in every {what}")


def _check_samples(nodes, workers, batch, observed, compute_time_s, sync_time_s) -> None:
    if observed.size == 0:
        raise ModelError("no samples to fit")
    if np.any(~np.isfinite(observed)) or np.any(observed <= 0):
        raise ModelError("step times must be finite positive numbers")
    low, high = STEP_TIME_RANGE_S
    if np.any(observed < low) or np.any(observed > high):
        raise ModelError(f"step times must lie between {low:g} and {high:g} s (found {observed.min():.3g}-"
                         f"{observed.max():.3g}): are they in seconds?")
    check_configs(nodes, workers, batch, "sample")
    for name, column in (("compute_time_s", compute_time_s), ("sync_time_s", sync_time_s)):
        if column is not None and (np.any(~np.isfinite(column)) or np.any(column < 0)
                                   or np.any(column > high)):
            raise ModelError(f"{name} must be numbers between 0 and {high:g} s")
    # a step holds its compute and its sync (train.step); the slowest rank's compute and the ranks'
    # mean sync come from different ranks (perf.samples), so their sum may pass the step (thrifty's
    # own profiles: up to 1.03 quiet, above 1.05 loaded); twice the step means swapped columns or
    # other units
    parts = sum(np.zeros_like(observed) if c is None else np.asarray(c, float) for c in (compute_time_s, sync_time_s))
    over = int(np.sum(parts > STEP_PARTS_SLACK * observed))
    if over:
        given = " + ".join(name for name, c in (("compute_time_s", compute_time_s), ("sync_time_s", sync_time_s))
                           if c is not None)
        raise ModelError(f"{given} {'exceed' if '+' in given else 'exceeds'} {STEP_PARTS_SLACK:g}x step_time_s in "
                         f"{over} sample(s): a step "
                         f"holds {'both' if '+' in given else 'it'}; are the columns swapped or in other units?")
    if len(np.unique(batch)) < 2:
        raise ModelError("samples need at least two different local batch sizes")


def fit_step_time(nodes, workers, local_batch, step_time_s, compute_time_s=None,
                  sync_time_s=None, launch_sigma_log: float = LAUNCH_SIGMA_LOG_FLOOR) -> StepTimeModel:
    """Fit the model to measured configurations (one row each, or one row per step).
    `launch_sigma_log`: the launch-to-launch spread the samples showed (perf.uncertainty)."""
    from scipy.optimize import least_squares  # imported here, so that importing thrifty.perf stays light
    nodes, workers, batch, observed = (np.asarray(x, float) for x in
                                       (nodes, workers, local_batch, step_time_s))
    compute_time_s, sync_time_s = (None if x is None else np.asarray(x, float)
                                   for x in (compute_time_s, sync_time_s))
    _check_samples(nodes, workers, batch, observed, compute_time_s, sync_time_s)

    initial = _initial_guess(nodes, workers, batch, observed, compute_time_s, sync_time_s)
    fixed = [] if len(np.unique(batch)) >= 3 else ["compute_exponent"]
    if not np.any((workers > 1) & (nodes == 1)):
        fixed += ["a_intra_s", "b_intra_s"]
    elif not np.any((workers > 2) & (nodes == 1)):
        fixed.append("b_intra_s")
    if not np.any(nodes > 1):
        fixed += ["a_inter_s", "b_inter_s"]
    elif not np.any((workers > 2) & (nodes > 1)):
        fixed.append("b_inter_s")
    if not np.any(workers > nodes):
        fixed.append("contention_per_rank")
    if not np.any(workers > 1):
        fixed.append("overlap_g")
    free = [i for i, name in enumerate(PARAM_NAMES) if name not in fixed]

    rows, measured_compute = _measured_compute(observed, workers, compute_time_s, sync_time_s)
    dropped = int(np.sum(workers > 1)) - int(np.sum(rows))
    if dropped and (compute_time_s is not None or sync_time_s is not None):  # said (a new user's pass: silent)
        log.warning("%d sample(s) of several ranks leave less than %.0f%% of the step to compute after their sync: "
                    "left out of the compute fit (their step times still count)", dropped, 100 * MIN_COMPUTE_SHARE)

    def residuals(theta_free: np.ndarray) -> np.ndarray:
        theta = initial.copy()
        theta[free] = theta_free
        step = np.log(predict_step_time(theta, nodes, workers, batch)) - np.log(observed)
        compute = rank_compute_time(theta, nodes[rows], workers[rows], batch[rows])
        return np.concatenate([step, np.log(compute) - np.log(measured_compute)])

    start = np.clip(initial[free], LOWER[free] + 1e-12, UPPER[free] - 1e-9)
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            result = least_squares(residuals, start, bounds=(LOWER[free], UPPER[free]),
                                   x_scale="jac", method="trf")
    except ValueError as exc:  # scipy: residuals not finite (the checks above should prevent it)
        raise ModelError(f"the step-time model cannot be fitted to these samples: {exc}") from None
    params = initial.copy()
    params[free] = result.x
    if "a_inter_s" in fixed:  # no multi-node data: assume the network across nodes is as inside
        params[5], params[6] = params[3], params[4]
    elif "a_intra_s" in fixed:  # across nodes but never inside one: inside as across, an upper bound
        params[3], params[4] = params[5], params[6]
    # the scatter is the step times' own: a rank's compute is the step less its sync, so the two
    # residuals of one row share their noise and pooling them would count it twice
    dof = max(observed.size - len(free), 1)
    sigma = math.sqrt(float(np.sum(result.fun[:observed.size] ** 2)) / dof)
    jac = result.jac
    covariance = sigma**2 * np.linalg.pinv(jac.T @ jac) if observed.size > len(free) else None
    if not (np.all(np.isfinite(params)) and math.isfinite(sigma)
            and (covariance is None or np.all(np.isfinite(covariance)))):
        raise ModelError("the step-time fit did not converge to finite values: check the samples' units")
    fitted = predict_step_time(params, nodes, workers, batch)
    model = StepTimeModel(params=params, fixed=fixed, sigma_log=sigma, covariance=covariance,
                          n_samples=int(observed.size),
                          launch_sigma_log=max(float(launch_sigma_log), LAUNCH_SIGMA_LOG_FLOOR),
                          profiled=np.unique(np.stack([nodes, workers, batch], axis=1), axis=0),
                          at_bound=_at_bound(free, result.x, result.active_mask))
    if not model.exact:  # an exact fit has no in-sample error to report (NaN, the field's default)
        model.train_mdape = mdape(fitted, observed)
    log.debug("step-time fit on %d samples: sigma_log %.3g, fixed %s, on a bound %s", model.n_samples, sigma,
              ", ".join(fixed) or "none", ", ".join(model.at_bound) or "none")
    return model


def _at_bound(free: list[int], x: np.ndarray, active_mask: np.ndarray) -> list[str]:
    """The free parameters a fit left on a bound: scipy's active set, or within 1e-4 of a nonzero
    bound (relative; trf stops just inside a bound and leaves it out of the active set: a compute
    exponent of 1.99999 against its 2 had not been flagged)."""
    names = []
    for j, i in enumerate(free):
        near = [abs(x[j] - bound) <= 1e-4 * abs(bound) for bound in (LOWER[i], UPPER[i])
                if np.isfinite(bound) and bound != 0]
        if active_mask[j] or any(near):
            names.append(PARAM_NAMES[i])
    return names


def _measured_compute(observed, workers, compute_time_s, sync_time_s) -> tuple[np.ndarray, np.ndarray]:
    """(rows, compute): the rows of several ranks whose compute the samples tell, and that compute:
    all of a step but its exposed sync, the part compute does not hide. It is the step less its
    sync where a sync column is given (thrifty train's sync is the wait for the slowest rank plus
    the collective; Pollux's step less its sync is its step without synchronisation), else the
    compute column (thrifty train's leaves out the optimizer's update, which the step holds, so
    the step less the sync comes first). One rank's step is all compute already (its sync column,
    if any, is bookkeeping, not a network); a row whose sync leaves less than MIN_COMPUTE_SHARE of
    its step is left out, not clamped: a sync at or past the step is a measurement gone wrong."""
    if sync_time_s is not None:
        compute = observed - sync_time_s
    elif compute_time_s is not None:
        compute = np.asarray(compute_time_s, float)
    else:
        return np.zeros(observed.size, bool), np.zeros(0)
    rows = (workers > 1) & (compute >= MIN_COMPUTE_SHARE * observed)
    return rows, compute[rows]


def _initial_guess(nodes, workers, batch, observed, compute_time_s, sync_time_s) -> np.ndarray:
    single = workers == 1
    x, y = (batch[single], observed[single]) if np.sum(single) >= 2 and \
        len(np.unique(batch[single])) >= 2 else (batch, observed)
    if compute_time_s is not None:
        x, y = batch, np.asarray(compute_time_s, float)
    slope, intercept = np.polyfit(x, y, 1)
    slope, intercept = max(slope, 1e-9), max(intercept, 1e-6)
    multi = workers > 1
    if sync_time_s is not None and np.any(multi):
        net = float(np.median(np.asarray(sync_time_s, float)[multi]))
    elif np.any(multi):
        net = float(np.median(np.maximum(observed[multi] - (intercept + slope * batch[multi]), 1e-5)))
    else:
        net = 1e-3
    net = max(net, 1e-6)
    return np.array([intercept, slope, 1.0, net, net * 0.1, net, net * 0.1, 0.0, 1.5])
