# SPDX-License-Identifier: MIT
"""Ties within a prediction's resolution (plan.ties): the objective's pick, the collapsed front and
the top-k rows. Each test names the mutation it catches."""

import numpy as np
import pytest

from thrifty.plan.ties import Z90, Resolved, plan_resolution_log, resolution_log


def _resolved(time_s, cost_usd, time_interval, cost_interval, noise_log=0.0) -> Resolved:
    t, c = np.array(time_s, float), np.array(cost_usd, float)
    (tl, th), (cl, ch) = np.array(time_interval, float).T, np.array(cost_interval, float).T
    return Resolved(t, c, resolution_log(tl, th, noise_log), resolution_log(cl, ch, noise_log))


def test_resolution_is_one_standard_error_of_the_90_percent_interval_or_the_measurement_noise():
    """Mutations: the 90% half-width taken as the resolution (z missing), the noise floor ignored."""
    assert resolution_log(np.array([226.0]), np.array([306.0]))[0] == pytest.approx(np.log(306 / 226) / (2 * 1.6449), rel=1e-4)
    assert Z90 == pytest.approx(1.6449, rel=1e-4)
    assert resolution_log(np.array([100.0]), np.array([100.0]), 0.03)[0] == 0.03
    assert resolution_log(np.array([100.0]), np.array([200.0]), 0.03)[0] > 0.03


def test_the_issues_tie_goes_to_the_cheaper_plan_for_time():
    """Issue 22: 3 x p5.48xlarge on-demand 255.8 s for $11.73 against 2 x p5.48xlarge spot 256.6 s
    for $2.42, both [226, 306] s. Mutation: the tie rule removed (the on-demand plan is picked)."""
    r = _resolved([255.8, 256.6], [11.73, 2.42], [(226, 306), (226, 306)], [(10.4, 14.0), (2.1, 2.9)])
    assert r.best(np.arange(2), "time") == 1


def test_a_difference_beyond_the_resolution_still_decides_time():
    """Mutation: ties taken as overlapping 90% intervals (200 s in [180, 240] would tie with 256 s)."""
    r = _resolved([200.0, 256.6], [11.73, 2.42], [(180, 240), (226, 306)], [(10, 14), (2.1, 2.9)])
    assert r.best(np.arange(2), "time") == 0


def test_a_tie_in_cost_goes_to_the_faster_plan():
    """Mutations: the cost objective without the tie rule (index 0, $1.00, is picked), or the rule
    keeping the cheapest of the tie."""
    r = _resolved([3600.0, 1200.0, 600.0], [1.00, 1.02, 3.0], [(3000, 4300), (1000, 1450), (500, 700)],
                  [(0.85, 1.2), (0.87, 1.22), (2.5, 3.6)])
    assert r.best(np.arange(3), "cost") == 1


def test_every_row_follows_the_tie_rule_not_only_the_first():
    """A newcomer's time table: five plans at 4.12-4.13 min ($11.33, $7.57, $3.50, $2.33, $15.17,
    resolution about 9%) and one at 6 min for $1. Each row is the cheapest of what is left within
    the fastest's resolution; the 6-min plan stays last. Mutations: rows after #1 in time order
    (the $11.33 plan second), the window taken from the pick instead of the leader, `first` ignored."""
    time_s = np.array([247.2, 247.3, 247.6, 247.8, 248.0, 360.0])
    cost = np.array([11.33, 7.57, 3.50, 2.33, 15.17, 1.0])
    r = _resolved(time_s, cost, np.c_[time_s * 0.86, time_s * 1.16], np.c_[cost * 0.86, cost * 1.16])
    rows, merged = r.tie_rows(r.ordered(np.arange(6), "time"), "time", 6)
    assert list(rows) == [3, 2, 1, 0, 4, 5] and not merged.any()
    assert r.best(np.arange(6), "time") == 3
    rows, _ = r.tie_rows(r.ordered(np.arange(6), "time"), "time", 2, first=5)  # the knee first, then the rule
    assert list(rows) == [5, 3]


def test_the_front_is_collapsed_around_the_chosen_plan():
    """A newcomer's CPU front: 579 min for $2.19 stood for 728.5 min at $1.838 (within its cost
    resolution), and 1,430 min at $1.578 stayed as resolvably cheaper than $2.19. With 728.5 chosen,
    it stands for its group and 1,430 min ($1.578, within 0.15 of $1.838 in log cost, resolution
    0.27) joins it, while 579 min, resolvably faster, stays. Mutation: the chosen plan swapped into
    its group after the collapse (1,430 min kept beside it)."""
    time_s = np.array([579.0, 728.5, 1430.0])
    cost = np.array([2.19, 1.838, 1.578])
    sigma = 0.27 * 2 * Z90  # 90% intervals whose resolution is 0.27 in log
    r = _resolved(time_s, cost, np.c_[time_s * np.exp(-0.02), time_s * np.exp(0.02)],
                  np.c_[cost * np.exp(-sigma / 2), cost * np.exp(sigma / 2)])
    kept, members = r.collapse_front(np.arange(3))
    assert list(kept) == [0, 2]  # without a choice: 1,430 min is resolvably cheaper than $2.19
    kept, members = r.collapse_front(np.arange(3), keep=1)
    assert list(kept) == [0, 1] and list(members[1]) == [1, 2]  # 579 min stays: resolvably faster


def test_a_point_resolvably_cheaper_than_the_chosen_plan_stays_on_the_front():
    """The chosen plan's own resolution is wide (0.5 in log time): a plan 10x cheaper and 1.5%
    slower is not within it. Mutation: the chosen plan takes over any group it falls in (the front
    collapsed to one point, hiding the cheap plan)."""
    r = Resolved(np.array([100.0, 100.5, 102.0]), np.array([20.0, 10.0, 1.0]), np.array([0.01, 0.5, 0.01]),
                 np.full(3, 0.01))
    kept, members = r.collapse_front(np.arange(3), keep=1)
    assert list(kept) == [1, 2] and sorted(members[0]) == [0, 1]


def test_start_up_dominated_plans_tie_within_the_measurement_noise():
    """Start-up dominates: intervals 0.1 s wide, so only the profile's noise (3%) resolves them.
    Mutation: the measurement-noise floor dropped (the $0.17 GPU plan 0.5 s faster is picked)."""
    r = _resolved([180.1, 180.6], [0.17, 0.0016], [(180.05, 180.15), (180.55, 180.65)],
                  [(0.169, 0.171), (0.00159, 0.00161)], noise_log=0.03)
    assert r.best(np.arange(2), "time") == 1


def test_a_front_of_near_equal_times_collapses_to_its_cheapest_point_and_counts_the_rest():
    """The GRU plan of issue 22: 33 front points at 3.01 min from $16.30 to $0.0047. Mutations: no
    collapse (33 points), the most expensive point kept, the merged count off by one."""
    time_s = 180.6 + np.arange(33) * 0.01  # fastest first, as pareto_front gives it
    cost = np.geomspace(16.30, 0.0047, 33)
    r = _resolved(time_s, cost, np.c_[time_s - 1, time_s + 1], np.c_[cost * 0.99, cost * 1.01])
    kept, members = r.collapse_front(np.arange(33))
    assert list(kept) == [32] and len(members[0]) == 33


def test_a_front_keeps_points_that_are_resolvably_apart_and_merges_equal_costs_into_the_faster():
    """Mutations: the cost pass removed (points 1 and 2, $5.00 and $4.95, both stay), the time
    pass removed (point 0, no faster than point 1 within its resolution, stays)."""
    time_s = np.array([100.0, 101.0, 200.0, 400.0])
    cost = np.array([9.0, 5.0, 4.95, 1.0])
    r = _resolved(time_s, cost, np.c_[time_s * 0.95, time_s * 1.05], np.c_[cost * 0.95, cost * 1.05])
    kept, members = r.collapse_front(np.arange(4))
    assert list(kept) == [1, 3]
    assert sorted(members[0]) == [0, 1, 2] and list(members[1]) == [3]


def test_top_rows_merge_near_duplicates_and_keep_distinct_ones():
    """Mutations: no merging (rows 0 and 1, equal within the resolution, both shown), merging on
    time alone (row 2, same time at twice the cost, would vanish)."""
    time_s = np.array([100.0, 100.5, 100.2, 300.0])
    cost = np.array([1.0, 1.01, 2.0, 0.5])
    r = _resolved(time_s, cost, np.c_[time_s * 0.95, time_s * 1.05], np.c_[cost * 0.95, cost * 1.05])
    rows, merged = r.tie_rows(r.ordered(np.arange(4), "time"), "time", 10)
    assert list(rows) == [0, 2, 3] and list(merged) == [1, 0, 0]
    rows, merged = r.tie_rows(r.ordered(np.arange(4), "time"), "time", 1)
    assert list(rows) == [0] and list(merged) == [1]


def test_the_profiles_noise_resolves_the_steps_not_the_start_up():
    """A user's plan (--objective time, 180 s start-up, a profile whose steps scatter by 0.197 in
    log): 180.6 s of which 0.6 s training, against 215.7 s of which 35.7 s. With the noise on the
    whole time the two tied and the slower, cheaper plan ranked first; on the steps' share the
    faster one wins. Mutation caught: the step share dropped (noise on the whole time)."""
    time_s, cost = np.array([180.6, 215.7]), np.array([0.00239, 0.00191])
    low, high = np.array([180.4, 196.0]), np.array([181.0, 242.0])
    share = np.array([0.6, 35.7]) / time_s
    r = Resolved(time_s, cost, plan_resolution_log(low, high, 0.197, share),
                 plan_resolution_log(low * cost / time_s, high * cost / time_s, 0.197, share))
    assert r.best(np.arange(2), "time") == 0


def test_start_up_dominated_plans_within_a_printed_digit_tie():
    """33 plans of a tiny model at '3.01 min' (180 s start-up, under a second of training each):
    within 1% of each other they cannot be told apart in the table and collapse to the cheapest,
    however sharp their intervals and small their steps' share. Mutation caught: no PRINTED_LOG floor."""
    time_s = 180.0 + np.linspace(0.05, 0.9, 33)
    cost = np.geomspace(16.3, 0.0047, 33)
    share = (time_s - 180.0) / time_s
    r = Resolved(time_s, cost, plan_resolution_log(time_s - 0.01, time_s + 0.01, 0.03, share),
                 plan_resolution_log(cost * 0.999, cost * 1.001, 0.03, share))
    assert r.best(np.arange(33), "time") == 32  # the cheapest
    rows, merged = r.tie_rows(r.ordered(np.arange(33), "time"), "time", 10)
    assert list(rows)[:1] == [32] and merged[0] == 0  # its cost sets it apart from the rest...
    front, members = r.collapse_front(np.arange(33))
    assert len(front) < 33


def _grouped(cost_usd, group, time_step=0.1) -> Resolved:
    """GPU-style plans at 0.31 (whole calibrated error), 0.21 against another GPU's projection,
    0.16 against one on the same GPU; times `time_step` apart (faster first: 10% is within every
    resolution)."""
    n = len(cost_usd)
    return Resolved(1.0 + time_step * np.arange(n), np.array(cost_usd, float), np.full(n, 0.31), np.full(n, 0.31),
                    group=np.array(group), time_sigma_grouped=np.tile([0.21, 0.16], (n, 1)),
                    cost_sigma_grouped=np.tile([0.21, 0.16], (n, 1)))


def test_plans_that_share_an_error_are_told_apart_by_the_part_they_do_not_share():
    """resnet50-imagenet on A100s: 4 x 8 at $15.75 against 1 x 1 at $12.81 (0.21 in log) was a cost
    tie under the projection's whole error, and --objective cost recommended the dearer plan. On
    the same GPU only 0.16 of it differs between them; on another GPU 0.21; an unrelated (measured,
    CPU) plan keeps the whole 0.31. Mutations caught: the groups ignored (the dearer plan picked);
    two GPUs taken as one group (the other GPU's plan resolved and the same GPU's cheapest kept)."""
    assert _grouped([15.75, 12.81], [0, 0]).best(np.arange(2), "cost") == 1  # 0.207 > 0.16: apart
    assert Resolved(np.array([1.0, 2.0]), np.array([15.75, 12.81]), np.full(2, 0.31),
                    np.full(2, 0.31)).best(np.arange(2), "cost") == 0  # without groups: the old tie
    assert _grouped([15.75, 12.81], [1, 0]).best(np.arange(2), "cost") == 0  # 0.207 < 0.21: a tie
    assert _grouped([16.5, 12.81], [1, 0]).best(np.arange(2), "cost") == 1  # 0.253 > 0.21: apart ...
    assert _grouped([16.5, 12.81], [-1, 0]).best(np.arange(2), "cost") == 0  # ... but not from an unrelated plan
    # the same in the table's merging and the front's collapse: same GPU apart, other GPU merged
    rows, merged = _grouped([15.75, 12.81], [0, 0]).tie_rows(np.array([1, 0]), "cost", 5)
    assert list(rows) == [1, 0] and list(merged) == [0, 0]
    rows, merged = _grouped([15.75, 12.81], [1, 0]).tie_rows(np.array([1, 0]), "cost", 5)
    assert list(rows) == [0] and list(merged) == [1]
    assert len(_grouped([15.75, 12.81], [0, 0], time_step=1.0).collapse_front(np.arange(2))[0]) == 2
    assert len(_grouped([15.75, 12.81], [1, 0], time_step=1.0).collapse_front(np.arange(2))[0]) == 1
