"""Heterogeneity to emulate: per-rank slowdown factors, constant or changing on a schedule.

A slowdown f_k >= 1 makes rank k's compute take f_k times as long; HL (heterogeneity level) =
fastest speed / slowest speed. Named profiles are OmniLearn's 4-worker core splits (Tyagi &
Sharma, TPDS 2025), speed proportional to cores, so f_k = max(cores) / cores_k. `dynamic` is
HL1 -> HL2 -> HL4 -> HL8 -> HL4 -> HL2 -> HL1 in equal parts of the run.
"""

from dataclasses import dataclass
from pathlib import Path

from thrifty.errors import ThriftyError
from thrifty.io import read_json

CORE_SPLITS = {"HL1": (12, 12, 12, 12), "HL2": (12, 12, 8, 16), "HL4": (9, 9, 6, 24), "HL8": (6, 6, 4, 32)}
DYNAMIC_SEQUENCE = ("HL1", "HL2", "HL4", "HL8", "HL4", "HL2", "HL1")


class HeteroError(ThriftyError):
    """An unusable slowdown, profile or schedule."""


def profile_slowdowns(name: str) -> tuple[float, ...]:
    cores = CORE_SPLITS.get(name.upper())
    if cores is None:
        raise HeteroError(f"unknown heterogeneity profile {name!r}; choose one of "
                          f"{', '.join(CORE_SPLITS)} or dynamic")
    return tuple(max(cores) / c for c in cores)


def heterogeneity_level(slowdowns: tuple[float, ...]) -> float:
    return max(slowdowns) / min(slowdowns)


@dataclass(frozen=True)
class SlowdownSchedule:
    """Segments (first step, per-rank slowdowns), sorted by step; the first starts at step 0."""

    segments: tuple[tuple[int, tuple[float, ...]], ...]

    def __post_init__(self) -> None:
        if not self.segments or self.segments[0][0] != 0:
            raise HeteroError("a slowdown schedule must start at step 0")
        widths = {len(f) for _, f in self.segments}
        if len(widths) != 1:
            raise HeteroError("every schedule entry needs one slowdown per worker")
        for _, factors in self.segments:
            for f in factors:
                if not f > 0 or f != f or f == float("inf"):
                    raise HeteroError(f"slowdown factors must be positive numbers, got {f}")
        steps = [s for s, _ in self.segments]
        if steps != sorted(set(steps)):
            raise HeteroError("schedule steps must be strictly increasing")

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
            raise HeteroError(f"the slowdown setting is for {self.workers} workers, the run has {workers}")


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
        if "profile" in entry:
            factors = profile_slowdowns(str(entry["profile"]))
        elif isinstance(entry.get("slowdown"), list):
            try:
                factors = tuple(float(f) for f in entry["slowdown"])
            except (TypeError, ValueError):
                raise HeteroError(f"schedule entry {entry!r}: slowdowns must be numbers") from None
        else:
            raise HeteroError(f"schedule entry {entry!r} needs 'slowdown' (a list) or 'profile'")
        try:
            step = int(entry["step"])
        except (TypeError, ValueError):
            raise HeteroError(f"schedule entry {entry!r}: step must be an integer") from None
        segments.append((step, factors))
    return SlowdownSchedule(tuple(segments))
