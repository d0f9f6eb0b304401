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
