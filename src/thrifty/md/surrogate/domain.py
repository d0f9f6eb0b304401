# SPDX-License-Identifier: MIT
"""Where a surrogate has seen data: a JOINT range check, by the distance to the nearest training point.

Points are scaled so that every continuous parameter spans [0, 1] over the training points, and an
integer parameter (z+, z-) moves 1 per valency step: a point whose z+ appeared in training only at
other h is far from every training point (1 or more) even though each of its parameters, taken
alone, is inside its range. A point is inside the domain when its nearest training point is within
`limit`: 1.5 times the 90th percentile of the training points' own nearest-neighbour distances,
capped at 0.75 (below one valency step) - about the spacing of the design, so a gap of twice the
usual spacing is flagged. No torch.
"""

from dataclasses import dataclass

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.md.params import INTEGER_PARAMETERS, PARAMETERS

INTEGER = np.array([p in INTEGER_PARAMETERS for p in PARAMETERS])
LIMIT_FACTOR, LIMIT_QUANTILE, LIMIT_CAP = 1.5, 90, 0.75


def scaled(points: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    span = np.where(INTEGER, 1.0, np.where(high - low > 0, high - low, 1.0))
    return (np.atleast_2d(points) - low) / span


def nearest_distance(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of a: the distance to its nearest row of b and that row's index."""
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

    def inside(self, points: np.ndarray) -> np.ndarray:
        return self.distance(points) <= self.limit

    def check(self, point: np.ndarray) -> float:
        """The point's distance to the nearest training point, or a one-line error beyond the limit."""
        distance = float(self.distance(point)[0])
        if distance > self.limit:
            raise ThriftyError(f"the point is {distance:.2f} from the nearest training run (scaled; the limit is "
                               f"{self.limit:.2f}): outside what the surrogate was trained on, it does not "
                               "extrapolate (a valency seen only at other h or c counts as far)")
        return distance

    def to_dict(self) -> dict:
        return {"points": self.points.tolist(), "low": self.low.tolist(), "high": self.high.tolist(),
                "limit": self.limit}

    @classmethod
    def from_dict(cls, data: dict) -> "Domain":
        return cls(np.asarray(data["points"], float), np.asarray(data["low"], float),
                   np.asarray(data["high"], float), float(data["limit"]))
