# SPDX-License-Identifier: MIT
"""Batch-split policies: uniform (plain DDP), static (proportional to a warm-up measurement or to
given capacities) and dynamic (OmniLearn's proportional controller). Pure Python, deterministic:
every rank runs the same policy on the same all-reduced compute times and reaches the same split
without another collective.

Dynamic controller (OmniLearn, Tyagi & Sharma, TPDS 2025; docs/design.md "Dynamic batching"):
  X_k = b_k / t_k                         throughput from compute time only (samples/s)
  db_k = -X_k (t_k - mean t)              so b_k <- b_k * mean(t) / t_k
  applied when max_k |db_k| / b_k > dead_band, at most every `every` steps, then clamped to
  [b_min, b_max] and restored to sum b_k = B in integers (train.split).
The dead-band default, 5%, is the paper's; OmniLearn's published code uses 20% and adjusts once
per epoch.

Measured compute times are noisy (shared cores, caches, the OS), spike now and then, and change
level when a worker's speed changes, so t_k is estimated robustly:
- each step's times become ratios r_k = t_k / mean_j t_j (noise common to all ranks cancels);
  the controller keeps the newest `window` ratios since the statistics last restarted;
- t_k / mean t is the median of rank k's ratios: one spike cannot move it (an EWMA with weight
  0.3 moved 60% on one 3x spike and ratcheted the slow rank's batch 8 -> 6 -> 5 -> 4);
- the dead-band applies to a lower confidence bound: the imbalance less `confidence` standard
  errors of the median, SE = sqrt(pi / 2) s r / sqrt(n) (the median's asymptotic variance for
  normal data, Kenney & Keeping 1962), carried through c = 1/r - 1 by the delta method
  (SE(c) = SE(r) / r^2). s is the relative noise from the step-to-step changes of the ratios
  (noise_spread), kept across restarts, per rank and at least the pooled value. The error shrinks
  with n, so a real imbalance is acted on however noisy the clock (an EWMA's error does not
  shrink: the old bound was 5% + 1.26 CV, and a 24% imbalance at 20% noise stood for 30 steps);
- level shifts: when each of the newest SHIFT_SAMPLES ratios of some rank lies on the same side
  of the older ones' median, beyond the dead-band and `shift` standard deviations, its speed
  changed: the older samples are dropped and the statistics restart there (a change-point test at
  the newest possible point; a speed change used to count as noise, acted on 5 steps late);
- no decision on fewer than MIN_SAMPLES samples, or before MIN_JITTER step-to-step changes,
  whatever `every` says (with `every` 1 the controller acted on single samples, NaN failing the
  `<= dead_band` test: 21 changes in 200 steps at equal speeds).
The statistics also restart after each change of split (old times belong to old batch sizes).

One move, not several: the proportional step assumes t_k proportional to b_k; with a fixed cost
per step, t_k = a_k + c_k b_k (docs/design.md "Step time"), it moves only the c_k b_k part's share and
needs several corrections, each waiting for fresh samples (3-30 steps to within 10% of ideal on 2
real ranks). So each rank's fixed cost in samples, h_k = a_k / c_k, is fitted from the raw times
since the last level shift, kept across changes of split: a least-squares line through the median
time at each batch size seen (medians: spikes do not move it), trusted when the sizes span at
least MIN_SPAN of their mean. The split then equalises t_k(b) = c_k (h_k + b) with sum b_k = B
(train.split.affine_targets), c_k = r_k / (h_k + b_k) from the robust ratio estimate r_k at the
current split. A speed change scales a rank's whole time (t = f (a + c b)), leaving h_k, so h_k
carries over a level shift until the new level has two batch sizes of its own; before any fit
h_k = 0, which is the proportional step.

An overshoot drops a rank's fit. A move that takes back at least half of some rank's previous
move (no level shift between) says the fit behind that move was wrong for the rank, most often
because the ranks' speed changed without the shift test seeing it (on a loaded machine the noise
hides it) and the history mixes two speed levels. That rank's fit then restarts with the samples at
the current split (`fit_since`), its h_k falls back to 0, and the move is made with that. Smaller
reversals are noise around the balance and leave the fits alone (counted, they dropped the fit
17-20 times in 150 steps in 4 of 20 seeds of 4 ranks at 10% noise). Without the rule a fit across an
unseen speed change (h_k at its limit B) swung 2 real ranks between b = 1 and b = 24-58 every 5
steps for 50 steps (a 4x slowdown moved from rank 0 to rank 1 on a loaded machine). On the
simulated clock (2-8 ranks, 5-30% noise, 0-6 ms fixed cost, 30 seeds), its wasted compute is within
0.01 of the controller's without it in every case tried, and 0.03 lower in the worst one (4 ranks,
30% noise, a speed change: 0.208 against 0.240).

A rank pinned at a bound the way it would move (at b_min and slow, at b_max and fast) is left out
of the imbalance, which is taken over the free ranks against their mean (significant_imbalance).
"""

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields

from thrifty.train.split import SplitError, affine_targets, check_split_bounds, proportional_split

BATCH_POLICIES = ("uniform", "static", "dynamic")
MIN_SAMPLES = 3  # the fewest samples since a restart behind a decision
MIN_JITTER = 6  # the fewest step-to-step changes behind a noise estimate
SHIFT_SAMPLES = 3  # newest samples the level-shift test compares with the older ones
MAD_TO_SD = 1.4826  # sd = 1.4826 x median absolute deviation, normal data (Rousseeuw & Croux 1993)
MEDIAN_SE = math.sqrt(math.pi / 2)  # SE(median) = sqrt(pi / 2) s / sqrt(n) (Kenney & Keeping 1962)
MIN_SPAN = 0.1  # batch sizes behind a fixed-cost fit span at least 10% of their mean


@dataclass(frozen=True)
class ControllerSettings:
    dead_band: float = 0.05  # the paper's 5% (OmniLearn's published code defaults to 20%)
    every: int = 5  # at most one change every K steps
    window: int = 100  # newest compute times per rank behind the median
    warmup_steps: int = 5  # static policy: steps measured before its one change
    confidence: float = 2.0  # standard errors of the median subtracted before the dead-band
    shift: float = 2.5  # standard deviations each of the newest samples must move for a level shift
    asp_min_share: float = 0.5  # ASP only: b_k >= this x B / n (train.asp.ParameterServer.batch_floor)

    def __post_init__(self) -> None:
        if not 0 <= self.dead_band < 1:
            raise SplitError(f"dead-band must be in [0, 1), got {self.dead_band}")
        if self.every < 1 or self.warmup_steps < 1:
            raise SplitError("the controller's interval (--adjust-every) and warm-up must be at least one step")
        if not 0 <= self.asp_min_share <= 1:
            raise SplitError(f"the ASP batch floor is a share of B / n in [0, 1], got {self.asp_min_share}")
        if self.window < 2 * SHIFT_SAMPLES:
            raise SplitError(f"the controller's window must hold at least {2 * SHIFT_SAMPLES} steps, "
                             f"got {self.window}")


def relative_changes(times: Sequence[float]) -> list[float]:
    """|db_k| / b_k of the proportional update, = |mean(t) / t_k - 1|."""
    mean_t = statistics.fmean(times)
    return [abs(mean_t / t - 1.0) for t in times]


def noise_spread(jitter: Sequence[float]) -> float:
    """Relative noise s from step-to-step relative changes |r_i - r_(i-1)| / r_(i-1) (for iid
    noise a difference has standard deviation sqrt(2) s, so s = 1.4826 median |dr| / sqrt(2));
    level shifts and changes of split are single outliers among the changes, so this holds
    across them."""
    return MAD_TO_SD * statistics.median(jitter) / math.sqrt(2) if jitter else 0.0


def fixed_cost_batches(batches: Sequence[int], times_s: Sequence[float], limit: float) -> float | None:
    """h = a / c of t = a + c b (samples), least squares through the median time at each batch
    size weighted by its count, clamped to [0, limit]; None with fewer than two sizes, sizes
    spanning less than MIN_SPAN of their mean, or a slope that is not positive."""
    by_size: dict[int, list[float]] = {}
    for b, t in zip(batches, times_s, strict=True):
        by_size.setdefault(b, []).append(t)
    if len(by_size) < 2:
        return None
    counts = {b: len(ts) for b, ts in by_size.items()}
    total = sum(counts.values())
    mean_b = sum(b * n for b, n in counts.items()) / total
    if (max(by_size) - min(by_size)) < MIN_SPAN * mean_b:
        return None
    medians = {b: statistics.median(ts) for b, ts in by_size.items()}
    mean_t = sum(medians[b] * n for b, n in counts.items()) / total
    slope = (sum(n * (b - mean_b) * (medians[b] - mean_t) for b, n in counts.items())
             / sum(n * (b - mean_b) ** 2 for b, n in counts.items()))  # weighted least squares
    if not slope > 0:
        return None
    return min(max((mean_t - slope * mean_b) / slope, 0.0), limit)


def level_shift(series: Sequence[float], spread: float, dead_band: float, shift: float) -> bool:
    """True when each of the newest SHIFT_SAMPLES values lies on the same side of the older
    values' median, further than the dead-band (relative) and `shift` standard deviations of the
    difference, sqrt(s^2 + SE(median)^2). For iid noise each sample passes with probability
    P(z > shift) (0.6% at 2.5), all of them with that to the power SHIFT_SAMPLES."""
    old, new = series[:-SHIFT_SAMPLES], series[-SHIFT_SAMPLES:]
    if len(old) < 2:
        return False
    centre = statistics.median(old)
    threshold = centre * max(dead_band, shift * spread * math.sqrt(1 + MEDIAN_SE**2 / len(old)))
    return all(v - centre > threshold for v in new) or all(centre - v > threshold for v in new)


@dataclass
class BatchPolicy:
    """The current split and how it changes; `observe` is called once per step on every rank."""

    name: str
    global_batch: int
    split: list[int]
    b_min: int
    b_max: list[int]
    settings: ControllerSettings = field(default_factory=ControllerSettings)
    ratios: list[list[float]] = field(default_factory=list)  # per step since the restart: t_k / mean t
    jitter: list[list[float]] = field(default_factory=list)  # per step: |dr_k|, kept across restarts
    history: list[tuple[list[int], list[float]]] = field(default_factory=list)  # (split, t_k) since a level shift
    fixed: list[float] = field(default_factory=list)  # h_k = a_k / c_k per rank (samples), the latest fit
    samples: int = 0  # compute times observed; numbers the history's entries
    fit_since: list[int] = field(default_factory=list)  # per rank: the first sample its fit takes; [] = all
    last_move: list[int] = field(default_factory=list)  # b_k new - old of the latest change; [] after a level shift
    overshoots: int = 0
    last_change_step: int = 0
    adjustments: int = 0
    level_shifts: int = 0
    frozen: bool = False  # static: the split is final
    warmup_rates: list[list[float]] = field(default_factory=list)

    def observe(self, step: int, compute_times: Sequence[float]) -> bool:
        """Feed one step's per-rank compute times; True when the split changed."""
        if self.name == "uniform":
            return False
        if self.name == "static":
            return self._observe_static(compute_times)
        return self._observe_dynamic(step, compute_times)

    def estimate(self) -> list[float]:
        """t_k / mean t per rank: the median of the window's ratios."""
        return [statistics.median(column) for column in zip(*self.ratios, strict=True)]

    def spreads(self) -> list[float]:
        """Per-rank relative noise of the ratios from the newest `window` step-to-step changes,
        at least the noise pooled over all ranks (few samples underestimate it often)."""
        pooled = noise_spread([d for row in self.jitter for d in row])
        return [max(noise_spread(column), pooled) for column in zip(*self.jitter, strict=True)] if self.jitter \
            else [0.0] * len(self.split)

    def significant_imbalance(self) -> float:
        """max_k of |db_k| / b_k less `confidence` standard errors; the dead-band applies to this.
        Over the free ranks, against their mean: a rank at b_min that is slow, or at b_max that is
        fast, cannot move the way it would, and counted in, it kept the others' imbalance against
        the mean above the dead-band for good, so noise reshuffled them every `every` steps
        ([48, 47, 1] -> [49, 46, 1] -> [51, 44, 1]: 17 changes in 100 steps at speeds 1:1:10).
        NaN before MIN_SAMPLES samples, or with no free rank (and NaN never passes the dead-band)."""
        n = len(self.ratios)
        if n < MIN_SAMPLES or len(self.jitter) < min(MIN_JITTER, self.settings.window):
            return float("nan")
        estimate = self.estimate()
        free = [k for k, (r, b, cap) in enumerate(zip(estimate, self.split, self.b_max, strict=True))
                if not (b <= self.b_min and r > 1.0) and not (b >= cap and r < 1.0)]
        if not free:
            return float("nan")
        changes = relative_changes([estimate[k] for k in free])
        spreads = self.spreads()
        errors = [self.settings.confidence * MEDIAN_SE * spreads[k] / math.sqrt(n) / estimate[k] for k in free]
        return max(c - e for c, e in zip(changes, errors, strict=True))

    def _observe_static(self, compute_times: Sequence[float]) -> bool:
        if self.frozen:
            return False
        self.warmup_rates.append([b / t for b, t in zip(self.split, compute_times, strict=True)])
        if len(self.warmup_rates) < self.settings.warmup_steps:
            return False
        self.frozen = True
        rates = [statistics.median(r[k] for r in self.warmup_rates) for k in range(len(self.split))]
        return self._change(proportional_split(rates, self.global_batch, self.b_min, self.b_max), 0)

    def _observe_dynamic(self, step: int, compute_times: Sequence[float]) -> bool:
        mean_t = statistics.fmean(compute_times)
        ratios = [t / mean_t for t in compute_times]
        if self.ratios:
            self.jitter.append([abs(r - p) / p for r, p in zip(ratios, self.ratios[-1], strict=True)])
            del self.jitter[:-self.settings.window]
        self.ratios.append(ratios)
        del self.ratios[:-self.settings.window]
        self.history.append((list(self.split), list(compute_times)))
        del self.history[:-self.settings.window]
        self.samples += 1
        shifted = (level_shift(column, s, self.settings.dead_band, self.settings.shift)
                   for column, s in zip(zip(*self.ratios, strict=True), self.spreads(), strict=True))
        if any(shifted):
            del self.ratios[:-SHIFT_SAMPLES]
            del self.history[:-SHIFT_SAMPLES]
            self.level_shifts += 1
            self.last_move = []  # a speed change explains a reversal
        if len(self.ratios) < MIN_SAMPLES or step - self.last_change_step < self.settings.every:
            return False
        if not self.significant_imbalance() > self.settings.dead_band:
            return False
        new = self._affine_split(self.fixed_costs())
        overshot = self._reversed(new)
        if overshot:
            self.overshoots += 1
            if not self.fit_since:
                self.fit_since = [0] * len(self.split)
            for k in overshot:  # its fit restarts with the samples at the current split
                self.fit_since[k], self.fixed[k] = self.samples - len(self.ratios), 0.0
            new = self._affine_split(self.fixed)
        return self._change(new, step)

    def _affine_split(self, fixed: Sequence[float]) -> list[int]:
        """The integer split that equalises t_k(b) = c_k (h_k + b), c_k = t_k / (h_k + b_k)."""
        slopes = [r / (h + b) for r, h, b in zip(self.estimate(), fixed, self.split, strict=True)]
        target = affine_targets(fixed, slopes, self.global_batch, self.b_min, self.b_max)
        return proportional_split(target, self.global_batch, self.b_min, self.b_max)

    def _reversed(self, new: Sequence[int]) -> list[int]:
        """The ranks that `new` moves back by at least half their move at the latest change."""
        return [k for k, (b, old, moved) in enumerate(zip(new, self.split, self.last_move, strict=False))
                if (b - old) * moved < 0 and 2 * abs(b - old) >= abs(moved)]

    def fixed_costs(self) -> list[float]:
        """h_k per rank: fitted on the samples since the last level shift where they allow it,
        else the latest fit (a speed change scales a and c alike), else 0 (the proportional step)."""
        if not self.fixed:
            self.fixed = [0.0] * len(self.split)
        first = self.samples - len(self.history)  # the number of the history's first entry
        for k in range(len(self.split)):
            since = self.fit_since[k] - first if self.fit_since else 0
            kept = self.history[max(since, 0):]
            fit = fixed_cost_batches([s[k] for s, _ in kept], [t[k] for _, t in kept], float(self.global_batch))
            if fit is not None:
                self.fixed[k] = fit
        return list(self.fixed)

    def _change(self, new: list[int], step: int) -> bool:
        if new == self.split:
            return False
        self.last_move = [b - old for b, old in zip(new, self.split, strict=True)]
        self.split, self.last_change_step = new, step
        self.adjustments += 1
        self.ratios = []
        return True

    def state_dict(self) -> dict:
        state = asdict(self)
        state["settings"] = asdict(self.settings)
        return state

    @classmethod
    def from_state_dict(cls, state: dict) -> "BatchPolicy":
        """Fields this version does not know (an older controller's statistics) are dropped: the
        statistics restart, the split and counts carry over."""
        known = {f.name for f in fields(cls)}
        state = {k: v for k, v in state.items() if k in known}
        settings = {f.name for f in fields(ControllerSettings)}
        state["settings"] = ControllerSettings(**{k: v for k, v in state["settings"].items() if k in settings})
        return cls(**state)
def make_policy(name: str, global_batch: int, workers: int, *, b_min: int = 1,
                b_max: Sequence[int] | None = None, capacities: Sequence[float] | None = None,
                settings: ControllerSettings | None = None) -> BatchPolicy:
    """A policy starting from B / n, or for `static` with capacities, from the proportional split."""
    if name not in BATCH_POLICIES:
        raise SplitError(f"unknown policy {name!r}; choose one of {', '.join(BATCH_POLICIES)}")
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
