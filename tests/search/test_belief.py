# SPDX-License-Identifier: MIT
import numpy as np
import pytest

from thrifty.search.belief import Measured, step_time_belief
from thrifty.search.config import Config
from thrifty.search.residuals import krige
from thrifty.search.trace import TraceRow


def test_a_measured_neighbour_corrects_and_sharpens_the_model_error_far_ones_do_not():
    measured = [Config("a", 1, 1, 64)]
    near, far = Config("a", 1, 1, 128), Config("a", 8, 8, 8192)
    mean, sd = krige(measured, np.array([0.3]), np.array([0.001]), [measured[0], near, far], 0.1)
    assert mean[0] == pytest.approx(0.3, rel=1e-3) and sd[0] < 0.002
    assert 0.05 < mean[1] < 0.3 and sd[1] < 0.1
    assert mean[2] == pytest.approx(0.0, abs=1e-4) and sd[2] == pytest.approx(0.1, rel=1e-3)


def rows_of(rows: list[TraceRow]) -> dict[Config, Measured]:
    return {r.config: Measured(r.step_time_s, 0.005, 20, r.sync_time_s) for r in rows}


def test_unmeasured_types_follow_price_parity_then_their_measured_speed(rows):
    # mutation caught: price parity inverted (a dearer type assumed slower)
    small = [r for r in rows if r.config.instance_type == "small" and r.config.num_nodes == 1][:3]
    candidates = [r.config for r in rows]
    worker_price = {"small": 0.2, "mid": 0.4, "big": 0.8}
    mu, sd = step_time_belief(candidates, rows_of(small), worker_price)
    at = {c: i for i, c in enumerate(candidates)}
    shape = small[0].config
    mid, big = (Config(name, shape.num_nodes, shape.num_workers, shape.global_batch) for name in ("mid", "big"))
    assert mu[at[mid]] < mu[at[shape]] and mu[at[big]] < mu[at[mid]]
    assert sd[at[big]] > 0.4  # a type never measured is uncertain
    truth = {r.config: r.step_time_s for r in rows}
    one_big = [r for r in rows if r.config == big]
    mu2, sd2 = step_time_belief(candidates, rows_of(small + one_big), worker_price)
    other = Config("big", 1, 1, 2 * shape.global_batch)
    assert sd2[at[other]] < sd[at[other]]
    assert abs(mu2[at[other]] - np.log(truth[other])) < abs(mu[at[other]] - np.log(truth[other]))


def test_a_fast_types_interval_keeps_the_fits_relative_width(rows):
    # mutation caught: the reference fit's covariance not scaled with a_c, b_c on a faster type
    # (the interval then grew with the speed: 6x faster -> about 6x wider in log)
    small = [r for r in rows if r.config.instance_type == "small" and r.config.num_nodes == 1][:4]
    big = [r for r in rows if r.config.instance_type == "big" and r.config.num_nodes == 1]
    candidates = [r.config for r in rows]
    worker_price = {"small": 0.2, "mid": 0.4, "big": 0.8}
    measured = rows_of(small + big[:1])
    for row, scatter in zip(small, (1.06, 0.95, 1.04, 0.97), strict=False):  # a fit with some residual scatter
        measured[row.config] = Measured(row.step_time_s * scatter, 0.005, 20)
    mu, sd = step_time_belief(candidates, measured, worker_price)
    at = {c: i for i, c in enumerate(candidates)}
    twin = Config("small", 1, 1, big[-1].config.global_batch)
    # the big type's only extra uncertainty is its speed (one measured configuration) and the
    # kriged model error, not a wider fit
    assert twin not in measured and sd[at[twin]] > 0.02
    assert sd[at[big[-1].config]] < np.hypot(sd[at[twin]], 0.2)


def test_a_multi_node_step_is_bounded_below_by_its_one_node_twin():
    # mutation caught: step_time_floor dropped (a multi-node candidate could look faster than the
    # same local batch measured on one node)
    from thrifty.search.belief import Z90, step_time_floor
    one, two, four = Config("a", 1, 2, 64), Config("a", 2, 4, 128), Config("a", 4, 8, 256)
    other_batch, other_type = Config("a", 2, 4, 256), Config("b", 2, 4, 128)
    mu = np.log([0.5, 0.1, 0.1, 0.1, 0.1])
    sd = np.array([0.01, 0.3, 0.3, 0.3, 0.3])
    floor = step_time_floor([one, two, four, other_batch, other_type], mu, sd)
    assert floor[0] == -np.inf and floor[3] == -np.inf and floor[4] == -np.inf
    assert floor[1] == pytest.approx(np.log(0.5) - Z90 * 0.01)
    assert floor[2] == pytest.approx(max(np.log(0.5) - Z90 * 0.01, np.log(0.1) - Z90 * 0.3))


def test_an_unmeasured_kind_of_network_is_uncertain_until_one_is_measured(rows):
    # mutation caught: no extra sd for a sync time never measured (multi-node candidates looked
    # as certain as the one-node fit, with across-node sync guessed from inside one node)
    candidates = [r.config for r in rows]
    worker_price = {"small": 0.2, "mid": 0.4, "big": 0.8}
    one_node = [r for r in rows if r.config.instance_type == "small" and r.config.num_nodes == 1][:3]
    at = {c: i for i, c in enumerate(candidates)}
    target = Config("small", 4, 4, 512)
    _, before = step_time_belief(candidates, rows_of(one_node), worker_price)
    two_node = [r for r in rows if r.config == Config("small", 2, 2, 256)]
    _, after = step_time_belief(candidates, rows_of(one_node + two_node), worker_price)
    assert before[at[target]] > 0.3 > after[at[target]]


def test_a_compute_curve_from_two_local_batches_is_less_certain_the_further_it_extrapolates(rows):
    # mutation caught: the shape term dropped (fitted through two batches with its exponent held,
    # the curve was as sure 16x away as beside them: 7% of the irregular traces' held-out launches
    # on one type fell inside its 90% interval) or counted where the exponent was fitted
    one_node = {r.config: r for r in rows if r.config.instance_type == "small" and r.config.num_nodes == 1}
    two = [one_node[Config("small", 1, 1, b)] for b in (128, 256)]
    candidates = [Config("small", 1, 1, b) for b in (64, 512, 2048)]
    worker_price = {"small": 0.2}
    _, sd = step_time_belief(candidates, rows_of(two), worker_price)
    assert sd[2] - sd[1] > 0.1 and sd[1] > 0.1 and sd[0] == pytest.approx(sd[1], rel=0.2)  # 3 doublings vs 1
    three = two + [one_node[Config("small", 1, 1, 1024)]]
    _, sd3 = step_time_belief(candidates, rows_of(three), worker_price)
    # a fitted exponent: its covariance alone (fit_sd_log), under the two-batch curve's one doubling away
    assert sd3[2] < sd[1] - 0.02
