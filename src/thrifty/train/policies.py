"""Batch-split policies: uniform (plain DDP), static (proportional to a warm-up measurement or to
given capacities) and dynamic (OmniLearn's proportional controller). Pure Python, deterministic:
every rank runs the same policy on the same all-reduced compute times and reaches the same split
without another collective.

Dynamic controller (OmniLearn, Tyagi & Sharma, TPDS 2025; DESIGN.md "Dynamic batching"):
  X_k = b_k / t_k                         throughput from compute time only (samples/s)
  db_k = -X_k (t_k - mean t)              so b_k <- b_k * mean(t) / t_k
  applied when max_k |db_k| / b_k > dead_band, at most every `every` steps, then clamped to
  [b_min, b_max] and restored to sum b_k = B in integers (train.split).
t_k is an EWMA of rank k's compute time, restarted after each change of split (old times belong
to the old batch sizes). Measured compute times are noisy (shared cores, caches, the OS), so the
dead-band is applied to a lower confidence bound of the imbalance: the relative change minus
`confidence` standard errors of the smoothed time. The EWMA is sum_i w_i t_i, so for iid samples
its variance is sigma^2 sum_i w_i^2, with sigma^2 the sample variance since the last change
(Welford's running form). Without it the controller chases noise: on 2
ranks of 2 cores at equal speed it made 50-70 changes in 220 steps and lost 10% throughput.
"""

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from thrifty.train.split import SplitError, check_split_bounds, proportional_split

POLICIES = ("uniform", "static", "dynamic")


@dataclass(frozen=True)
class ControllerSettings:
    dead_band: float = 0.05  # OmniLearn's 5%
    every: int = 5  # at most one change every K steps
    smoothing: float = 0.3  # EWMA weight of the newest compute time
    warmup_steps: int = 5  # static policy: steps measured before its one change
    confidence: float = 3.0  # standard errors subtracted from the imbalance before the dead-band

    def __post_init__(self) -> None:
        if not 0 <= self.dead_band < 1:
            raise SplitError(f"dead-band must be in [0, 1), got {self.dead_band}")
        if self.every < 1 or self.warmup_steps < 1:
            raise SplitError("controller interval and warm-up must be at least one step")
        if not 0 < self.smoothing <= 1:
            raise SplitError(f"smoothing must be in (0, 1], got {self.smoothing}")


def relative_changes(times: Sequence[float]) -> list[float]:
    """|db_k| / b_k of the proportional update, = |mean(t) / t_k - 1|."""
    mean_t = statistics.fmean(times)
    return [abs(mean_t / t - 1.0) for t in times]


@dataclass
class BatchPolicy:
    """The current split and how it changes; `observe` is called once per step on every rank."""

    name: str
    global_batch: int
    split: list[int]
    b_min: int
    b_max: list[int]
    settings: ControllerSettings = field(default_factory=ControllerSettings)
    smoothed: list[float] | None = None  # EWMA of compute time per rank, for the current split
    moments: list[list[float]] | None = None  # per rank: Welford's running mean and M2
    weight_sq: float = 0.0  # sum of the EWMA's squared weights
    samples: int = 0  # compute times seen for the current split
    last_change_step: int = 0
    adjustments: int = 0
    frozen: bool = False  # static: the split is final
    warmup_rates: list[list[float]] = field(default_factory=list)

    def observe(self, step: int, compute_times: Sequence[float]) -> bool:
        """Feed one step's per-rank compute times; True when the split changed."""
        if self.name == "uniform":
            return False
        if self.name == "static":
            return self._observe_static(compute_times)
        return self._observe_dynamic(step, compute_times)

    def imbalance(self) -> float:
        """max_k |db_k| / b_k on the smoothed times."""
        return max(relative_changes(self.smoothed)) if self.smoothed else float("nan")

    def significant_imbalance(self) -> float:
        """max_k of |db_k| / b_k less `confidence` standard errors of t_k / t_k; the dead-band
        applies to this."""
        if not self.smoothed or self.moments is None or self.samples < 2:
            return float("nan")
        changes = relative_changes(self.smoothed)
        errors = [self.settings.confidence * math.sqrt(m2 / (self.samples - 1) * self.weight_sq) / t
                  for (_, m2), t in zip(self.moments, self.smoothed)]
        return max(c - e for c, e in zip(changes, errors))

    def _observe_static(self, compute_times: Sequence[float]) -> bool:
        if self.frozen:
            return False
        self.warmup_rates.append([b / t for b, t in zip(self.split, compute_times)])
        if len(self.warmup_rates) < self.settings.warmup_steps:
            return False
        self.frozen = True
        rates = [statistics.median(r[k] for r in self.warmup_rates) for k in range(len(self.split))]
        return self._change(proportional_split(rates, self.global_batch, self.b_min, self.b_max), 0)

    def _observe_dynamic(self, step: int, compute_times: Sequence[float]) -> bool:
        alpha = self.settings.smoothing
        if self.smoothed is None or self.moments is None:
            self.smoothed, self.weight_sq = list(compute_times), 1.0
            self.moments = [[t, 0.0] for t in compute_times]
        else:
            self.smoothed = [alpha * t + (1 - alpha) * s for t, s in zip(compute_times, self.smoothed)]
            self.weight_sq = (1 - alpha) ** 2 * self.weight_sq + alpha**2
            for moment, t in zip(self.moments, compute_times):  # Welford
                delta = t - moment[0]
                moment[0] += delta / (self.samples + 1)
                moment[1] += delta * (t - moment[0])
        self.samples += 1
        if self.samples < self.settings.every or step - self.last_change_step < self.settings.every:
            return False
        if self.significant_imbalance() <= self.settings.dead_band:
            return False
        mean_t = statistics.fmean(self.smoothed)
        target = [b - (b / t) * (t - mean_t) for b, t in zip(self.split, self.smoothed)]  # = b mean_t / t
        new = proportional_split(target, self.global_batch, self.b_min, self.b_max)
        return self._change(new, step)

    def _change(self, new: list[int], step: int) -> bool:
        if new == self.split:
            return False
        self.split, self.last_change_step = new, step
        self.adjustments += 1
        self.smoothed, self.moments, self.samples, self.weight_sq = None, None, 0, 0.0
        return True

    def state_dict(self) -> dict:
        state = asdict(self)
        state["settings"] = asdict(self.settings)
        return state

    @classmethod
    def from_state_dict(cls, state: dict) -> "BatchPolicy":
        state = dict(state)
        state["settings"] = ControllerSettings(**state["settings"])
        return cls(**state)


def make_policy(name: str, global_batch: int, workers: int, *, b_min: int = 1,
                b_max: Sequence[int] | None = None, capacities: Sequence[float] | None = None,
                settings: ControllerSettings | None = None) -> BatchPolicy:
    """A policy starting from B / n, or for `static` with capacities, from the proportional split."""
    if name not in POLICIES:
        raise SplitError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
    limits = list(b_max) if b_max is not None else [global_batch] * workers
    check_split_bounds(global_batch, workers, b_min, limits)
    if capacities is not None:
        if name != "static":
            raise SplitError("capacities are for the static policy")
        if len(capacities) != workers:
            raise SplitError(f"{len(capacities)} capacities for {workers} workers")
        split = proportional_split(list(capacities), global_batch, b_min, limits)
        return BatchPolicy(name, global_batch, split, b_min, limits, settings or ControllerSettings(),
                           frozen=True)
    start = proportional_split([1.0] * workers, global_batch, b_min, limits)  # = even_split if it fits
    return BatchPolicy(name, global_batch, start, b_min, limits, settings or ControllerSettings())
