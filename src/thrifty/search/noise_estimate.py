# SPDX-License-Identifier: MIT
"""The search's gradient noise scale: a ratio of means over the recent measured steps, with its
standard error, forgetting old steps exponentially in progress.

Each measured step i, at progress p_i, gives unbiased estimates g_i of |G|^2 and t_i of tr(Sigma)
(thrifty.perf.noise; McCandlish et al. 2018, App. A). B_noise is the ratio of their (weighted)
means, never the mean of per-step ratios (App. A: average numerator and denominator separately;
g_i is often near or below zero, so a per-step ratio is unbounded and its mean biased):

    w_i = exp(-(p - p_i) / L),   L = memory x P     (P the target; memory 0.05 by default)
    B = sum w_i t_i / sum w_i g_i
    SE(B)^2 = sum w_i^2 (t_i - B g_i)^2 / (sum w_i g_i)^2     (delta method on a ratio of means)

Why forget in progress: B_noise belongs to where the job is in training, not to the
configuration or the clock, and it drifts (it grows as the loss falls, several-fold over a training
run, McCandlish et al. 2018), so an estimate over every step since the start lags behind. An exponential
filter on a linear trend lags by L times its slope: with memory 0.05 and B_noise growing 8x
linearly over the job, by 0.35 B_noise(0), 8% of B_noise at mid-job and 5% at the end; the
decision is insensitive to errors of that size (J varies as 1/B + 1/B_noise). A common factor of
all weights cancels in B and SE, so the sums are kept decayed to the latest step: O(1) per step,
and the checkpoint holds six numbers and a progress.

A stated noise scale B_0 (the workload's job model, or the user's) is a prior where one exists:
the search decides on the precision-weighted mean in log space,

    log B = (log B_0 / s_0^2 + log B_m / s_m^2) / (1 / s_0^2 + 1 / s_m^2),   s_m = log(1 + SE(B_m) / B_m)

(normal-normal conjugate update; s_m, the measured estimate's log sd, is its relative SE while
that is small and grows only logarithmically when it is not: a ratio of means over the first few
dozen steps is often off by 10x either way, sim.GRAD_SQ_SPREAD). Without it, the first decisions
after the profile saw B_noise at 1-4 on a job whose noise scale is 48 (digits): the remaining job
then looks 10x longer than it is and a probe that cannot pay for itself looks worth its price.
s_0 = PRIOR_LOG_SD (1.0: the prior is a factor e either way at one sd), so the measurement takes over
once its relative SE is below about 1.7 (s_m < s_0). The measurement enters only once it pools
MIN_WEIGHED_STEPS measured steps: its SE is estimated from the same steps, and with |G|^2's per-step
sd/mean of 3.4-4.3 (measured here) fewer than about 50 leave the denominator's relative SE above
one half, where the delta method says nothing (seen on digits: 5 steps gave B = 1 "+-59%" for a
noise scale of 48).
"""

from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_MEMORY = 0.05  # L / P: the forgetting length in progress, a fraction of the target
PRIOR_LOG_SD = 1.0  # log sd of a stated noise scale used as the prior (module docstring)
MIN_WEIGHED_STEPS = 50  # measured steps before the measurement is weighed against the prior


@dataclass
class NoiseEstimator:
    """Exponentially weighted sums of the measured steps' (|G|^2, tr(Sigma)) estimates."""

    length: float  # L, in progress units (samples-at-small-batch)
    progress: float = 0.0  # p of the latest steps added: the weights' reference
    sum_g: float = 0.0  # sum w g
    sum_t: float = 0.0  # sum w t
    sum_gg: float = 0.0  # sum w^2 g^2
    sum_gt: float = 0.0  # sum w^2 g t
    sum_tt: float = 0.0  # sum w^2 t^2
    steps: int = 0

    def add(self, progress: float, grad_sq, trace) -> None:
        """Steps measured at `progress` (no earlier than those added before)."""
        g, t = np.asarray(grad_sq, float), np.asarray(trace, float)
        if g.size == 0:
            return
        decay = float(np.exp(-max(progress - self.progress, 0.0) / self.length))
        self.sum_g = self.sum_g * decay + float(g.sum())
        self.sum_t = self.sum_t * decay + float(t.sum())
        self.sum_gg = self.sum_gg * decay**2 + float(g @ g)
        self.sum_gt = self.sum_gt * decay**2 + float(g @ t)
        self.sum_tt = self.sum_tt * decay**2 + float(t @ t)
        self.progress = max(progress, self.progress)
        self.steps += int(g.size)

    @property
    def value(self) -> float:
        """B = sum w t / sum w g; infinite while the weighted |G|^2 is not positive (no evidence
        yet that the gradient stands out of its noise)."""
        if self.sum_g <= 0:
            return float("inf")
        return max(self.sum_t / self.sum_g, 1.0)  # below one sample a noise scale means nothing

    @property
    def rel_se(self) -> float:
        """SE(B) / B, the delta method in the module docstring; infinite without an estimate."""
        b = self.value
        if self.steps < 2 or not np.isfinite(b):
            return float("inf")
        variance = (self.sum_tt - 2 * b * self.sum_gt + b * b * self.sum_gg) / self.sum_g**2
        return float(np.sqrt(max(variance, 0.0)) / b)

    def state(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> "NoiseEstimator":
        return cls(**state)


def with_prior(estimate: NoiseEstimator, prior: float, prior_log_sd: float = PRIOR_LOG_SD) -> float:
    """The precision-weighted mean of log B_0 and log B_m (module docstring); the prior alone while
    the estimate pools fewer than MIN_WEIGHED_STEPS steps or is not finite."""
    measured, rel_se = estimate.value, estimate.rel_se
    if estimate.steps < MIN_WEIGHED_STEPS or not (np.isfinite(measured) and np.isfinite(rel_se)):
        return float(prior)
    measured_log_sd = float(np.log1p(rel_se))
    if measured_log_sd == 0.0:
        return float(measured)
    w_prior, w_measured = 1 / prior_log_sd**2, 1 / measured_log_sd**2
    return float(np.exp((w_prior * np.log(prior) + w_measured * np.log(measured)) / (w_prior + w_measured)))
