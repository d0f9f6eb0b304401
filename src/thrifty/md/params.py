# SPDX-License-Identifier: MIT
"""The parameters of the nanoconfinement model (ions between two walls) and the box a campaign
samples them from. No torch: the CLI checks a prediction request with this before loading a model.

A point is (h_nm, z_plus, z_minus, c_molar, d_plus_nm, d_minus_nm): wall separation h (nm), cation
valency z+ (an integer, 1..3), anion valency z- (-1), salt concentration c (molar), cation and
anion diameters d+ and d- (nm), after Kadupitiya, Fox & Jadhao (J. Comput. Sci. 2020). The default
box is that paper's sampled range: h 3-4 nm, z+ 1-3, c 0.3-0.9 M, d+ and d- 0.2-0.63 nm.
"""

import math
from dataclasses import dataclass

import numpy as np

from thrifty.errors import ThriftyError

PARAMETERS = ("h_nm", "z_plus", "z_minus", "c_molar", "d_plus_nm", "d_minus_nm")
INTEGER_PARAMETERS = ("z_plus", "z_minus")
Z_PLUS_VALUES = (1, 2, 3)
Z_MINUS = -1


@dataclass(frozen=True)
class ParameterBox:
    """Closed ranges per parameter; z+ and z- are integers (low == high for a fixed one)."""
    low: tuple[float, ...] = (3.0, 1, Z_MINUS, 0.3, 0.2, 0.2)
    high: tuple[float, ...] = (4.0, 3, Z_MINUS, 0.9, 0.63, 0.63)

    def __post_init__(self) -> None:
        if len(self.low) != len(PARAMETERS) or len(self.high) != len(PARAMETERS):
            raise ThriftyError(f"a parameter box needs {len(PARAMETERS)} lows and highs ({', '.join(PARAMETERS)})")
        if any(lo > hi for lo, hi in zip(self.low, self.high, strict=True)):
            raise ThriftyError(f"a parameter box needs low <= high, got {self.low} and {self.high}")

    def unit(self, points: np.ndarray) -> np.ndarray:
        """Points mapped to [0, 1] per parameter (a fixed parameter maps to 0): the space the
        active-learning diversity rule measures distance in."""
        low, span = np.asarray(self.low, float), np.asarray(self.high, float) - np.asarray(self.low, float)
        return (np.atleast_2d(points) - low) / np.where(span > 0, span, 1.0)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n points uniform in the box; integer parameters uniform over their integers."""
        points = rng.uniform(self.low, self.high, size=(n, len(PARAMETERS)))
        for name in INTEGER_PARAMETERS:
            i = PARAMETERS.index(name)
            points[:, i] = rng.integers(int(self.low[i]), int(self.high[i]) + 1, size=n)
        return points

    def to_dict(self) -> dict:
        return {"low": list(self.low), "high": list(self.high)}

    @classmethod
    def from_dict(cls, data: dict) -> "ParameterBox":
        return cls(tuple(float(v) for v in data["low"]), tuple(float(v) for v in data["high"]))


def check_point(values: dict[str, float]) -> np.ndarray:
    """The point as an array in PARAMETERS order, or a one-line ThriftyError for a value the model
    cannot have: h, c, d+ or d- not a positive finite number, z+ outside 1..3, z- other than -1, h below
    an ion's diameter."""
    missing = [p for p in PARAMETERS if p not in values]
    if missing:
        raise ThriftyError(f"missing parameters: {', '.join(missing)}")
    point = []
    for name in PARAMETERS:
        try:
            value = float(values[name])
        except (TypeError, ValueError):
            raise ThriftyError(f"{name} must be a number, got {values[name]!r}") from None
        if name in INTEGER_PARAMETERS and value != round(value):
            raise ThriftyError(f"{name} must be an integer, got {value:g}")
        if name == "z_plus" and value not in Z_PLUS_VALUES:
            raise ThriftyError(f"z+ (cation valency) must be 1, 2 or 3, got {value:g}")
        if name == "z_minus" and value != Z_MINUS:
            raise ThriftyError(f"z- (anion valency) must be {Z_MINUS}, got {value:g}")
        if name not in INTEGER_PARAMETERS and not (math.isfinite(value) and value > 0):
            raise ThriftyError(f"{name} must be a positive number, got {value:g}")
        point.append(value)
    h, largest = point[PARAMETERS.index("h_nm")], max(point[PARAMETERS.index("d_plus_nm")],
                                                      point[PARAMETERS.index("d_minus_nm")])
    if h < largest:  # as md run refuses it (a new user's pass: md predict said "2.21 from the nearest run")
        raise ThriftyError(f"h_nm {h:g} nm is below the ion diameter {largest:g} nm: the ions do not fit")
    return np.array(point)
