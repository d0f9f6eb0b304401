# SPDX-License-Identifier: MIT
"""Lifetime distributions of preemptible VMs (times in seconds): exponential, Weibull, and the
constrained bathtub model of Kadupitiya, Jadhao & Sharma (HPDC 2020):

  F(t) = A (1 - exp(-t / tau1) + exp((t - b) / tau2))   on [0, t_end], F(t_end) = 1,

early failures (tau1), a quiet middle, and the rise to the 24-hour limit (b, tau2). F(0) =
A exp(-b / tau2) is negligible for the fitted values; t_end (where F reaches 1) is the model's
largest lifetime. Every model gives cdf, pdf, hazard, survival, sampling and the mean.
"""

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize

from thrifty.errors import ThriftyError

HOUR = 3600.0


class LifetimeModelError(ThriftyError):
    """An unusable lifetime model or model name."""


class LifetimeModel(ABC):
    """Common interface; subclasses define cdf, pdf, params and, if bounded, t_end."""

    name = "model"
    t_end = math.inf

    @abstractmethod
    def cdf(self, t) -> np.ndarray: ...

    @abstractmethod
    def pdf(self, t) -> np.ndarray: ...

    @abstractmethod
    def params(self) -> dict[str, float]: ...

    @property
    def n_params(self) -> int:
        return len(self.params())

    def survival(self, t) -> np.ndarray:
        return 1.0 - self.cdf(t)

    def hazard(self, t) -> np.ndarray:
        """f(t) / S(t), per second (infinite where S = 0)."""
        s = self.survival(t)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(s > 0, self.pdf(t) / np.where(s > 0, s, 1.0), np.inf)

    def mean(self) -> float:
        upper = self.t_end if math.isfinite(self.t_end) else np.inf
        value, _ = integrate.quad(lambda t: float(self.survival(t)), 0.0, upper, limit=200)
        return float(value)

    def sample(self, rng: np.random.Generator, size: int, age: float = 0.0) -> np.ndarray:
        """Lifetimes drawn by inverting the cdf; with `age`, conditional on having lived that long."""
        low = self.cdf(age) if age > 0 else 0.0
        u = low + rng.uniform(size=size) * (1.0 - low)
        return self.quantile(u)

    def quantile(self, u) -> np.ndarray:
        """Inverse cdf by vectorised bisection on [0, t_end]."""
        u = np.asarray(u, float)
        hi = np.full(u.shape, self.t_end if math.isfinite(self.t_end) else self._upper_for(u))
        lo = np.zeros(u.shape)
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            below = self.cdf(mid) < u
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return 0.5 * (lo + hi)

    def _upper_for(self, u: np.ndarray) -> float:
        upper = HOUR
        while float(self.cdf(upper)) < float(np.max(u, initial=0.0)) and upper < 1e12:
            upper *= 2
        return upper

    def to_dict(self) -> dict:
        return {"model": self.name, "params": self.params()}


@dataclass(frozen=True)
class Exponential(LifetimeModel):
    rate_per_s: float
    name = "exponential"

    def cdf(self, t):
        return -np.expm1(-self.rate_per_s * np.maximum(np.asarray(t, float), 0.0))

    def pdf(self, t):
        t = np.asarray(t, float)
        return np.where(t >= 0, self.rate_per_s * np.exp(-self.rate_per_s * np.maximum(t, 0)), 0.0)

    def mean(self) -> float:
        return 1.0 / self.rate_per_s

    def params(self):
        return {"rate_per_s": self.rate_per_s}


@dataclass(frozen=True)
class Weibull(LifetimeModel):
    shape: float
    scale_s: float
    name = "weibull"

    def cdf(self, t):
        return -np.expm1(-(np.maximum(np.asarray(t, float), 0.0) / self.scale_s) ** self.shape)

    def pdf(self, t):
        t = np.maximum(np.asarray(t, float), 1e-300)
        z = t / self.scale_s
        return self.shape / self.scale_s * z ** (self.shape - 1) * np.exp(-z**self.shape)

    def mean(self) -> float:
        return self.scale_s * math.gamma(1 + 1 / self.shape)

    def params(self):
        return {"shape": self.shape, "scale_s": self.scale_s}


@dataclass(frozen=True)
class Bathtub(LifetimeModel):
    a: float
    tau1_s: float
    tau2_s: float
    b_s: float
    name = "bathtub"

    def __post_init__(self) -> None:
        if not (0 < self.a <= 1 and self.tau1_s > 0 and self.tau2_s > 0 and self.b_s > 0):
            raise LifetimeModelError(f"bathtub parameters out of range: {self.params()}")
        end = optimize.brentq(lambda t: float(self._raw_cdf(t)) - 1.0, 0.0,
                              self.b_s + self.tau2_s * (math.log(2.0 / self.a) + 50))
        object.__setattr__(self, "_t_end", float(end))

    @classmethod
    def ending_at(cls, a: float, tau1_s: float, tau2_s: float, t_end_s: float) -> "Bathtub":
        """The model with F(t_end) = 1: b = t_end - tau2 ln((1 - A (1 - exp(-t_end/tau1))) / A)."""
        rest = 1.0 - a * -math.expm1(-t_end_s / tau1_s)
        return cls(a, tau1_s, tau2_s, t_end_s - tau2_s * math.log(rest / a))

    def _raw_cdf(self, t):
        t = np.asarray(t, float)
        return self.a * (-np.expm1(-t / self.tau1_s) + np.exp(np.minimum((t - self.b_s) / self.tau2_s, 700)))

    @property
    def t_end(self) -> float:  # type: ignore[override]  # a read-only property over the base's class attribute
        """Where F reaches 1: the largest lifetime the model allows."""
        return self._t_end  # type: ignore[attr-defined]  # set by __post_init__ (object.__setattr__: frozen)

    def cdf(self, t):
        t = np.asarray(t, float)
        return np.where(t < 0, 0.0, np.minimum(self._raw_cdf(np.maximum(t, 0)), 1.0))

    def pdf(self, t):
        t = np.asarray(t, float)
        inside = (t >= 0) & (t <= self.t_end)
        density = self.a * (np.exp(-np.maximum(t, 0) / self.tau1_s) / self.tau1_s
                            + np.exp(np.minimum((t - self.b_s) / self.tau2_s, 700)) / self.tau2_s)
        return np.where(inside, density, 0.0)

    def params(self):
        return {"a": self.a, "tau1_s": self.tau1_s, "tau2_s": self.tau2_s, "b_s": self.b_s}


MODEL_TYPES = {"exponential": Exponential, "weibull": Weibull, "bathtub": Bathtub}


def model_from_dict(data: dict) -> LifetimeModel:
    if not isinstance(data, dict):
        raise LifetimeModelError(f"a lifetime model is a JSON object with model and params, got {type(data).__name__}")
    if "model" not in data:
        raise LifetimeModelError(f"a lifetime model JSON names its model (\"model\": one of {', '.join(MODEL_TYPES)}) "
                                 "and its params, as `thrifty preempt fit --out` writes it")
    kind = MODEL_TYPES.get(str(data.get("model")))
    if kind is None:
        raise LifetimeModelError(f"unknown lifetime model {data.get('model')!r}; "
                                 f"choose one of {', '.join(MODEL_TYPES)}")
    try:
        params = {k: float(v) for k, v in data["params"].items()}
        model = kind(**params)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise LifetimeModelError(f"malformed {data.get('model')} parameters: {exc}") from None
    if not all(math.isfinite(v) and v > 0 for v in params.values()):
        raise LifetimeModelError(f"{data['model']} parameters must be positive numbers, got {params}")
    return model
