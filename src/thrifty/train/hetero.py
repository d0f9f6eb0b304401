# SPDX-License-Identifier: MIT
"""Heterogeneity to emulate: per-rank slowdown factors, constant or changing on a schedule.

A slowdown f_k >= 1 makes rank k's compute take f_k times as long; HL (heterogeneity level) =
fastest speed / slowest speed. Named profiles are OmniLearn's 4-worker core splits (Tyagi &
Sharma, TPDS 2025), speed proportional to cores, so f_k = max(cores) / cores_k. `dynamic` is
HL1 -> HL2 -> HL4 -> HL8 -> HL4 -> HL2 -> HL1 in equal parts of the run.

`SimulatedCluster` plays a schedule on a simulated clock (no processes, no wall time) for the
batch controller's tests and benchmarks; `wasted_compute_fraction` and `reaction_steps` are the
yardsticks both use.
"""

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from thrifty.errors import ThriftyError
from thrifty.io import read_json

CORE_SPLITS = {"HL1": (12, 12, 12, 12), "HL2": (12, 12, 8, 16), "HL4": (9, 9, 6, 24), "HL8": (6, 6, 4, 32)}
DYNAMIC_SEQUENCE = ("HL1", "HL2", "HL4", "HL8", "HL4", "HL2", "HL1")
# OmniLearn's largest level is 8x; 1e9 was taken and its run could not be stopped by one SIGTERM
# (a step's emulated wait had no end in sight). 100x leaves room for any cluster worth balancing.
MAX_SLOWDOWN = 100.0


class HeteroError(ThriftyError):
    """An unusable slowdown, profile or schedule."""


def profile_slowdowns(name: str) -> tuple[float, ...]:
    cores = CORE_SPLITS.get(name.upper())
    if cores is None:
        raise HeteroError(f"unknown heterogeneity profile {name!r}; choose one of "
                          f"{', '.join(CORE_SPLITS)} or dynamic")
    return tuple(max(cores) / c for c in cores)


@dataclass(frozen=True)
class SlowdownSchedule:
    """Segments (first step, per-rank slowdowns), sorted by step; the first starts at step 0."""

    segments: tuple[tuple[int, tuple[float, ...]], ...]

    def __post_init__(self) -> None:
        steps = [s for s, _ in self.segments]
        if steps != sorted(set(steps)):  # said before the first entry's step: [20, 10] is out of order, not late
            raise HeteroError(f"slowdown schedule steps must be strictly increasing, got {', '.join(map(str, steps))}")
        if not self.segments or self.segments[0][0] != 0:
            raise HeteroError("a slowdown schedule must start at step 0")
        widths = {len(f) for _, f in self.segments}
        if len(widths) != 1:
            raise HeteroError("every schedule entry needs one slowdown per worker")
        for _, factors in self.segments:
            for f in factors:
                if not f > 0 or f != f or f == float("inf"):
                    raise HeteroError(f"slowdown factors must be positive numbers, got {f}")
                if f < 1:  # the emulation waits; it cannot make a rank faster than this machine
                    raise HeteroError(f"slowdown factors are 1 (full speed) or more, got {f:g}: give the slower "
                                      "ranks larger factors instead")
                if f > MAX_SLOWDOWN:
                    raise HeteroError(f"slowdown factors above {MAX_SLOWDOWN:g} are not emulated, got {f:g} (each "
                                      f"step would wait {f - 1:g} times its compute)")

    @property
    def workers(self) -> int:
        return len(self.segments[0][1])

    def at(self, step: int) -> tuple[float, ...]:
        current = self.segments[0][1]
        for start, factors in self.segments:
            if step < start:
                break
            current = factors
        return current

    def change_steps(self) -> list[int]:
        return [s for s, _ in self.segments[1:]]

    def check_workers(self, workers: int) -> None:
        if self.workers != workers:
            raise HeteroError(f"the slowdown setting is for {self.workers} workers, the run has {workers} (the HL "
                              "profiles are OmniLearn's 4; --slowdown takes one factor per worker)")


def constant(factors: tuple[float, ...]) -> SlowdownSchedule:
    return SlowdownSchedule(((0, tuple(float(f) for f in factors)),))


def parse_slowdown(text: str) -> SlowdownSchedule:
    """'1,4' -> rank 0 at full speed, rank 1 four times slower."""
    try:
        factors = tuple(float(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise HeteroError(f"--slowdown must be comma-separated positive numbers, got {text!r}") from None
    if not factors:
        raise HeteroError("--slowdown is empty")
    return constant(factors)


def named_schedule(name: str, total_steps: int) -> SlowdownSchedule:
    """A constant HL profile, or `dynamic`: the HL sequence in equal parts of `total_steps`."""
    if name.lower() != "dynamic":
        return constant(profile_slowdowns(name))
    parts = len(DYNAMIC_SEQUENCE)
    if total_steps < parts:
        raise HeteroError(f"the dynamic profile needs at least {parts} steps, the run has {total_steps}")
    return SlowdownSchedule(tuple((i * total_steps // parts, profile_slowdowns(hl))
                                  for i, hl in enumerate(DYNAMIC_SEQUENCE)))


def load_schedule(path: Path) -> SlowdownSchedule:
    """JSON list of {"step": S, "slowdown": [f_0, ...]} or {"step": S, "profile": "HL4"}."""
    entries = read_json(path, HeteroError, "slowdown schedule")
    if not isinstance(entries, list) or not entries:
        raise HeteroError(f"slowdown schedule {path} must be a non-empty JSON list")
    segments = []
    for entry in entries:
        if not isinstance(entry, dict) or "step" not in entry:
            raise HeteroError(f"schedule entry {entry!r} needs a 'step'")
        unknown = sorted(set(entry) - {"step", "slowdown", "profile"})
        if unknown:  # a misspelt "slowdwn" beside "profile" had been ignored
            raise HeteroError(f"schedule entry {entry!r}: unknown key {unknown[0]!r} (keys: step, and slowdown or profile)")
        if "profile" in entry and "slowdown" in entry:
            raise HeteroError(f"schedule entry {entry!r}: give 'slowdown' or 'profile', not both")
        if "profile" in entry:
            factors = profile_slowdowns(str(entry["profile"]))
        elif isinstance(entry.get("slowdown"), list):
            try:
                factors = tuple(float(f) for f in entry["slowdown"])
            except (TypeError, ValueError):
                raise HeteroError(f"schedule entry {entry!r}: slowdowns must be numbers") from None
        else:
            raise HeteroError(f"schedule entry {entry!r} needs 'slowdown' (a list) or 'profile'")
        step = entry["step"]
        if isinstance(step, bool) or not isinstance(step, int | float) or not math.isfinite(step) or step != int(step):
            raise HeteroError(f"slowdown schedule {path}: entry {entry!r}: step must be an integer")  # 2.7 ran as 2
        step = int(step)
        segments.append((step, factors))
    return SlowdownSchedule(tuple(segments))


@dataclass
class SimulatedCluster:
    """Compute times on a simulated clock, for the controller's tests and benchmarks:
    t_k = f_k(step) (overhead_s + b_k sample_s) exp(noise N(0, 1)), f_k from the schedule (a
    linear compute law, docs/design.md "Step time"; multiplicative log-normal noise). Deterministic
    for a seed; `spikes` maps (step, rank) to an extra factor."""

    schedule: SlowdownSchedule
    sample_s: float = 1e-4
    overhead_s: float = 0.0
    noise: float = 0.0
    seed: int = 0
    spikes: dict[tuple[int, int], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def ideal_times(self, step: int, split: Sequence[int]) -> list[float]:
        return [f * (self.overhead_s + b * self.sample_s) for f, b in zip(self.schedule.at(step), split, strict=True)]

    def times(self, step: int, split: Sequence[int]) -> list[float]:
        return [t * math.exp(self._rng.gauss(0.0, self.noise)) * self.spikes.get((step, k), 1.0)
                for k, t in enumerate(self.ideal_times(step, split))]


def wasted_compute_fraction(times: Sequence[Sequence[float]]) -> float:
    """Share of the ranks' compute capacity spent waiting for the slowest rank over some steps:
    sum_steps sum_k (max_j t_j - t_k) / sum_steps n max_j t_j."""
    waited = sum(max(row) - t for row in times for t in row)
    return waited / sum(len(row) * max(row) for row in times) if times else float("nan")


def within_of_ideal(times: Sequence[float], tolerance: float) -> bool:
    """A split is within `tolerance` of ideal when OmniLearn's estimate of the ideal batch,
    b_k mean(t) / t_k, is within `tolerance` of b_k for every rank: |mean(t) / t_k - 1| <= tol."""
    mean_t = statistics.fmean(times)
    return all(abs(mean_t / t - 1.0) <= tolerance for t in times)


def reaction_steps(splits: Sequence[Sequence[int]], times: Sequence[Sequence[float]],
                   tolerance: float = 0.1, runs: int = 5) -> int | None:
    """Steps from the first entry (a speed change) to the first step whose split is within
    `tolerance` of ideal, judged on the median times of that split over up to `runs` consecutive
    steps (one noisy step decides nothing); None if no step of the segment gets there."""
    for i, split in enumerate(splits):
        same = [times[j] for j in range(i, min(i + runs, len(splits))) if list(splits[j]) == list(split)]
        medians = [statistics.median(column) for column in zip(*same, strict=True)]
        if within_of_ideal(medians, tolerance):
            return i
    return None
