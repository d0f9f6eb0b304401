# SPDX-License-Identifier: MIT
"""The search's noise-scale estimator (search.noise_estimate): a ratio of means with a delta-method
standard error, forgetting in progress. Each test names the mutation it catches."""

import numpy as np
import pytest

from thrifty.search.noise_estimate import NoiseEstimator


def test_the_estimate_is_the_ratio_of_the_means_not_the_mean_of_per_step_ratios():
    # mutation caught: averaging the per-step ratios t_i / g_i (here 52.6 instead of 10)
    estimator = NoiseEstimator(length=1e9)
    estimator.add(0.0, [0.1, 1.9], [10.0, 10.0])
    assert estimator.value == pytest.approx(10.0)


def test_the_standard_error_is_the_delta_method_on_the_ratio_of_means():
    # mutations caught: the SE of the mean trace alone (the |G|^2 noise left out); no square root
    rng = np.random.default_rng(0)
    g, t = rng.normal(1.0, 3.9, 500), rng.gamma(0.2, 500 / 0.2, 500)
    estimator = NoiseEstimator(length=1e9)
    estimator.add(0.0, g, t)
    b = t.mean() / g.mean()
    expected = np.sqrt(np.sum((t - b * g) ** 2)) / g.sum() / b
    assert estimator.value == pytest.approx(b) and estimator.rel_se == pytest.approx(expected)


def test_the_standard_error_covers_the_truth_at_the_sim_spreads():
    # mutation caught: an SE that ignores the weights' shrinking effective count (too small: the
    # z-scores spread far beyond 1)
    rng = np.random.default_rng(1)
    z = []
    for _ in range(300):
        estimator = NoiseEstimator(length=50.0)
        for p in range(0, 200, 10):  # chunks of 40 steps, forgotten over 50 units of progress
            estimator.add(float(p), rng.normal(1.0, 3.9, 40), rng.gamma(0.2, 500 / 0.2, 40))
        z.append(np.log(estimator.value / 500) / estimator.rel_se)
    assert 0.75 < np.std(z) < 1.35 and abs(np.median(z)) < 0.35


def test_old_steps_are_forgotten_in_progress():
    # mutation caught: no forgetting (every step since the start counts alike: ~1000 / 1.9 = 550)
    estimator = NoiseEstimator(length=10.0)
    estimator.add(0.0, np.ones(100), np.full(100, 100.0))
    estimator.add(100.0, np.ones(100), np.full(100, 1000.0))
    assert estimator.value == pytest.approx(1000.0, rel=1e-3)
    kept = NoiseEstimator(length=1e9)
    kept.add(0.0, np.ones(100), np.full(100, 100.0))
    kept.add(100.0, np.ones(100), np.full(100, 1000.0))
    assert kept.value == pytest.approx(550.0)


def test_no_evidence_is_an_infinite_scale_with_an_infinite_error_and_the_state_round_trips():
    estimator = NoiseEstimator(length=5.0)
    assert estimator.value == float("inf") and estimator.rel_se == float("inf")
    estimator.add(1.0, [-0.5, 0.2], [3.0, 4.0])  # sum of |G|^2 estimates below zero
    assert estimator.value == float("inf") and estimator.rel_se == float("inf")
    estimator.add(2.0, [2.0, 1.0, 3.0], [300.0, 100.0, 200.0])
    again = NoiseEstimator.from_state(estimator.state())
    assert again == estimator and np.isfinite(again.value) and np.isfinite(again.rel_se)


def test_a_stated_noise_scale_is_the_prior_until_enough_steps_are_measured_then_weighed():
    # mutations caught: the prior ignored (the 5-step estimate used as is), the prior always winning,
    # or the weights swapped (a precise measurement pulled to the prior)
    from thrifty.search.noise_estimate import MIN_WEIGHED_STEPS, with_prior
    rng = np.random.default_rng(1)
    few = NoiseEstimator(length=1e9)
    few.add(0.0, rng.normal(1.0, 3.9, 5), rng.gamma(0.2, 48 / 0.2, 5))
    assert with_prior(few, 48.0) == 48.0
    many = NoiseEstimator(length=1e9)
    many.add(0.0, rng.normal(1.0, 3.9, 20_000), rng.gamma(0.2, 480 / 0.2, 20_000))  # B = 480, +-6%
    combined = with_prior(many, 48.0)
    assert many.steps >= MIN_WEIGHED_STEPS and many.rel_se < 0.1
    assert abs(np.log(combined / many.value)) < 0.02 * np.log(10)  # 10x off, the prior moves it < 2%
    some = NoiseEstimator(length=1e9)
    some.add(0.0, rng.normal(1.0, 3.9, 60), rng.gamma(0.2, 480 / 0.2, 60))
    middle = with_prior(some, 48.0)
    assert min(48.0, some.value) < middle < max(48.0, some.value)
