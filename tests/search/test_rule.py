# SPDX-License-Identifier: MIT
import numpy as np
import pytest

from thrifty.errors import ThriftyError
from thrifty.search.rule import Objective, expected_improvement, outlook, probe_price


def test_expected_improvement_matches_monte_carlo_with_and_without_a_deadline():
    rng = np.random.default_rng(0)
    mu, sd, steps = np.log(0.2), 0.3, 1e4
    x = rng.normal(mu, sd, 400_000)
    for deadline, time_left in ((None, np.inf), (1.0, 2100.0)):
        o = outlook(Objective("time", deadline), 1.0, [steps], [mu], [sd], [100.0], time_left)
        y = 2100.0
        gain, win = expected_improvement(y, o)
        j = steps * np.exp(x)
        ok = j < y if deadline is None else (j < y) & (100 + j <= time_left)
        assert gain[0] == pytest.approx(np.mean((y - j) * ok), rel=0.02)
        assert win[0] == pytest.approx(np.mean(ok), abs=0.005)


def test_a_certain_loser_has_no_gain_and_a_certain_winner_gains_the_difference():
    o = outlook(Objective("cost"), Objective("cost").rate([3.6, 3.6]), [1e4, 1e4], np.log([0.5, 0.1]),
                [1e-9, 1e-9], [0, 0], np.inf)
    gain, win = expected_improvement(3.0, o)  # J = 5 and 1 dollars
    assert gain == pytest.approx([0.0, 2.0]) and win == pytest.approx([0.0, 1.0])


def test_the_price_counts_both_moves_and_a_slower_window():
    o = outlook(Objective("time"), 1.0, [1e4], [np.log(0.3)], [0.0], [60.0], np.inf)
    # incumbent: y = 2000 s for 1e4 steps' worth of progress -> 0.2 s per step at equal progress
    price = probe_price(o, 2000.0, [0.25], 20, [1.0], 1e4, [60.0], [60.0], 0.0)
    assert price[0] == pytest.approx(60 + 0.75 * 60 + 20 * (0.3 - 0.2))


def test_a_probe_left_before_the_billing_minimum_pays_for_the_rest_of_the_minute():
    # cost: $3.6/h -> r = 0.001 $/s; a 20-step window of 0.3 s after a 10 s move leaves 44 s of
    # the 60 s minimum unused, paid when the probe loses (3 in 4) and the job moves back
    o = outlook(Objective("cost"), Objective("cost").rate([3.6]), [1e4], [np.log(0.3)], [0.0], [10.0], np.inf)
    plain = probe_price(o, 2.0, [0.25], 20, [1.0], 1e4, [0.01], [0.01], 0.0)
    floored = probe_price(o, 2.0, [0.25], 20, [1.0], 1e4, [0.01], [0.01], 0.0, move_in_s=[10.0],
                          billed_floor_s=60.0)
    assert floored[0] - plain[0] == pytest.approx(0.75 * 0.001 * (60 - 10 - 20 * 0.3))
    long_window = probe_price(o, 2.0, [0.25], 200, [1.0], 1e4, [0.01], [0.01], 0.0, move_in_s=[10.0],
                              billed_floor_s=60.0)
    assert long_window[0] == pytest.approx(probe_price(o, 2.0, [0.25], 200, [1.0], 1e4, [0.01], [0.01], 0.0)[0])


def test_an_unknown_objective_or_a_non_positive_deadline_is_refused():
    with pytest.raises(ThriftyError):
        Objective("speed")
    with pytest.raises(ThriftyError):
        Objective("cost", 0.0)


def test_expected_improvement_with_a_floor_matches_monte_carlo():
    # mutation caught: the floor ignored in the gain, the chance of winning or the mean step
    rng = np.random.default_rng(1)
    mu, sd, steps, floor = np.log(0.2), 0.4, 1e4, np.log(0.18)
    x = rng.normal(mu, sd, 2_000_000)
    x = x[x >= floor]
    o = outlook(Objective("time"), 1.0, [steps], [mu], [sd], [0.0], np.inf, floor=[floor])
    y = 2100.0
    gain, win = expected_improvement(y, o)
    j = steps * np.exp(x)
    assert gain[0] == pytest.approx(np.mean((y - j) * (j < y)), rel=0.02)
    assert win[0] == pytest.approx(np.mean(j < y), abs=0.005)
    assert o.step_mean()[0] == pytest.approx(np.mean(np.exp(x)), rel=0.005)
    bounded_out = outlook(Objective("time"), 1.0, [steps], [mu], [sd], [0.0], np.inf, floor=[np.log(0.25)])
    assert expected_improvement(y, bounded_out)[0][0] == 0.0  # its floor alone costs more than y
