"""Expected makespan of a checkpointed job on preemptible VMs, and checkpoint schedules.

A job needs T seconds of work. It runs in segments: w seconds of work, then a checkpoint costing
delta (none after the last segment). If the VM dies during a segment, the segment is lost, a fresh
VM is started (restart cost R, which does not age the new VM) and work resumes from the last
checkpoint. Under a lifetime model with survival S, starting a segment of wall length c at VM age
a costs on average

  E[attempt] = (I(a + c) - I(a)) / S(a),  I(x) = int_0^x S,   P(success) = S(a + c) / S(a),

so the expected remaining time V(W, a) with W work left on a VM of age a satisfies

  V(W, a) = min_w  E[attempt] + p V(W - w, a + c) + (1 - p) (R + V(W, 0)).

Minimising over w at every (W, a) is the model-aware dynamic programme of Kadupitiya, Jadhao &
Sharma (HPDC 2020): intervals are short while the VM is young (early preemptions), long in the
quiet middle, and the job avoids straddling the 24-hour wall. Fixing w gives the expected makespan
of Young's (1974) tau = sqrt(2 delta M) or Daly's (2006, eq. 37) higher-order interval, with M the
model's mean lifetime; `none` runs the job in one piece. Work and ages live on a grid of step
`grid_s`; every result is checked against a Monte Carlo simulation of the same policy (tests).
"""

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.transient.lifetimes import LifetimeModel

POLICIES = ("dp", "young", "daly", "none")


class ScheduleError(ThriftyError):
    """A job and policy that cannot be scheduled."""


class ClusterLifetime(LifetimeModel):
    """A synchronous job on k VMs stops when the first VM dies: S_k(t) = S(t)^k."""

    def __init__(self, model: LifetimeModel, nodes: int) -> None:
        self.base, self.nodes = model, nodes
        self.name = f"{model.name} x{nodes}"
        self.t_end = model.t_end

    def cdf(self, t):
        return 1.0 - self.base.survival(t) ** self.nodes

    def pdf(self, t):
        return self.nodes * self.base.survival(t) ** (self.nodes - 1) * self.base.pdf(t)

    def params(self):
        return {**self.base.params(), "nodes": self.nodes}


def young_interval_s(checkpoint_cost_s: float, mttf_s: float) -> float:
    """tau = sqrt(2 delta M) (Young 1974)."""
    return math.sqrt(2.0 * checkpoint_cost_s * mttf_s)


def daly_interval_s(checkpoint_cost_s: float, mttf_s: float) -> float:
    """Daly (2006) eq. 37: sqrt(2 delta M) [1 + sqrt(delta/2M)/3 + (delta/2M)/9] - delta, or M."""
    if checkpoint_cost_s >= 2.0 * mttf_s:
        return mttf_s
    x = checkpoint_cost_s / (2.0 * mttf_s)
    return math.sqrt(2.0 * checkpoint_cost_s * mttf_s) * (1 + math.sqrt(x) / 3 + x / 9) - checkpoint_cost_s


@dataclass(frozen=True)
class Job:
    work_s: float
    checkpoint_cost_s: float = 60.0
    restart_cost_s: float = 60.0

    def check(self) -> None:
        for name, value in (("job length", self.work_s), ("checkpoint cost", self.checkpoint_cost_s),
                            ("restart cost", self.restart_cost_s)):
            if not math.isfinite(value) or value < 0:
                raise ScheduleError(f"{name} must be a non-negative number, got {value}")
        if self.work_s <= 0:
            raise ScheduleError("the job length must be positive")
        if self.checkpoint_cost_s >= self.work_s:
            raise ScheduleError(f"the checkpoint cost ({self.checkpoint_cost_s:g} s) is not smaller than "
                                f"the job ({self.work_s:g} s)")


class Solver:
    """Value tables V(W, a) for one lifetime model, job costs and grid; policies share them."""

    def __init__(self, model: LifetimeModel, job: Job, *, max_work_s: float | None = None,
                 grid_s: float | None = None) -> None:
        job.check()
        self.model, self.job = model, job
        top = max(max_work_s or job.work_s, job.work_s)
        self.grid_s = grid_s or max(top / 240.0, 60.0)
        self.steps = int(math.ceil(top / self.grid_s - 1e-9))
        horizon = model.t_end if math.isfinite(model.t_end) else max(20 * model.mean(), top * 4)
        self.ages = np.arange(0.0, horizon + self.grid_s, self.grid_s)
        fine = np.linspace(0.0, horizon + self.grid_s * (self.steps + 2) + job.checkpoint_cost_s, 20_001)
        survival = model.survival(fine)
        self._fine, self._survival_fine = fine, survival
        self._integral = np.concatenate([[0.0], np.cumsum(0.5 * (survival[1:] + survival[:-1]) * np.diff(fine))])
        self.mttf_s = float(self._integral[-1])  # S = 0 past t_end, so this is the mean lifetime

    def survival(self, t) -> np.ndarray:
        return np.interp(t, self._fine, self._survival_fine, right=0.0)

    def integral(self, t) -> np.ndarray:
        return np.interp(t, self._fine, self._integral)

    def segment_cost(self, k: int, j: int) -> float:
        return k * self.grid_s + (self.job.checkpoint_cost_s if k < j else 0.0)

    def solve(self, fixed_steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """V[j, i] (work j grid steps, age index i) and the chosen segment K[j, i]; with
        `fixed_steps`, every segment is that long (the last one shorter) instead of optimised."""
        n_age = len(self.ages)
        value = np.zeros((self.steps + 1, n_age))
        choice = np.zeros((self.steps + 1, n_age), dtype=np.int32)
        s_age = self.survival(self.ages)
        alive = s_age > 1e-12
        i_age = self.integral(self.ages)
        restart = self.job.restart_cost_s
        for j in range(1, self.steps + 1):
            ks = [min(fixed_steps, j)] if fixed_steps else range(1, j + 1)
            best_fresh, best_k_fresh = math.inf, ks[0] if fixed_steps else 1
            rows = []
            for k in ks:
                c = self.segment_cost(k, j)
                end = self.ages + c
                p = np.where(alive, self.survival(end) / np.where(alive, s_age, 1.0), 0.0)
                attempt = np.where(alive, (self.integral(end) - i_age) / np.where(alive, s_age, 1.0), 0.0)
                future = np.interp(end, self.ages, value[j - k], right=0.0)
                rows.append((k, p, attempt + p * future))
                if p[0] > 0:
                    fresh = (attempt[0] + p[0] * future[0] + (1 - p[0]) * restart) / p[0]
                    if fresh < best_fresh:
                        best_fresh, best_k_fresh = fresh, k
            if not math.isfinite(best_fresh):
                raise ScheduleError(f"no segment of this job can finish on a fresh VM (the model's "
                                    f"longest lifetime is {self.model.t_end / 3600:.2f} h)")
            total = np.full(n_age, np.inf)
            pick = np.zeros(n_age, dtype=np.int32)
            for k, p, partial in rows:
                candidate = partial + (1 - p) * (restart + best_fresh)
                better = candidate < total
                total, pick = np.where(better, candidate, total), np.where(better, k, pick)
            total[0], pick[0] = best_fresh, best_k_fresh
            value[j], choice[j] = total, pick
        return value, choice


@dataclass(frozen=True)
class Schedule:
    policy: str
    intervals_s: list[float]  # work between checkpoints on the first VM if it is not preempted
    expected_makespan_s: float
    overhead_fraction: float
    grid_s: float
    mttf_s: float
    choice: np.ndarray
    solver: Solver

    def to_dict(self) -> dict:
        return {"policy": self.policy, "intervals_s": self.intervals_s,
                "expected_makespan_s": self.expected_makespan_s,
                "overhead_fraction": self.overhead_fraction, "grid_s": self.grid_s,
                "mttf_s": self.mttf_s, "checkpoints": max(len(self.intervals_s) - 1, 0)}


def fixed_interval_steps(policy: str, solver: Solver, mttf_s: float | None = None) -> int | None:
    """Segment length in grid steps of a fixed-interval policy (None for the DP); Young and Daly
    use `mttf_s`, by default the model's mean lifetime."""
    job = solver.job
    if policy == "dp":
        return None
    if policy == "none":
        return solver.steps
    mttf = mttf_s or solver.mttf_s
    tau = young_interval_s(job.checkpoint_cost_s, mttf) if policy == "young" else \
        daly_interval_s(job.checkpoint_cost_s, mttf)
    return max(1, int(round(tau / solver.grid_s)))


def plan_schedule(model: LifetimeModel, job: Job, policy: str = "dp", vm_age_s: float = 0.0,
                  grid_s: float | None = None, mttf_s: float | None = None) -> Schedule:
    """Expected makespan of `job` started on a VM of age `vm_age_s` under `policy` (Young and
    Daly computed with `mttf_s`, default the model's mean lifetime)."""
    if policy not in POLICIES:
        raise ScheduleError(f"unknown checkpoint policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if vm_age_s < 0 or not math.isfinite(vm_age_s):
        raise ScheduleError(f"VM age must be a non-negative number, got {vm_age_s}")
    if vm_age_s >= model.t_end:
        raise ScheduleError(f"a VM of age {vm_age_s / 3600:.2f} h is past the model's longest lifetime")
    if policy == "none" and job.work_s > model.t_end:
        raise ScheduleError(f"a {job.work_s / 3600:.2f} h job without checkpoints cannot finish: VMs live "
                            f"at most {model.t_end / 3600:.2f} h under this model")
    solver = Solver(model, job, grid_s=grid_s)
    value, choice = solver.solve(fixed_interval_steps(policy, solver, mttf_s))
    expected = float(np.interp(vm_age_s, solver.ages, value[solver.steps]))
    return Schedule(policy, first_vm_intervals(solver, choice, vm_age_s), expected,
                    expected / job.work_s - 1.0, solver.grid_s, solver.mttf_s, choice, solver)


def _age_index(solver: Solver, age) -> np.ndarray:
    return np.clip(np.rint(np.asarray(age) / solver.grid_s).astype(int), 0, len(solver.ages) - 1)


def first_vm_intervals(solver: Solver, choice: np.ndarray, vm_age_s: float) -> list[float]:
    j, age, out = solver.steps, vm_age_s, []
    while j > 0:
        k = int(choice[j, _age_index(solver, age)]) or 1
        out.append(k * solver.grid_s)
        age += solver.segment_cost(k, j)
        j -= k
    return out


class Lifetimes(Protocol):
    def sample(self, rng: np.random.Generator, size: int, age: float = 0.0) -> np.ndarray: ...


def run_job(schedule: Schedule, age: np.ndarray, death: np.ndarray, draw, leave=None,
            steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Run the schedule's job once per entry (VM `age`, its lifetime `death`), in place; returns
    the elapsed times and the work steps left. `draw(n)` gives lifetimes of fresh VMs after
    preemptions; `leave(idx, remaining, next_cost, elapsed)`, if given, marks runs that stop
    before their next segment (e.g. to move to on-demand VMs). `steps` (default: the schedule's
    job) is the work in grid steps: the DP table serves every shorter job too."""
    solver, job = schedule.solver, schedule.solver.job
    remaining = np.full(age.shape, solver.steps if steps is None else steps)
    elapsed = np.zeros(age.shape)
    active = remaining > 0
    while active.any():
        idx = np.nonzero(active)[0]
        j = remaining[idx]
        k = np.minimum(np.maximum(schedule.choice[j, _age_index(solver, age[idx])], 1), j)
        cost = k * solver.grid_s + np.where(k < j, job.checkpoint_cost_s, 0.0)
        if leave is not None:
            stop = leave(idx, j, cost, elapsed[idx])
            active[idx[stop]] = False
            idx, k, cost = idx[~stop], k[~stop], cost[~stop]
        ok = age[idx] + cost <= death[idx]
        done, lost = idx[ok], idx[~ok]
        elapsed[done] += cost[ok]
        age[done] += cost[ok]
        remaining[done] -= k[ok]
        elapsed[lost] += death[lost] - age[lost] + job.restart_cost_s
        age[lost] = 0.0
        death[lost] = draw(lost.size)
        active &= remaining > 0
    return elapsed, remaining


def simulate(schedule: Schedule, rng: np.random.Generator, runs: int = 20_000, vm_age_s: float = 0.0,
             source: Lifetimes | None = None) -> np.ndarray:
    """Makespans of `runs` simulated executions following the schedule's decisions. VM lifetimes
    come from `source` (default: the schedule's own model), the first VM's conditional on having
    reached `vm_age_s`."""
    source = source or schedule.solver.model
    age = np.full(runs, float(vm_age_s))
    death = source.sample(rng, runs, age=vm_age_s)
    return run_job(schedule, age, death, lambda n: source.sample(rng, n))[0]


@lru_cache(maxsize=64)
def _overhead_table(model: LifetimeModel, nodes: int, checkpoint_cost_s: float, restart_cost_s: float,
                    max_work_s: float, grid_s: float) -> tuple[np.ndarray, np.ndarray]:
    cluster = model if nodes == 1 else ClusterLifetime(model, nodes)
    solver = Solver(cluster, Job(max_work_s, checkpoint_cost_s, restart_cost_s), grid_s=grid_s)
    value, _ = solver.solve()
    work = np.arange(1, solver.steps + 1) * solver.grid_s
    return work, value[1:, 0] / work - 1.0


def expected_overhead_fraction(model: LifetimeModel, work_s, nodes, *, checkpoint_cost_s: float = 60.0,
                               restart_cost_s: float = 60.0, max_work_s: float = 48 * 3600.0,
                               grid_s: float = 900.0) -> np.ndarray:
    """DP-schedule overhead E[makespan] / T - 1 for jobs of `work_s` on `nodes` fresh VMs,
    vectorised: DP tables for node counts that are powers of two (cached), interpolated in T and
    in log2(nodes); below one grid step, one uncheckpointed segment; beyond `max_work_s`, the
    overhead at `max_work_s`."""
    work = np.asarray(work_s, float)
    nodes = np.broadcast_to(np.asarray(nodes, float), work.shape)
    level = np.log2(np.maximum(nodes, 1.0))
    low, high = np.floor(level), np.ceil(level)
    weight = level - low
    out = np.zeros(work.shape)
    for exponent in np.unique(np.concatenate([low.ravel(), high.ravel()])):
        k = int(2 ** exponent)
        table = _overhead_at(model, k, work, checkpoint_cost_s, restart_cost_s, max_work_s, grid_s)
        # weight is 0 when low == high, so an integer level takes its own table once
        out += (np.where(low == exponent, 1 - weight, 0.0) + np.where(high == exponent, weight, 0.0)) * table
    return out


def _overhead_at(model: LifetimeModel, nodes: int, work: np.ndarray, checkpoint_cost_s: float,
                 restart_cost_s: float, max_work_s: float, grid_s: float) -> np.ndarray:
    cluster = model if nodes == 1 else ClusterLifetime(model, nodes)
    grid, overhead = _overhead_table(model, nodes, checkpoint_cost_s, restart_cost_s, max_work_s, grid_s)
    w = np.maximum(work, 1e-9)
    short = np.minimum(w, grid[0])
    p = cluster.survival(short)
    single = (_integral_to(cluster, short) + (1 - p) * restart_cost_s) / np.maximum(p, 1e-300) / short - 1
    return np.where(w < grid[0], single, np.interp(w, grid, overhead))


def _integral_to(model: LifetimeModel, t: np.ndarray) -> np.ndarray:
    """int_0^t S for short t (trapezoid on 64 points each)."""
    x = np.linspace(0.0, 1.0, 64) * t[..., None]
    return np.trapezoid(model.survival(x), x, axis=-1)
