# SPDX-License-Identifier: MIT
"""Pareto front of (time, cost) and its knee."""

import numpy as np


def pareto_front(time_s: np.ndarray, cost_usd: np.ndarray, by_cost: np.ndarray | None = None) -> np.ndarray:
    """Indices of the non-dominated points, fastest first (no other point is both faster and cheaper).

    In (cost, time) order a point is on the front iff it is strictly faster than every point
    before it: those cost no more, and an equal-cost one before it is no slower. `by_cost` is
    that order (np.lexsort((time_s, cost_usd))) if the caller has it already."""
    order = np.lexsort((time_s, cost_usd)) if by_cost is None else by_cost
    times = time_s[order]
    running_min = np.minimum.accumulate(times)
    strictly_faster = np.concatenate([[True], times[1:] < running_min[:-1]])
    return order[strictly_faster][::-1]


def knee_index(time_s: np.ndarray, cost_usd: np.ndarray) -> int:
    """Knee of a front given fastest first: the point farthest below the chord joining its ends,
    in log-normalised coordinates (Satopaa et al. 2011, "Kneedle", applied to a convex front).
    Where no point lies below the chord (two points, or a front bent the other way) there is no
    knee, and the ends decide: the faster where it saves more in log time than it adds in log cost
    (an elasticity above one), else the cheaper (a new user's pass: 25% less time for 2.5x the
    cost had gone to the faster, silently; a review: a point above the chord, nearly as dear as the
    fastest, had been taken as the knee)."""
    if len(time_s) < 2:
        return 0
    last = len(time_s) - 1
    x, y = np.log(time_s), np.log(cost_usd)
    ends = 0 if x[last] - x[0] > y[0] - y[last] else last
    x = (x - x.min()) / max(np.ptp(x), 1e-12)
    y = (y - y.min()) / max(np.ptp(y), 1e-12)
    # signed distance from the chord between the first and last point (cross product form): positive below it
    dx, dy = x[-1] - x[0], y[-1] - y[0]
    distance = (dx * (y[0] - y) - dy * (x[0] - x)) / np.hypot(dx, dy)
    best = int(np.argmax(distance))
    return best if distance[best] > 1e-12 else ends
