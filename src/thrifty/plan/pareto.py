"""Pareto front of (time, cost) and its knee."""

import numpy as np


def pareto_front(time_s: np.ndarray, cost_usd: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points, fastest first (no other point is both faster and cheaper)."""
    order = np.lexsort((cost_usd, time_s))
    running_min = np.minimum.accumulate(cost_usd[order])
    strictly_cheaper = np.concatenate([[True], cost_usd[order][1:] < running_min[:-1]])
    return order[strictly_cheaper]


def knee_index(time_s: np.ndarray, cost_usd: np.ndarray) -> int:
    """Knee of a front given fastest first: the point farthest below the chord joining its ends,
    in log-normalised coordinates (Satopaa et al. 2011, "Kneedle", applied to a convex front)."""
    if len(time_s) <= 2:
        return 0
    x, y = np.log(time_s), np.log(cost_usd)
    x = (x - x.min()) / max(np.ptp(x), 1e-12)
    y = (y - y.min()) / max(np.ptp(y), 1e-12)
    # distance from the chord between the first and last point (cross product form)
    dx, dy = x[-1] - x[0], y[-1] - y[0]
    distance = (dx * (y[0] - y) - dy * (x[0] - x)) / np.hypot(dx, dy)
    return int(np.argmax(np.abs(distance)))
