# SPDX-License-Identifier: MIT
"""Gradient noise scale (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training", App. A).

From squared norms of a mean gradient over a small batch b_s and over a big batch b_b > b_s:
  |G|^2  ~ (b_b |g_b|^2 - b_s |g_s|^2) / (b_b - b_s)          (unbiased for the true |G|^2)
  tr(S)  ~ (|g_s|^2 - |g_b|^2) / (1/b_s - 1/b_b)              (unbiased for the per-sample trace)
  B_simple = tr(S) / |G|^2
Both estimates are noisy; average numerator and denominator separately (an EWMA or a plain mean),
never the per-step ratio.
"""

from dataclasses import dataclass

import numpy as np


def noise_due(step: int, world_size: int, every_single_process: int = 8) -> bool:
    """Whether to measure the noise scale at this step: always with several ranks (two squared
    norms, nearly free), every `every_single_process`-th step with one (micro-batch split)."""
    return world_size > 1 or step % every_single_process == 0


def unbiased_norm_estimates(b_small, g_small_sq, b_big, g_big_sq) -> tuple[np.ndarray, np.ndarray]:
    """(|G|^2, tr(S)) estimates; vectorised over arrays of measurements. Requires b_big > b_small."""
    b_s, b_b = np.asarray(b_small, float), np.asarray(b_big, float)
    gs, gb = np.asarray(g_small_sq, float), np.asarray(g_big_sq, float)
    if np.any(b_b <= b_s):
        raise ValueError("the big batch must be larger than the small batch")
    grad_sq = (b_b * gb - b_s * gs) / (b_b - b_s)  # McCandlish et al. 2018, eq. A.1
    trace = (gs - gb) / (1.0 / b_s - 1.0 / b_b)  # McCandlish et al. 2018, eq. A.2
    return grad_sq, trace


@dataclass
class NoiseScaleTracker:
    """EWMA of |G|^2 and tr(S) estimates; `noise_scale` is their ratio B_simple (in samples).

    Both averages start at zero with the same weights, so their ratio needs no bias correction."""

    decay: float = 0.95
    grad_sq: float = 0.0
    trace: float = 0.0
    count: int = 0

    def update(self, b_small: float, g_small_sq: float, b_big: float, g_big_sq: float) -> None:
        grad_sq, trace = unbiased_norm_estimates(b_small, g_small_sq, b_big, g_big_sq)
        self.grad_sq = self.decay * self.grad_sq + (1 - self.decay) * float(grad_sq)
        self.trace = self.decay * self.trace + (1 - self.decay) * float(trace)
        self.count += 1

    @property
    def noise_scale(self) -> float:
        if self.count == 0 or self.grad_sq <= 0:
            return float("nan")
        return self.trace / self.grad_sq


def noise_scale_from_samples(b_small, g_small_sq, b_big, g_big_sq) -> float:
    """B_simple from many measurements: ratio of the mean trace to the mean |G|^2."""
    grad_sq, trace = unbiased_norm_estimates(b_small, g_small_sq, b_big, g_big_sq)
    mean_grad_sq = float(np.mean(grad_sq))
    return float(np.mean(trace)) / mean_grad_sq if mean_grad_sq > 0 else float("nan")


def bootstrap_noise_scale_interval(b_small, g_small_sq, b_big, g_big_sq, *, level: float = 0.9,
                                   resamples: int = 500, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of B_simple over the measured steps."""
    grad_sq, trace = unbiased_norm_estimates(b_small, g_small_sq, b_big, g_big_sq)
    grad_sq, trace = np.atleast_1d(grad_sq), np.atleast_1d(trace)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(grad_sq), size=(resamples, len(grad_sq)))
    den = grad_sq[picks].mean(axis=1)
    ratios = np.where(den > 0, trace[picks].mean(axis=1) / np.where(den > 0, den, 1), np.inf)
    low, high = np.percentile(ratios, [50 * (1 - level), 50 * (1 + level)], method="nearest")
    return float(low), float(high)
