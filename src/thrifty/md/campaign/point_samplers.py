# SPDX-License-Identifier: MIT
"""Which parameter points a campaign runs next: the Sampler protocol and two samplers.

A sampler is asked `next_points(completed, k)` with the finished runs (each a dict with "params"
and "result") and returns up to k points in the order it wants them run. Grid and random are
deterministic sequences (the random one from its seed) that skip completed points, so a restarted
driver asks again and gets the same points, whose checkpoints are still on disk. The active-learning
sampler (md.surrogate.active_sweep: a surrogate's uncertainty) plugs in through the same protocol; it is not
deterministic, so it keeps its picks in the campaign's store.
"""

import hashlib
import itertools
import json
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from thrifty.md.space import ParameterSpace

SAMPLERS = ("grid", "random", "active")  # active: md.surrogate.active_sweep.ActiveSampler


def point_key(params: dict) -> str:
    """The run id of a parameter point: a hash of its canonical JSON (sorted keys, repr floats)."""
    text = json.dumps({k: float(v) for k, v in sorted(params.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Sampler(Protocol):
    def next_points(self, completed: Sequence[dict], k: int) -> list[dict]: ...


class GridSampler:
    """Every combination of each parameter's grid (values, or `points` across its range)."""

    def __init__(self, space: ParameterSpace) -> None:
        self.space = space

    def next_points(self, completed: Sequence[dict], k: int) -> list[dict]:
        done = {point_key(run["params"]) for run in completed}
        grids = [p.grid() for p in self.space.parameters]
        points = (dict(zip(self.space.names, combo, strict=True)) for combo in itertools.product(*grids))
        return list(itertools.islice((p for p in points if point_key(p) not in done), k))


class RandomSampler:
    """Uniform in each range, a uniform choice among listed values; the i-th point depends only on
    the seed and i, so the sequence is the same in every driver that uses the seed."""

    def __init__(self, space: ParameterSpace, seed: int = 0) -> None:
        self.space, self.seed = space, seed

    def point(self, i: int) -> dict:
        rng = np.random.default_rng([self.seed, i])
        return {p.name: float(p.values[rng.integers(len(p.values))]) if p.values
                else float(rng.uniform(p.low, p.high)) for p in self.space.parameters}  # type: ignore[arg-type]

    def next_points(self, completed: Sequence[dict], k: int) -> list[dict]:
        done = {point_key(run["params"]) for run in completed}
        out: list[dict] = []
        i = 0
        while len(out) < k and i < len(done) + k + 10_000:
            point = self.point(i)
            if point_key(point) not in done:
                out.append(point)
            i += 1
        return out


def make_sampler(name: str, space: ParameterSpace, seed: int = 0) -> Sampler:
    """The grid or random sampler (the active one needs the campaign's store and runs: md.surrogate.active_sweep)."""
    if name == "grid":
        return GridSampler(space)
    if name == "random":
        return RandomSampler(space, seed)
    raise ValueError(f"unknown sampler {name!r}; choose grid or random")
