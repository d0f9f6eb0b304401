# SPDX-License-Identifier: MIT
"""The noise-scale estimator recovers a known B_simple on linear regression with Gaussian inputs."""

import numpy as np
import pytest

from thrifty.perf.noise import NoiseScaleTracker, noise_scale_from_samples, unbiased_norm_estimates


def _true_noise_scale(delta: np.ndarray, sigma_eps: float) -> float:
    # loss 0.5 (x.w - y)^2, x ~ N(0, I_d), y = x.w* + eps; per-sample gradient x (x.delta - eps).
    # E g = delta; Cov = |delta|^2 I + delta delta^T + sigma^2 I (Isserlis) => tr = (d+1)|delta|^2 + d sigma^2
    d = delta.size
    return ((d + 1) * delta @ delta + d * sigma_eps**2) / (delta @ delta)


def _mean_gradient(rng, delta, sigma_eps, batch):
    x = rng.standard_normal((batch, delta.size))
    residual = x @ delta - sigma_eps * rng.standard_normal(batch)
    return (x * residual[:, None]).mean(axis=0)


def test_recovers_known_noise_scale_within_10_percent():
    rng = np.random.default_rng(0)
    delta, sigma_eps = rng.standard_normal(20) * 0.3, 1.0
    b_small, b_big, trials = 16, 128, 3000
    small_sq, big_sq = [], []
    for _ in range(trials):
        small = _mean_gradient(rng, delta, sigma_eps, b_small)
        rest = _mean_gradient(rng, delta, sigma_eps, b_big - b_small)
        big = (small * b_small + rest * (b_big - b_small)) / b_big  # small batch is part of the big one
        small_sq.append(small @ small)
        big_sq.append(big @ big)
    estimate = noise_scale_from_samples([b_small] * trials, small_sq, [b_big] * trials, big_sq)
    assert estimate == pytest.approx(_true_noise_scale(delta, sigma_eps), rel=0.10)


def test_estimators_are_exact_on_expected_values():
    g_sq, trace = 2.0, 50.0
    expected = lambda b: g_sq + trace / b  # E|g_b|^2 = |G|^2 + tr(S)/b
    est_g, est_tr = unbiased_norm_estimates(8, expected(8), 64, expected(64))
    assert est_g == pytest.approx(g_sq) and est_tr == pytest.approx(trace)


def test_tracker_averages_numerator_and_denominator_separately():
    tracker = NoiseScaleTracker(decay=0.5)
    tracker.update(8, 2.0 + 50 / 8, 64, 2.0 + 50 / 64)
    tracker.update(8, 4.0 + 10 / 8, 64, 4.0 + 10 / 64)
    assert tracker.noise_scale == pytest.approx((0.5 * 0.5 * 50 + 0.5 * 10) / (0.5 * 0.5 * 2 + 0.5 * 4))


def test_big_batch_must_exceed_small():
    with pytest.raises(ValueError):
        unbiased_norm_estimates(64, 1.0, 64, 1.0)
