# SPDX-License-Identifier: MIT
"""A job at its plateau: the profile's |G|^2 estimates average to zero or below, so B_noise is
beyond the measured batches. The plan takes the data's lower bound, not an error (builtin:tabular
could not be planned at all, with --epochs or --reprofile either)."""

import numpy as np
import pytest

from thrifty.perf.jobmodel import build_job_model
from thrifty.perf.noise import bootstrap_noise_scale_interval, unbiased_norm_estimates


def _samples(rng: np.random.Generator) -> list[dict]:
    rows = []
    for workers in (1, 2):
        for local in (16, 32, 64):
            for step in range(12):
                small_sq = 1.0 + 0.3 * rng.standard_normal()
                grad_sq = -0.02 + 0.5 * rng.standard_normal()  # |G|^2 = 2 |g_32|^2 - |g_16|^2 (eq. A.1)
                for rank in range(workers):
                    rows.append({"num_nodes": 1, "num_workers": workers, "local_batch": local, "step": step,
                                 "rank": rank, "step_time_s": 0.01 + 1e-4 * local * (1 + 0.01 * step % 3),
                                 "compute_time_s": 0.01 + 1e-4 * local, "sync_time_s": 0.001 * (workers - 1),
                                 "peak_memory_bytes": 1e8 + 1e5 * local, "small_batch": 16.0,
                                 "small_grad_sq": small_sq, "big_batch": 32.0,
                                 "big_grad_sq": (small_sq + grad_sq) / 2})
    return rows


def test_a_gradient_lost_in_the_noise_bounds_the_noise_scale_from_below():
    """Mutations caught: the old refusal ("gives no positive gradient noise scale"); the point
    taken anywhere but the bootstrap's lower bound; the interval's infinite end dropped from the
    steps' bounds (the low end of the steps would be the point's)."""
    samples = _samples(np.random.default_rng(3))
    arrays = [np.array([s[k] for s in samples if s["rank"] == 0]) for k in
              ("small_batch", "small_grad_sq", "big_batch", "big_grad_sq")]
    grad_sq, _ = unbiased_norm_estimates(*arrays)
    assert grad_sq.mean() <= 0  # the case at hand: no point estimate of B_noise
    job = build_job_model(samples, param_count=1000, train_size=10_000, calibration=None,
                          epochs_to_target=2, epochs_batch=64)
    low, high = bootstrap_noise_scale_interval(*[np.array([s[k] for s in samples]) for k in
                                                 ("small_batch", "small_grad_sq", "big_batch", "big_grad_sq")])
    assert high == np.inf and 0 < low < np.inf
    assert job.noise_scale == pytest.approx(low) and job.noise_scale_interval == (pytest.approx(low), np.inf)
    assert job.noise_scale_is_bound and job.summary()["noise_scale_is_bound"]
    big = np.array([4096.0])
    steps_low, steps_high = job.steps_interval(big)
    # B_noise -> inf: every batch as sample-efficient as the one the epochs were given at
    assert steps_low[0] == pytest.approx(job.calibration_steps * job.calibration_batch / big[0])
    assert steps_high[0] == pytest.approx(job.steps(big)[0]) and steps_low[0] < steps_high[0]


def test_a_positive_estimate_with_an_open_upper_end_is_an_estimate_not_a_bound():
    """|G|^2 averaging slightly above zero: a point estimate whose bootstrap interval is open above
    (some resamples' |G|^2 not positive) is still an estimate, and the plan must not call it a
    bound (mutation caught: the bound told by the infinite upper end)."""
    rng = np.random.default_rng(3)
    samples = _samples(rng)
    for s in samples:
        s["big_grad_sq"] += 0.05 / 2  # |G|^2 = 2 |g_32|^2 - |g_16|^2 rises by 0.05
    job = build_job_model(samples, param_count=1000, train_size=10_000, calibration=None,
                          epochs_to_target=2, epochs_batch=64)
    assert job.noise_scale_interval[1] == np.inf and job.noise_scale > job.noise_scale_interval[0]
    assert not job.noise_scale_is_bound
