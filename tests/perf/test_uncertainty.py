# SPDX-License-Identifier: MIT
"""What a profile cannot see about its own error: launch spread, distance, a busy machine."""

import math

import numpy as np
import pytest

from thrifty.perf.samples import round_means, steps_per_round
from thrifty.perf.uncertainty import Z90, busy_sigma_log, doublings_away, launch_sigma_log, relative_spread


def test_distance_counts_doublings_to_the_nearest_profiled_configuration():
    profiled = np.array([[1, 1, 16], [1, 2, 64]], float)
    assert doublings_away(profiled, 1, 2, 64) == 0.0
    assert doublings_away(profiled, 4, 8, 64) == pytest.approx(math.hypot(2, 2))
    assert doublings_away(profiled, [1, 1], [1, 1], [32, 8]) == pytest.approx([1.0, 1.0])


def test_run_means_follow_the_profilers_rounds_and_give_the_spread():
    assert steps_per_round(7, 2) == [4, 3] and steps_per_round(3, 5) == [1, 1, 1]
    # two ranks, steps 10-13 (round 1) and 20-22 (round 2, after warm-up): a step is its slowest rank
    rows = [{"num_nodes": 1, "num_workers": 2, "local_batch": 8, "step": s, "step_time_s": t + 0.01 * rank}
            for rank in (0, 1) for s, t in zip([10, 11, 12, 13, 20, 21, 22], [1, 1, 1, 1, 2, 2, 2], strict=True)]
    runs = round_means(rows, steps=7, rounds=2)
    assert runs == {(1, 2, 8): pytest.approx([1.01, 2.01])}
    assert relative_spread(runs) == pytest.approx(1.0 / 1.01)
    assert launch_sigma_log(runs) == pytest.approx(np.std(np.log([1.01, 2.01]), ddof=1))
    assert launch_sigma_log({(1, 1, 8): [1.0]}) == 0.0 and relative_spread({}) == 0.0


def test_the_busy_term_reaches_down_to_a_quiet_machines_time():
    # 2 other tasks on 2 cores: a step may have run at half speed, so the 90% interval reaches / 2
    assert math.exp(Z90 * busy_sigma_log(2.0, 2)) == pytest.approx(2.0)
    assert busy_sigma_log(0.0, 2) == 0.0
