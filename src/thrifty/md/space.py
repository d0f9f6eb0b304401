# SPDX-License-Identifier: MIT
"""The parameter box of a campaign, read from a TOML file (tomllib, standard library).

    [h]               # a continuous range
    min = 3.0
    max = 4.0
    [zp]              # a list of values
    values = [1, 2, 3]
    [c]
    min = 0.3
    max = 0.9
    points = 4        # grid points of a range (default 3, at most 10,000); random sampling ignores it

Every table is one parameter; a file that does not parse, a table with neither min/max nor
values, a min not below its max, a non-finite number or an empty list is a SpaceError (one line).
"""

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from thrifty.errors import ThriftyError

DEFAULT_GRID_POINTS = 3
# grid points of one range: a campaign runs one simulation a point, and the grid is built in memory
# (points = 1e9 had taken 23 GB before the kernel stopped it)
MAX_GRID_POINTS = 10_000


class SpaceError(ThriftyError):
    """A parameter space file that does not parse or holds nonsense ranges."""


@dataclass(frozen=True)
class Parameter:
    name: str
    low: float | None = None  # a range [low, high] ...
    high: float | None = None
    points: int = DEFAULT_GRID_POINTS
    values: tuple[float, ...] = ()  # ... or a list of values

    def grid(self) -> list[float]:
        if self.values:
            return list(self.values)
        low, high = self.low, self.high
        assert low is not None and high is not None  # a range: _parameter sets both
        if self.points == 1:
            return [0.5 * (low + high)]
        step = (high - low) / (self.points - 1)
        return [low + i * step for i in range(self.points)]

    def bounds(self) -> tuple[float, float]:
        """[low, high] of a range; the smallest and the largest of a list of values."""
        if self.values:
            return min(self.values), max(self.values)
        if self.low is None or self.high is None:
            raise SpaceError(f"parameter {self.name} has neither a range nor a list of values")
        return self.low, self.high

    def to_dict(self) -> dict:
        return {"values": list(self.values)} if self.values else \
            {"min": self.low, "max": self.high, "points": self.points}


@dataclass(frozen=True)
class ParameterSpace:
    parameters: tuple[Parameter, ...]

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parameters]

    def to_dict(self) -> dict:
        return {p.name: p.to_dict() for p in self.parameters}


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpaceError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _parameter(name: str, table, where: str) -> Parameter:
    if not isinstance(table, dict):
        raise SpaceError(f"{where}: {name} must be a table like [{name}] min = 1.0 max = 2.0, got {table!r}")
    unknown = set(table) - {"min", "max", "points", "values"}
    if unknown:
        raise SpaceError(f"{where}: [{name}] has unknown keys {', '.join(sorted(unknown))}; use min/max/points or values")
    if "values" in table:
        if "min" in table or "max" in table:
            raise SpaceError(f"{where}: [{name}] gives both values and min/max; give one")
        values = table["values"]
        if not isinstance(values, list) or not values:
            raise SpaceError(f"{where}: [{name}] values must be a non-empty list of numbers")
        numbers = tuple(_number(v, f"{where}: [{name}] value") for v in values)
        if len(set(numbers)) != len(numbers):
            raise SpaceError(f"{where}: [{name}] values repeat: {values}")
        return Parameter(name, values=numbers)
    if "min" not in table or "max" not in table:
        raise SpaceError(f"{where}: [{name}] needs min and max, or values")
    low, high = _number(table["min"], f"{where}: [{name}] min"), _number(table["max"], f"{where}: [{name}] max")
    if not low < high:
        raise SpaceError(f"{where}: [{name}] min ({low:g}) must be below max ({high:g})")
    points = table.get("points", DEFAULT_GRID_POINTS)
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise SpaceError(f"{where}: [{name}] points must be a positive integer, got {points!r}")
    if points > MAX_GRID_POINTS:
        raise SpaceError(f"{where}: [{name}] points must be at most {MAX_GRID_POINTS:,} (one simulation a point), "
                         f"got {points:,}")
    return Parameter(name, low, high, points)


def parse_space(text: str, where: str = "space") -> ParameterSpace:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpaceError(f"{where} is not valid TOML: {exc}") from None
    if not data:
        raise SpaceError(f"{where} defines no parameters: add tables like [h_nm] min = 2.0 max = 4.0, one a parameter, "
                         "named as the simulation names it")
    return ParameterSpace(tuple(_parameter(name, table, where) for name, table in data.items()))


def load_space(path: Path) -> ParameterSpace:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpaceError(f"space file not found: {path}") from None
    except IsADirectoryError:
        raise SpaceError(f"space file {path} is a folder") from None
    except UnicodeDecodeError:
        raise SpaceError(f"space file {path} is not UTF-8 text") from None
    return parse_space(text, str(path))
