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
"""

from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_MEMORY = 0.05  # L / P: the forgetting length in progress, a fraction of the target


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
