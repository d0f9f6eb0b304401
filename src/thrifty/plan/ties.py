# SPDX-License-Identifier: MIT
"""Ties: differences smaller than a prediction can resolve decide nothing.

A prediction's resolution is one standard error, the larger of two of its own uncertainties:
- its 90% interval in log space, sigma = ln(high / low) / (2 z_0.95), z_0.95 = 1.645; the interval
  combines the step-time model's interval (the fit's covariance, or the calibrated projection
  error), the bounds on the steps to the target and, on spot, the preemption overhead
  (plan.candidates), less the low-end widening that every CPU VM of a busy profile shares
  (perf.cpu: it tells none of them apart less well);
- the noise of the measurements it rests on: the step-time fit's residual deviation of log step
  time (perf.steptime, `sigma_log`), times the share of the time (or of the billed seconds) that
  the steps make: no prediction resolves a relative difference in its steps finer than the
  scatter of the profiled steps, but the start-up and the billed minute are not scattered by it
  (with the noise on the whole time, 180 s of start-up and a 20% noise made 180.6 s and 215.7 s a
  tie, and the slower, cheaper plan ranked above the faster under --objective time);
- and at least PRINTED_LOG: times and costs print with 2-3 significant digits, so values within 1%
  can print alike and are never told apart (start-up-dominated plans: 33 rows at "3.01 min").
Predictions that share part of their error are resolved against each other by the part they do
not share (plan.candidates): GPU projections of one job share the calibrated error of the job's
mean on every GPU, and those onto one GPU die (A100 40 and 80 GB are one) that of the job's mean on
that die (perf.gpu_calibration: of a held-out log error of 0.31, 0.21 differs between GPUs and 0.16
between configurations on one die). With the whole error, 4 x 8 A100 at $15.75 and 1 x 1 A100 at $12.81
were a cost tie and the plan recommended the dearer one.
Candidate a beats b on a measure only when a's value is below b's by more than a's resolution
against b: ln(b / a) > sigma_a (less what a and b share): one prediction's deviation, for every
pair alike, not their difference's (sqrt 2 larger for two unshared errors), as the
one-standard-error rule takes it. The calibration's rows are single machines (1 and 8 GPUs), so
only the roofline's share of a step (plan.candidates: d log T / d log T_kernels) is resolved at the
shared deviation; the all-reduce's part, and an input-bound rank's whole step, keep the whole. Within it the other measure decides, the one-standard-error rule of model
selection (Breiman et al. 1984, "Classification and Regression Trees", 3.4.3; Hastie, Tibshirani &
Friedman, "The Elements of Statistical Learning", 7.10): of the configurations whose time is within
one standard error of the fastest, the cheapest; of those whose cost is within one of the cheapest,
the fastest.
"""

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

Z90 = float(ndtri(0.95))  # a 90% two-sided interval spans +-1.645 standard deviations


PRINTED_LOG = float(np.log(1.01))  # 3 significant digits: 1.005 and 1.0149 both print as 1.01


def plan_resolution_log(low: np.ndarray, high: np.ndarray, noise_log: float, step_share: np.ndarray) -> np.ndarray:
    """A plan's resolutions (module docstring): resolution_log with the profile's noise scaled to
    the steps' share of each value, and at least PRINTED_LOG."""
    return np.maximum(resolution_log(low, high, noise_log * np.clip(step_share, 0.0, 1.0)), PRINTED_LOG)


def resolution_log(low: np.ndarray, high: np.ndarray, noise_log: float | np.ndarray = 0.0) -> np.ndarray:
    """One standard error in log space: ln(high / low) / (2 x 1.645) from 90% intervals, at least
    `noise_log` (the measurement noise, a deviation of log values; one, or one per candidate)."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.log(high / low) / (2.0 * Z90)
    return np.maximum(np.where(np.isfinite(sigma) & (sigma > 0), sigma, 0.0), noise_log)


@dataclass(frozen=True)
class Resolved:
    """Points and resolutions of the candidates, indexed like the planner's arrays."""

    time_s: np.ndarray
    cost_usd: np.ndarray
    time_sigma: np.ndarray  # resolution_log of each candidate's time interval
    cost_sigma: np.ndarray  # resolution_log of each candidate's cost interval
    # candidates of error groups (id >= 0) share part of their error with every other grouped one,
    # and more with their own group's; -1: none shared. A grouped candidate's resolution against
    # one of another group (column 0) and of its own (column 1): its intervals less the shared part
    group: np.ndarray | None = None
    time_sigma_grouped: np.ndarray | None = None
    cost_sigma_grouped: np.ndarray | None = None

    def _level(self, a: int, others: np.ndarray) -> np.ndarray:
        """What a shares with each of `others`: -1 nothing, 0 another group's, 1 its own group's."""
        others = np.asarray(others, int)
        if self.group is None or self.group[a] < 0:
            return np.full(others.shape, -1)
        return np.where(self.group[others] < 0, -1, (self.group[others] == self.group[a]).astype(int))

    @staticmethod
    def _of(sigma: np.ndarray, grouped: np.ndarray | None, who: np.ndarray | int, level: np.ndarray) -> np.ndarray:
        """The resolutions of `who` against candidates it shares `level` with (Resolved._level)."""
        if grouped is None:
            return np.broadcast_to(sigma[who], np.shape(level))
        return np.where(level < 0, sigma[who], grouped[who, np.maximum(level, 0)])

    def beats_in_time(self, a: int, b: int) -> bool:
        """a is faster than b by more than a's resolution against b."""
        level = self._level(a, np.array(b))
        return bool(np.log(self.time_s[b] / self.time_s[a]) > self._of(self.time_sigma, self.time_sigma_grouped, a, level))

    def beats_in_cost(self, a: int, b: int) -> bool:
        """a is cheaper than b by more than a's resolution against b."""
        level = self._level(a, np.array(b))
        return bool(np.log(self.cost_usd[b] / self.cost_usd[a]) > self._of(self.cost_sigma, self.cost_sigma_grouped, a, level))

    def best(self, index: np.ndarray, objective: str) -> int:
        """The candidate of `index` the objective picks ('time' or 'cost'): the best one by it, or,
        among those it does not beat by its resolution, the best one by the other measure."""
        return self.best_of_ordered(self.ordered(index, objective), objective)

    def best_of_ordered(self, ordered: np.ndarray, objective: str) -> int:
        """`best` of candidates already in the objective's order (`ordered`): no sort."""
        return int(ordered[self._pick(ordered, objective, np.ones(len(ordered), bool))])

    def _measures(self, objective: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(the objective's values, the other measure's, the objective's resolutions, grouped ones)."""
        return ((self.time_s, self.cost_usd, self.time_sigma, self.time_sigma_grouped) if objective == "time"
                else (self.cost_usd, self.time_s, self.cost_sigma, self.cost_sigma_grouped))

    def ordered(self, index: np.ndarray, objective: str) -> np.ndarray:
        """`index` by the objective, the other measure breaking exact ties."""
        primary, secondary, _, _ = self._measures(objective)
        index = np.asarray(index, int)
        return index[np.lexsort((secondary[index], primary[index]))]

    def _pick(self, ordered: np.ndarray, objective: str, left: np.ndarray) -> int:
        """The tie rule's place in `ordered` (the objective's order) among those `left`: the leader
        by the objective, or, of those it does not beat by its resolution, the best by the other
        measure (ties of that: the leader's order). One pass over the window of the leader's widest
        resolution."""
        primary, secondary, sigma, grouped = self._measures(objective)
        start = int(np.argmax(left))
        leader = ordered[start]
        widest = sigma[leader] if grouped is None else max(sigma[leader], grouped[leader].max())
        end = int(np.searchsorted(primary[ordered], primary[leader] * np.exp(widest), side="right"))
        window = ordered[start:end]
        tied = left[start:end] & (np.log(primary[window] / primary[leader])
                                  <= self._of(sigma, grouped, leader, self._level(leader, window)))
        return start + int(np.argmin(np.where(tied, secondary[window], np.inf)))

    def tie_rows(self, ordered: np.ndarray, objective: str, limit: int,
                 first: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A table of at most `limit` rows by the tie rule, each the rule's pick of what is left
        (`first`, when given, is the first row whatever the rule says: the knee; it need not be in
        `ordered`), and without near-duplicates: a candidate whose time and cost neither beats nor
        is beaten by a row's merges into that row. (rows, merged counts); `ordered` in the
        objective's order."""
        ordered = np.asarray(ordered, int)
        left = ordered != first
        rows: list[int] = []
        counts: list[int] = []
        r = first
        while len(rows) < limit and (r is not None or left.any()):
            if r is None:
                at = self._pick(ordered, objective, left)
                r = int(ordered[at])
                left[at] = False
            rest = np.flatnonzero(left)
            others = ordered[rest]
            t, c = np.log(self.time_s[others] / self.time_s[r]), np.log(self.cost_usd[others] / self.cost_usd[r])
            level = self._level(r, others)  # symmetric: what r shares with each is what each shares with r
            apart = ((-t > self._of(self.time_sigma, self.time_sigma_grouped, others, level))
                     | (t > self._of(self.time_sigma, self.time_sigma_grouped, r, level))
                     | (-c > self._of(self.cost_sigma, self.cost_sigma_grouped, others, level))
                     | (c > self._of(self.cost_sigma, self.cost_sigma_grouped, r, level)))
            left[rest[~apart]] = False
            rows.append(r)
            counts.append(int(np.sum(~apart)))
            r = None
        return np.array(rows, int), np.array(counts, int)

    def collapse_front(self, front: np.ndarray, keep: int | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
        """A Pareto front (fastest first) without the points no faster than a cheaper one, nor
        cheaper than a faster one, beyond their resolution: (kept points fastest first, the front
        points each one stands for, itself first). `keep` (the plan chosen) stands for the group it
        falls in, and its neighbours are judged against it, so no shown point is within the
        resolution of the chosen one; a point resolvably cheaper, or faster, than the chosen one is
        never merged into it."""
        kept: list[list[int]] = []
        for i in map(int, front[::-1]):  # cheapest first: a point stays if it is resolvably faster
            # the chosen plan joins a cheaper group only if that group is not resolvably cheaper
            if kept and not self.beats_in_time(i, kept[-1][0]) and not (
                    i == keep and self.beats_in_cost(kept[-1][0], i)):
                kept[-1].insert(0 if i == keep else len(kept[-1]), i)
            else:
                kept.append([i])
        out: list[list[int]] = []
        for group in kept[::-1]:  # fastest first: a point stays if it is resolvably cheaper
            # the chosen plan joins a faster group only if that group is not resolvably faster
            if out and not self.beats_in_cost(group[0], out[-1][0]) and not (
                    group[0] == keep and self.beats_in_time(out[-1][0], keep)):
                out[-1] = group + out[-1] if group[0] == keep else out[-1] + group
            else:
                out.append(group)
        return np.array([g[0] for g in out], int), [np.array(g, int) for g in out]
