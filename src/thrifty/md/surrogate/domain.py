# SPDX-License-Identifier: MIT
"""Where a surrogate has seen data: a JOINT range check, by the distance to the nearest training point.

Points are scaled so that every continuous parameter spans [0, 1] over the training points, and an
integer parameter (z+, z-) moves 1 per valency step: a point whose z+ appeared in training only at
other h is far from every training point (1 or more) even though each of its parameters, taken
alone, is inside its range. A point is inside the domain when its nearest training point is within
`limit`: 1.5 times the 90th percentile of the training points' own nearest-neighbour distances,
capped at 0.75 (below one valency step) - about the spacing of the design, so a gap of twice the
usual spacing is flagged where it is not between runs. A point inside the convex hull of the training points with its own
valencies is inside too, however far from each of them: the surrogate interpolates there (the
centre of a 2-level grid in 3 parameters is 0.87 from every corner, which the distance alone
refused). The band there is calibrated on held-out runs, which lie mostly near training runs: deep
inside a sparse hull it may be too narrow. Hull membership is a linear feasibility problem (a convex combination of those points
equal to the query; scipy's HiGHS). No torch.
"""

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from thrifty.errors import ThriftyError
from thrifty.md.params import INTEGER_PARAMETERS, PARAMETERS

INTEGER = np.array([p in INTEGER_PARAMETERS for p in PARAMETERS])
LIMIT_FACTOR, LIMIT_QUANTILE, LIMIT_CAP = 1.5, 90, 0.75


def scaled(points: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Points in units of the training span (inf for a value so far out that it overflows)."""
    span = np.where(INTEGER, 1.0, np.where(high - low > 0, high - low, 1.0))
    with np.errstate(over="ignore"):
        return (np.atleast_2d(points) - low) / span


def nearest_distance(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of a: the distance to its nearest row of b and that row's index (inf for a
    point so far out that its square overflows: a parameter of 1e200 is as far as any)."""
    with np.errstate(over="ignore"):
        d = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    index = d.argmin(axis=1)
    return d[np.arange(len(a)), index], index


@dataclass(frozen=True)
class Domain:
    points: np.ndarray  # (n, 6) training points
    low: np.ndarray
    high: np.ndarray
    limit: float

    @classmethod
    def of(cls, points: np.ndarray) -> "Domain":
        points = np.asarray(points, float)
        low, high = points.min(axis=0), points.max(axis=0)
        x = scaled(points, low, high)
        d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)) + np.diag(np.full(len(x), np.inf))
        spacing = float(np.percentile(d.min(axis=1), LIMIT_QUANTILE)) if len(x) > 1 else LIMIT_CAP
        return cls(points, low, high, min(LIMIT_FACTOR * spacing, LIMIT_CAP))

    def distance(self, points: np.ndarray) -> np.ndarray:
        """(n,) distance of each point to its nearest training point (scaled as above)."""
        return nearest_distance(scaled(points, self.low, self.high), scaled(self.points, self.low, self.high))[0]

    def in_hull(self, point: np.ndarray) -> bool:
        """Whether the point is a convex combination of the training points with its valencies."""
        x, train = scaled(point, self.low, self.high)[0], scaled(self.points, self.low, self.high)
        same = train[np.all(np.isclose(train[:, INTEGER], x[INTEGER]), axis=1)]
        if len(same) == 0 or not np.all(np.isfinite(x)):  # an infinite point is in no hull (linprog refuses it)
            return False
        a_eq = np.vstack([same[:, ~INTEGER].T, np.ones(len(same))])
        b_eq = np.append(x[~INTEGER], 1.0)
        return bool(linprog(np.zeros(len(same)), A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs").status == 0)

    def unvaried(self, point: np.ndarray) -> str | None:
        """What moves the point off a continuous parameter that every training run held at one
        value (the surrogate never saw it vary: a d+ of 0.3 passed at 0.17 of the unit span a
        constant column is scaled by), or None."""
        point = np.atleast_2d(point)[0]
        for i in np.flatnonzero((self.high == self.low) & ~INTEGER):
            if not np.isclose(point[i], self.low[i], rtol=1e-9, atol=0.0):
                return f"{PARAMETERS[i]} was {self.low[i]:g} in every training run, got {point[i]:g}"
        return None

    def inside(self, points: np.ndarray) -> np.ndarray:
        points = np.atleast_2d(points)
        near = self.distance(points) <= self.limit
        return np.array([(n or self.in_hull(p)) and self.unvaried(p) is None for n, p in zip(near, points, strict=True)])

    def check(self, point: np.ndarray) -> float:
        """The point's distance to the nearest training point, or a one-line error beyond the limit
        outside the hull of the training points with its valencies, or off a parameter the runs
        never varied."""
        moved = self.unvaried(point)
        if moved is not None:
            raise ThriftyError(f"{moved}: the surrogate has not seen it vary and does not extrapolate")
        distance = float(self.distance(point)[0])
        if distance > self.limit and not self.in_hull(np.atleast_2d(point)):
            raise ThriftyError(f"the point is {distance:.2f} from the nearest training run (scaled; the limit is "
                               f"{self.limit:.2f}) and outside the runs with its valencies: outside what the "
                               "surrogate was trained on, it does not extrapolate (a valency seen only at other "
                               "h or c counts as far)")
        return distance

    def to_dict(self) -> dict:
        return {"points": self.points.tolist(), "low": self.low.tolist(), "high": self.high.tolist(),
                "limit": self.limit}

    @classmethod
    def from_dict(cls, data: dict) -> "Domain":
        return cls(np.asarray(data["points"], float), np.asarray(data["low"], float),
                   np.asarray(data["high"], float), float(data["limit"]))
