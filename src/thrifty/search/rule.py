# SPDX-License-Identifier: MIT
"""The decision rule: probe the candidate whose expected gain most exceeds its price; when none
does, stop exploring.

For a candidate c with mean step time T_c ~ lognormal(mu_c, sd_c) (search.belief), the objective
still to pay from the current progress p to the target P is

    J_c = r_c K_c T_c,   K_c = (P - p) (1/B_c + 1/B_noise)   steps left (search.noise_schedule)
    r_c = 1 (time, s/s)  or  price_c / 3600 (cost, $/s)

and with a deadline D, c is feasible iff elapsed + move_c + K_c T_c <= D, i.e. log T_c <= x_max.
The incumbent y is the best J among measured, feasible configurations (no move cost: every
candidate's J is priced the same way). The gain is the expected improvement (Jones et al. 1998,
EI; a lognormal J as in CherryPick, NSDI 2017) restricted to feasible outcomes:

    gain_c = E[(y - J_c) 1{J_c < y, feasible}] = y Phi(z) - r_c K_c exp(mu + sd^2/2) Phi(z - sd),
    z = (min(log(y / (r_c K_c)), x_max) - mu) / sd

When physics bounds the step time from below (log T_c >= l_c: search.belief.step_time_floor, a
step on more nodes is never faster than a measured one on fewer), X is that normal truncated
at l_c, a = (l_c - mu) / sd, and with Q(x) = 1 - Phi(x):

    gain_c = [y (Q(a) - Q(z)) - r_c K_c exp(mu + sd^2/2) (Q(a - sd) - Q(z - sd))] / Q(a)   (z > a, else 0)
    P(win) = (Q(a) - Q(z)) / Q(a),   E[T_c] = exp(mu + sd^2/2) Q(a - sd) / Q(a)

which is the formula above for l_c = -inf.

The price is what the probe costs over staying on the incumbent:

    price_c = m(cur -> c) + (1 - P_c) m(c -> inc) - m(cur -> inc)
              + max(0, E[r_c w T_c] - w g_c y / (P - p))
              + (1 - P_c) r_c max(0, F - s(cur -> c) - w E[T_c])      (cost only)

with m(a -> b) the move's seconds s(a -> b) (restart, plus start-up for new VMs) times r_b,
P_c = Phi(z) the chance that c wins (else we move back), w the expected window steps, g_c the
progress per step, y / (P - p) the incumbent's objective per unit of progress. The last term is
the billing floor: a cloud bills new VMs at least F seconds (60: per-second billing with a
one-minute minimum; 0 for a probe on the VMs already running), so a probe on new VMs that ends,
and is left, before F pays for time it never used.

Probe argmax(gain - price) among the candidates the search may probe (`pick_probe`: unmeasured
and recouping their price: search.loop) if positive; otherwise settle on argmin over measured
(J + m(cur -> .)). Gains shrink as the remaining work shrinks, so exploration happens early and
stops for good.
"""

from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtr

from thrifty.errors import ThriftyError

OBJECTIVES = ("cost", "time")


@dataclass(frozen=True)
class Objective:
    """Minimise cost or time; a deadline (seconds from the start) constrains either."""

    kind: str = "cost"
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in OBJECTIVES:
            raise ThriftyError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.kind!r}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ThriftyError(f"deadline must be positive, got {self.deadline_s}")

    def rate(self, price_per_hour) -> np.ndarray:
        """r: objective units per second of running (1 for time, $/s for cost)."""
        price = np.asarray(price_per_hour, float)
        return np.ones_like(price) if self.kind == "time" else price / 3600


@dataclass(frozen=True)
class Outlook:
    """J = scale * exp(X), X ~ N(mu, sd^2) truncated below at `floor`, feasible iff X <= x_max;
    one entry per candidate."""

    rate: np.ndarray  # r_c
    scale: np.ndarray  # r_c K_c
    mu: np.ndarray
    sd: np.ndarray
    x_max: np.ndarray
    floor: np.ndarray  # l_c, -inf where nothing bounds the step time

    def _sd(self) -> np.ndarray:
        return np.maximum(self.sd, 1e-12)

    def _a(self) -> np.ndarray:
        """(l - mu) / sd, at most 30: beyond, the mass above the floor underflows (the outcome is
        then the floor itself, to within 1/30 of a sd)."""
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(self.floor), np.minimum((self.floor - self.mu) / self._sd(), 30.0), -np.inf)

    def step_mean(self) -> np.ndarray:
        """E[T_c] = exp(mu + sd^2/2) Q(a - sd) / Q(a) (module docstring)."""
        a, sd = self._a(), self._sd()
        return np.exp(self.mu + sd**2 / 2 + log_ndtr(sd - a) - log_ndtr(-a))

    def point(self) -> np.ndarray:
        """The mean of J."""
        return self.scale * self.step_mean()

    def feasible(self) -> np.ndarray:
        return np.maximum(self.mu, self.floor) <= self.x_max


def outlook(objective: Objective, rate, steps_left, mu, sd, move_s, time_left_s: float, floor=None) -> Outlook:
    """The remaining objective of every candidate (arrays aligned); `time_left_s` to the deadline;
    `floor` the lower bound of log T per candidate (none when omitted)."""
    steps_left = np.asarray(steps_left, float)
    rate = np.asarray(rate, float) * np.ones_like(steps_left)
    scale = rate * steps_left
    if objective.deadline_s is None:
        x_max = np.full_like(scale, np.inf)
    else:
        room = time_left_s - np.asarray(move_s, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_max = np.where(room > 0, np.log(np.maximum(room, 1e-300) / steps_left), -np.inf)
    mu = np.asarray(mu, float)
    floor = np.full_like(mu, -np.inf) if floor is None else np.asarray(floor, float)
    return Outlook(rate, scale, mu, np.asarray(sd, float), x_max, floor)


def expected_improvement(y: float, o: Outlook) -> tuple[np.ndarray, np.ndarray]:
    """(gain, chance of winning) per candidate: the closed form in the module docstring; y is a
    finite incumbent (with a deadline nobody measured meets, the loop decides on time instead)."""
    with np.errstate(divide="ignore"):
        upper = np.minimum(np.log(y / o.scale), o.x_max)
    sd, a = o._sd(), o._a()
    z = (upper - o.mu) / sd
    bounded, tail = np.isfinite(a), ndtr(-a)  # Q(a): the mass above the floor (1 without one)
    # unbounded: Phi(z) and Phi(z - sd) directly (no cancellation in the lower tail)
    win = np.where(bounded, np.where(z > a, (tail - ndtr(-z)) / tail, 0.0), ndtr(z))
    paid = np.where(bounded, np.where(z > a, (ndtr(sd - a) - ndtr(sd - z)) / tail, 0.0), ndtr(z - sd))
    gain = y * win - o.scale * np.exp(o.mu + sd**2 / 2) * paid
    return np.maximum(gain, 0.0), np.maximum(win, 0.0)


def probe_price(o: Outlook, y: float, win_chance, window_steps, progress_per_step,
                progress_left: float, move_in, move_back, move_home: float, *, move_in_s=0.0,
                billed_floor_s=0.0) -> np.ndarray:
    """The price in the module docstring; moves in objective units (`move_in_s`: in seconds),
    the window in steps; `billed_floor_s` F per candidate (0 for time: the floor is money, not
    time; and 0 for a probe on the VMs already running, whose minimum is already paid for)."""
    window = np.asarray(window_steps, float)
    step_mean = o.step_mean()  # E[T_c]
    window_extra = window * o.rate * step_mean - window * np.asarray(progress_per_step) * y / progress_left
    lose = 1 - np.asarray(win_chance)
    unused = np.maximum(np.asarray(billed_floor_s, float) - np.asarray(move_in_s, float) - window * step_mean, 0.0)
    return (np.asarray(move_in, float) + lose * np.asarray(move_back, float)
            - move_home + np.maximum(window_extra, 0.0) + lose * o.rate * unused)


def recoups(gain, win_chance, price, factor: float) -> np.ndarray:
    """Per candidate: its expected gain weighted by its chance of winning is over `factor` times
    its price (search.loop, module docstring "Recoup")."""
    return np.asarray(gain) * np.asarray(win_chance) > factor * np.asarray(price)


def pick_probe(gain, price, allowed) -> int | None:
    """The index of argmax(gain - price) over the `allowed` candidates, or None when none is
    allowed or the best's gain does not exceed its price. Filtering before the argmax, not after:
    a long shot with the largest net gain that fails the recoup check must not hide a candidate
    that passes it (it had declined every probe, and 3-hour time jobs stayed up to +31% over the
    oracle: docs/search.md)."""
    net = np.where(np.asarray(allowed, bool), np.asarray(gain, float) - np.asarray(price, float), -np.inf)
    best = int(np.argmax(net))
    return best if net[best] > 0 else None
