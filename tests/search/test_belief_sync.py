# SPDX-License-Identifier: MIT
"""The belief's compute/sync split (search.belief): compute fitted apart from a measured sync, the
sync's ring fitted robustly with a per-configuration spread, the type prior's pooled offset."""

import numpy as np
import pytest

from thrifty.search.belief import Measured, _refit_network, step_time_belief
from thrifty.search.config import Config


def compute_s(local_batch: float, speed: float = 1.0) -> float:
    return (0.002 + 1e-4 * local_batch) / speed


def measured_at(config: Config, sync_s: float | None, speed: float = 1.0) -> Measured:
    compute = compute_s(config.local_batch, speed)
    return Measured(compute + (sync_s or 0.0), 0.005, 20, sync_s)


def test_a_slow_sync_mode_does_not_drag_the_ring_fit():
    # mutations caught: the ring's intercept as the mean of the measured syncs (1.75x the fast
    # mode here), or a least-squares fit in seconds; with one worker count measured, the slope
    # from the syncs' mean instead of their median
    configs = [Config("g", 1, 4, 4 * b) for b in (16, 32, 64, 128)]
    measured = {c: measured_at(c, s) for c, s in zip(configs, (0.010, 0.010, 0.010, 0.040), strict=False)}
    params = np.array([0.002, 1e-4, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    a_intra, b_intra = _refit_network(params, measured)[3:5]
    assert 0.0095 < a_intra + 2 * b_intra < 0.0115  # the ring's sync at the 4 workers measured
    assert b_intra == pytest.approx(0.5 * 0.010 / 3, rel=0.01)  # halfway, from the median sync


def test_a_ring_seen_at_one_worker_count_is_neither_flat_nor_proportional():
    # 16 nodes of 4 measured, 64 workers syncing in 0.32 s: 4 nodes (16 workers) sync somewhere
    # between as slowly (a flat ring) and 15/63 of it (one in proportion to n - 1); the belief
    # takes the slope halfway (search.belief.UNIDENTIFIED_SLOPE_SHARE).
    # mutation caught: the slope kept at the reference fit's guess (0.1 ms a worker), which made
    # the sync flat and every smaller node count look as slow to sync as the one measured
    configs = [Config("g", 16, 64, 64 * b) for b in (8, 32)]
    measured = {c: measured_at(c, 0.32) for c in configs}
    params = np.array([0.002, 1e-4, 1.0, 1e-3, 1e-4, 1e-3, 1e-4, 0.0, 1.0])
    a_inter, b_inter = _refit_network(params, measured)[5:7]
    assert a_inter + 62 * b_inter == pytest.approx(0.32, rel=0.01)  # the measured count is fitted
    flat, proportional = 0.32, 0.32 * 15 / 63
    assert a_inter + 14 * b_inter == pytest.approx((flat + proportional) / 2, rel=0.02)
    four = Config("g", 4, 16, 16 * 32)
    mu, _ = step_time_belief(configs + [four], measured, {"g": 1.0})
    assert np.exp(mu[-1]) < compute_s(32) + 0.7 * flat


def test_a_ring_seen_at_two_workers_only_grows_halfway_to_proportional():
    # at n_m = 2 the ring's measured sync is its intercept alone: flat keeps it at 8 workers,
    # in proportion to n - 1 it is 7x; halfway is 4x (mutation caught: the slope from
    # extra = n_m - 2, a division by zero here, or the reference fit's guess, flat)
    configs = [Config("g", 2, 2, 2 * b) for b in (8, 32)]
    measured = {c: measured_at(c, 0.1) for c in configs}
    params = np.array([0.002, 1e-4, 1.0, 1e-3, 1e-4, 1e-3, 1e-4, 0.0, 1.0])
    a_inter, b_inter = _refit_network(params, measured)[5:7]
    assert a_inter + 6 * b_inter == pytest.approx(0.4, rel=0.02)


def test_compute_is_fitted_apart_from_a_measured_sync():
    # mutation caught: the reference fit on whole step times (a few mostly-sync windows let it
    # trade compute for sync: the one-rank step below came out several-fold off)
    four = [Config("g", 1, 4, 4 * b) for b in (16, 64)]
    measured = {c: measured_at(c, 0.05) for c in four}
    one = Config("g", 1, 1, 256)
    mu, _ = step_time_belief(four + [one], measured, {"g": 1.0})
    assert np.exp(mu[2]) == pytest.approx(compute_s(256), rel=0.05)


def test_a_configurations_own_slow_sync_is_not_passed_to_its_neighbours():
    # mutations caught: the model-error residuals taken against the ring's sync instead of the
    # configuration's own measured sync (the 4x draw then lifts its neighbours by the kriged
    # share of it), and no sync spread for a kind of network already measured (an unmeasured
    # configuration's sd then the fit's alone, a few %)
    fast = [Config("g", 1, 4, 4 * b) for b in (16, 64, 256)]
    slow = Config("g", 1, 4, 4 * 32)
    neighbour = Config("g", 1, 4, 4 * 128)
    measured = {c: measured_at(c, 0.01) for c in fast}
    measured[slow] = measured_at(slow, 0.04)
    candidates = fast + [slow, neighbour]
    mu, sd = step_time_belief(candidates, measured, {"g": 1.0})
    truth = compute_s(128) + 0.01
    assert np.exp(mu[-1]) == pytest.approx(truth, rel=0.08)
    share = 0.01 / truth
    assert sd[-1] > 0.3 * share  # the sync's spread (prior 0.5, the slow draw's log 4 seen) times its share


def test_an_unmeasured_types_prior_takes_the_measured_types_offset_from_price_parity():
    # mutation caught: the prior at price parity alone, whatever the measured types showed
    # (here both measured types run at half their parity speed, so the third should too)
    a = [Config("a", 1, 1, b) for b in (64, 256)]
    b = [Config("b", 1, 1, 128)]
    c = Config("c", 1, 1, 128)
    price = {"a": 1.0, "b": 2.0, "c": 4.0}
    measured = {x: measured_at(x, None) for x in a}
    measured.update({x: measured_at(x, None, speed=1.0) for x in b})  # parity says 2: half of it
    mu, _ = step_time_belief(a + b + [c], measured, price)
    offset = (0.0 + np.log(1.0 / 2.0)) / 2  # mean over a (the reference, 0) and b
    expected = np.log(compute_s(128, speed=4.0 * np.exp(offset)))
    assert mu[-1] == pytest.approx(expected, abs=0.1)
    assert abs(mu[-1] - np.log(compute_s(128, speed=4.0))) > 0.25
