# SPDX-License-Identifier: MIT
"""Fit lifetime models to observed VM lifetimes, some of them right-censored.

- Maximum likelihood with right-censoring: log L = sum_{preempted} log f(t_i) + sum_{stopped} log S(t_i)
  (Klein & Moeschberger, "Survival Analysis", 2003, eq. 3.5.1).
- Least squares on the empirical cdf of the preempted lifetimes only, as the HPDC 2020 paper did
  (it ignores the stopped VMs, so it describes "lifetime given preempted").
- Kaplan-Meier product-limit estimate of the survival curve (Kaplan & Meier 1958).
- Goodness of fit: Kolmogorov-Smirnov distance to Kaplan-Meier, and AIC = 2k - 2 log L (Akaike 1974).
"""

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize

from thrifty.errors import ThriftyError
from thrifty.io import read_csv
from thrifty.transient.lifetimes import HOUR, Bathtub, Exponential, LifetimeModel, Weibull

log = logging.getLogger(__name__)

EVENTS = {"preempted": True, "stopped": False}
FIT_MODELS = ("bathtub", "weibull", "exponential")
METHODS = ("mle", "lsq")


class LifetimeDataError(ThriftyError):
    """Lifetime data that cannot be fitted."""


@dataclass(frozen=True)
class Lifetimes:
    """Observed lifetimes in seconds; `preempted[i]` False means right-censored (stopped by us)."""

    lifetime_s: np.ndarray
    preempted: np.ndarray
    machine_type: np.ndarray

    def subset(self, mask: np.ndarray) -> "Lifetimes":
        return Lifetimes(self.lifetime_s[mask], self.preempted[mask], self.machine_type[mask])

    def for_machine_type(self, machine_type: str | None) -> "Lifetimes":
        if machine_type is None:
            return self
        chosen = self.subset(self.machine_type == machine_type)
        if chosen.lifetime_s.size == 0:
            known = ", ".join(sorted(set(self.machine_type.tolist()) - {""})) or "none in the file"
            raise LifetimeDataError(f"no lifetimes for machine type {machine_type!r} (known: {known})")
        return chosen


MAX_LIFETIME_S = 10 * 365.25 * 86400  # no VM lifetime a cloud reports reaches 10 years: another unit


def read_lifetimes(path: Path) -> Lifetimes:
    """CSV with `lifetime_s` and optional `event` (preempted|stopped) and `machine_type`."""
    rows = read_csv(path, LifetimeDataError, "lifetime file", required=("lifetime_s",))
    times, events, types = [], [], []
    for line, row in enumerate(rows, start=2):
        text = (row.get("lifetime_s") or "").strip()
        try:
            value = float(text)
        except ValueError:
            raise LifetimeDataError(f"{path}:{line}: lifetime_s {text!r} is not a number") from None
        if not math.isfinite(value) or value <= 0:
            raise LifetimeDataError(f"{path}:{line}: lifetime_s must be a positive number, got {text!r}")
        if value > MAX_LIFETIME_S:  # 1e15 had been fitted: "mean lifetime 5.58e+11 h"
            raise LifetimeDataError(f"{path}:{line}: lifetime_s {text} is over 10 years: are they in seconds?")
        event = (row.get("event") or "preempted").strip().lower()
        if event not in EVENTS:
            raise LifetimeDataError(f"{path}:{line}: unknown event {event!r}; use preempted or stopped")
        times.append(value)
        events.append(EVENTS[event])
        types.append((row.get("machine_type") or "").strip())
    return Lifetimes(np.array(times), np.array(events, bool), np.array(types))


def kaplan_meier(data: Lifetimes) -> tuple[np.ndarray, np.ndarray]:
    """Distinct event times and S(t) just after each: prod (1 - d_i / n_i)."""
    order = np.argsort(data.lifetime_s, kind="stable")
    t, d = data.lifetime_s[order], data.preempted[order]
    times, survival, at_risk, s = [], [], len(t), 1.0
    i = 0
    while i < len(t):
        j = i
        while j < len(t) and t[j] == t[i]:
            j += 1
        deaths = int(d[i:j].sum())
        if deaths:
            s *= 1.0 - deaths / at_risk
            times.append(t[i])
            survival.append(s)
        at_risk -= j - i
        i = j
    return np.array(times), np.array(survival)


class EmpiricalLifetimes:
    """Draws from the Kaplan-Meier estimate: real lifetimes, with censoring accounted for."""

    def __init__(self, data: Lifetimes) -> None:
        self.times, survival = kaplan_meier(data)
        self.cdf_values = 1.0 - survival
        if self.times.size == 0:
            raise LifetimeDataError("no preemptions to resample")

    def sample(self, rng: np.random.Generator, size: int, age: float = 0.0) -> np.ndarray:
        low = float(np.interp(age, self.times, self.cdf_values, left=0.0)) if age > 0 else 0.0
        top = float(self.cdf_values[-1])
        u = low + rng.uniform(size=size) * (top - low)
        index = np.minimum(np.searchsorted(self.cdf_values, u, side="left"), self.times.size - 1)
        return np.maximum(self.times[index], age)


def log_likelihood(model: LifetimeModel, data: Lifetimes) -> float:
    t = data.lifetime_s
    with np.errstate(divide="ignore"):
        events = np.log(model.pdf(t[data.preempted]))
        censored = np.log(model.survival(t[~data.preempted]))
    total = float(events.sum() + censored.sum())
    return total if math.isfinite(total) else -math.inf


def ks_distance(model: LifetimeModel, data: Lifetimes) -> float:
    """sup_t |F_model(t) - F_KM(t)| over the Kaplan-Meier jump points (both sides of each jump)."""
    times, survival = kaplan_meier(data)
    if times.size == 0:
        return float("nan")
    before = np.concatenate([[1.0], survival[:-1]])
    model_cdf = model.cdf(times)
    return float(max(np.max(np.abs(model_cdf - (1 - survival))), np.max(np.abs(model_cdf - (1 - before)))))


@dataclass(frozen=True)
class Fit:
    model: LifetimeModel
    method: str
    log_likelihood: float
    aic: float
    ks: float
    n: int
    preempted: int
    at_bound: tuple[str, ...] = ()  # parameters the fit left on a bound of their range

    @property
    def spike(self) -> bool:
        """A bathtub whose wear-out time constant tau2 is on its lower bound: its hazard a spike."""
        return "tau2" in self.at_bound and getattr(self.model, "tau2_s", math.inf) <= 2 * BATHTUB_MIN_TAU_H * HOUR

    def to_dict(self) -> dict:
        return {**self.model.to_dict(), "method": self.method, "log_likelihood": self.log_likelihood,
                "aic": self.aic, "ks_distance": self.ks, "n": self.n, "preempted": self.preempted,
                "at_bound": list(self.at_bound)}


def _scored(model: LifetimeModel, method: str, data: Lifetimes, at_bound: tuple[str, ...] = ()) -> Fit:
    ll = log_likelihood(model, data)
    return Fit(model, method, ll, 2 * model.n_params - 2 * ll, ks_distance(model, data),
               int(data.lifetime_s.size), int(data.preempted.sum()), at_bound)


def _bathtub(theta) -> Bathtub:
    a, tau1_h, tau2_h, b_h = theta
    return Bathtub(a=a, tau1_s=tau1_h * HOUR, tau2_s=tau2_h * HOUR, b_s=b_h * HOUR)


BATHTUB_START = np.array([0.4, 1.0, 0.8, 24.0])  # A, tau1 (h), tau2 (h), b (h): Google-like
BATHTUB_MIN_TAU_H = 1e-3  # the fits' lower bound of tau1 and tau2 (3.6 s)
BATHTUB_BOUNDS = (np.array([1e-3, BATHTUB_MIN_TAU_H, BATHTUB_MIN_TAU_H, 1e-2]), np.array([1.0, 1e3, 1e3, 1e3]))


# Preempted lifetimes closer together than this (coefficient of variation) are one age, not a
# distribution: for a large shape k, log T of a Weibull is Gumbel with sd pi / (sqrt(6) k), so its
# CV is about 1.28 / k and 1% needs k above ~130; at 0 the MLE's shape grows without bound
# (4 preemptions all at 1 h fitted a shape of 3e15).
MIN_SPREAD = 0.01


def _check_spread(events: np.ndarray, family: str) -> None:
    """Refuse preempted lifetimes with no spread for a family with a shape (Weibull, bathtub)."""
    if float(np.std(events)) < MIN_SPREAD * float(np.mean(events)):
        raise LifetimeDataError(f"the {events.size} preemptions are all at {float(np.mean(events)):.6g} s "
                                f"(spread under {MIN_SPREAD:.0%}): a {family} fit would be a step there; "
                                "use --family exponential")


def fit_bathtub_lsq(data: Lifetimes) -> Fit:
    """Least squares of F(t_i) against the empirical cdf i / n of the preempted lifetimes."""
    t = np.sort(data.lifetime_s[data.preempted])
    if t.size < 4:
        raise LifetimeDataError(f"need at least 4 preemptions to fit the bathtub model, got {t.size}")
    _check_spread(t, "bathtub")
    ecdf = np.arange(1, t.size + 1) / t.size
    start = BATHTUB_START.copy()
    start[3] = min(max(t.max() / HOUR, 0.02), 999.0)
    result = optimize.least_squares(lambda th: _bathtub(th)._raw_cdf(t) - ecdf, start,
                                    bounds=BATHTUB_BOUNDS, x_scale="jac")
    return _scored(_bathtub(result.x), "lsq", data)


def fit_bathtub_mle(data: Lifetimes) -> Fit:
    """Censored maximum likelihood. The likelihood is -inf unless t_end >= every preempted
    lifetime and t_end > every stopped one (S(t_end) = 0), so the model is parametrised by (A,
    tau1, tau2, t_end) with a box bound on t_end (L-BFGS-B), from a grid of starts. With no stopped
    VM past the last preemption the optimum sits on that edge; otherwise (e.g. VMs stopped at a
    24 h observation limit) it lies above the longest stopped lifetime, and the starts spread t_end
    over the hour above it."""
    events = data.lifetime_s[data.preempted]
    if events.size < 4:
        raise LifetimeDataError("need at least 4 preemptions to fit the bathtub model")
    _check_spread(events, "bathtub")
    longest = float(events.max()) / HOUR
    longest_stopped = float(data.lifetime_s[~data.preempted].max(initial=0.0)) / HOUR
    edge = max(longest, longest_stopped * (1 + 1e-6))
    lower = np.array([1e-3, BATHTUB_MIN_TAU_H, BATHTUB_MIN_TAU_H, edge * (1 + 1e-9)])
    upper = np.array([1.0, 1e3, 1e3, max(edge * 2, edge + 1)])
    ends = [edge * 1.0001] if longest_stopped < longest else [edge + 0.05, edge + 0.25, edge + 1.0]

    def model_of(theta) -> Bathtub:
        a, tau1_h, tau2_h, end_h = theta
        return Bathtub.ending_at(a, tau1_h * HOUR, tau2_h * HOUR, end_h * HOUR)

    def negative_ll(theta):
        try:
            ll = log_likelihood(model_of(theta), data)
        except (ValueError, ZeroDivisionError, ThriftyError):
            return 1e300
        return -ll if math.isfinite(ll) else 1e300

    plateau = float(events.size) / data.lifetime_s.size
    bounds = list(zip(lower, upper, strict=True))
    results = [optimize.minimize(negative_ll, np.clip([plateau, tau1_h, tau2_h, end_h], lower, upper),
                                 method="L-BFGS-B", bounds=bounds)
               for tau1_h in (0.5, 1.0, 3.0) for tau2_h in (0.05, 0.2, 0.8) for end_h in ends]
    best = min(results, key=lambda result: result.fun)  # the first of the lowest, as the loop it replaces
    # tau1 or tau2 on a bound (3.6 s or 1,000 h): a spike or a flat the data do not show, as on
    # exponential lifetimes, where tau2 went to 3.6 s and the spike at the longest one bought AIC;
    # t_end's lower bound is the model's support, not a failure
    on_bound = tuple(name for name, x, lo, hi in zip(("tau1", "tau2"), best.x[1:3], lower[1:3], upper[1:3],
                                                     strict=True) if x <= lo * (1 + 1e-6) or x >= hi * (1 - 1e-6))
    return _scored(model_of(best.x), "mle", data, on_bound)


def fit_exponential(data: Lifetimes) -> Fit:
    """Censored MLE: rate = preemptions / total observed time."""
    if data.preempted.sum() == 0:
        raise LifetimeDataError("no preemptions in the data: the rate cannot be estimated")
    return _scored(Exponential(float(data.preempted.sum() / data.lifetime_s.sum())), "mle", data)


def fit_weibull(data: Lifetimes) -> Fit:
    if data.preempted.sum() < 2:
        raise LifetimeDataError("need at least 2 preemptions to fit a Weibull model")
    _check_spread(data.lifetime_s[data.preempted], "Weibull")
    scale0 = float(data.lifetime_s.sum() / data.preempted.sum())

    def negative_ll(log_theta):
        shape, scale = np.exp(log_theta)
        ll = log_likelihood(Weibull(float(shape), float(scale)), data)
        return -ll if math.isfinite(ll) else 1e300

    result = optimize.minimize(negative_ll, np.log([1.0, scale0]), method="Nelder-Mead",
                               options={"maxiter": 2000, "xatol": 1e-8, "fatol": 1e-8})
    shape, scale = np.exp(result.x)
    return _scored(Weibull(float(shape), float(scale)), "mle", data)


def fit(data: Lifetimes, model: str = "auto", method: str = "mle") -> Fit:
    """One model (`bathtub`, `weibull`, `exponential`) or `auto`: every model by MLE, the lowest AIC."""
    if method not in METHODS:
        raise LifetimeDataError(f"unknown fit method {method!r}; choose mle or lsq")
    if model == "auto":
        return lowest_aic(*fit_each(data))
    fitted = _fit_family(data, model, method)
    log.info("fitted %s (%s) to %d lifetimes, %d preempted: log L %.1f, AIC %.1f, KS %.3f", fitted.model.name,
             fitted.method, data.lifetime_s.size, int(data.preempted.sum()), fitted.log_likelihood, fitted.aic,
             fitted.ks)
    return fitted


def fit_each(data: Lifetimes) -> tuple[dict[str, Fit], dict[str, str]]:
    """Every model of FIT_MODELS by MLE where the data allow it: (fits, why the others were not
    fitted). Three preemptions fit a Weibull or an exponential but not the bathtub's four
    parameters, which had failed `--family exponential` and `auto` alike."""
    fits, not_fitted = {}, {}
    for model in FIT_MODELS:
        try:
            fits[model] = fit(data, model)
        except LifetimeDataError as error:
            not_fitted[model] = str(error)
    return fits, not_fitted


def lowest_aic(fits: dict[str, Fit], not_fitted: dict[str, str]) -> Fit:
    """`auto`'s choice among fit_each's fits: the lowest AIC of those that are no spike (a bathtub
    whose tau2 sits on its lower bound buys likelihood with a spike at the longest lifetime, where
    the AIC's premise of an optimum inside the range fails; tau1 on its upper bound is a flat
    early hazard, a fit like any other), of all where every fit is one."""
    if not fits:  # the simplest family's reason ("no preemptions in the data"), not the bathtub's 4-preemption need
        raise LifetimeDataError(not_fitted[FIT_MODELS[-1]] if FIT_MODELS[-1] in not_fitted else
                                next(iter(not_fitted.values())))
    inside = [f for f in fits.values() if not f.spike] or list(fits.values())
    chosen = min(inside, key=lambda f: f.aic)
    for name, other in fits.items():
        if other.spike and other.aic < chosen.aic:
            log.warning("auto: %s has a lower AIC (%.1f) from a spike at the longest lifetime (tau2 on its lower "
                        "bound): not chosen", name, other.aic)
    log.info("auto: %s has the lowest AIC (%.1f)%s", chosen.model.name, chosen.aic,
             "".join(f"; {m} not fitted: {why}" for m, why in not_fitted.items()))
    return chosen


def _fit_family(data: Lifetimes, model: str, method: str) -> Fit:
    if model == "bathtub":
        return fit_bathtub_lsq(data) if method == "lsq" else fit_bathtub_mle(data)
    if method == "lsq":
        raise LifetimeDataError("the least-squares fit is for the bathtub model")
    if model == "weibull":
        return fit_weibull(data)
    if model == "exponential":
        return fit_exponential(data)
    raise LifetimeDataError(f"unknown lifetime model {model!r}; choose bathtub, weibull, exponential or auto")
