# SPDX-License-Identifier: MIT
"""Expected makespan of a checkpointed job on preemptible VMs, and checkpoint schedules.

A job needs T seconds of work. It runs in segments: w seconds of work, then a checkpoint costing
delta (none after the last segment). If the VM dies during a segment, the segment is lost, a fresh
VM is started (restart cost R, which does not age the new VM) and work resumes from the last
checkpoint. Under a lifetime model with survival S, starting a segment of wall length c at VM age
a costs on average

  E[attempt] = (I(a + c) - I(a)) / S(a),  I(x) = int_0^x S,   P(success) = S(a + c) / S(a),

so the expected remaining time V(W, a) with W work left on a VM of age a satisfies

  V(W, a) = min_w  E[attempt] + p V(W - w, a + c) + (1 - p) (R + V(W, 0)).

A restart that runs on the new VM (`Job.restart_ages_vm`: the job's process starts there, loads
its checkpoint, and the VM ages meanwhile, as under `thrifty run`) costs a fresh VM E[min(T, R)]
/ S(R) (restarts until one survives it) and resumes the work at age R, so R + V(W, 0) becomes
I(R) / S(R) + V(W, R); the job's first start pays it too.

Minimising over w at every (W, a) is the model-aware dynamic programme of Kadupitiya, Jadhao &
Sharma (HPDC 2020): intervals are short while the VM is young (early preemptions), long in the
quiet middle, and the job avoids straddling the 24-hour wall. Fixing w gives the expected makespan
of Young's (1974) tau = sqrt(2 delta M) or Daly's (2006, eq. 37) higher-order interval, with M the
model's mean lifetime; `none` runs the job in one piece. Work and ages live on a grid of step
`grid_s`; every result is checked against a Monte Carlo simulation of the same policy (transient.simulation,
tests); transient.overhead turns the DP into the planner's overhead tables.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.transient.lifetimes import LifetimeModel

CHECKPOINT_POLICIES = ("dp", "young", "daly", "none")


class ScheduleError(ThriftyError):
    """A job and policy that cannot be scheduled."""


# The work grid's step: the job in GRID_STEPS steps, but for a model whose VMs live at most t_end
# never coarser than t_end / LIFETIME_GRID_PARTS, nor finer than a minute. Sized by the job alone, a
# 1,000 h job's step was 4.2 h on VMs that live at most 24.8 h: the DP and Young both ran 4.2 h
# segments (20.5% overhead against 3.2% on a 600 s grid), and 300 h read 5.4%. On the bundled GCP
# model the DP's overhead moves by 0.3 points from 1,500 s to 300 s (100 h job). A bounded model's
# ages end at t_end, so its DP's time grows with the square of the steps, and a job needing more
# than MAX_GRID_STEPS of them is refused (longest_job_s). A model with no longest lifetime
# (exponential, Weibull) tabulates ages out to many mean lifetimes, which a fine step would
# multiply by the job's steps (a 200 h exponential took 63 s, not 0.3): it keeps the job's step.
GRID_STEPS, LIFETIME_GRID_PARTS, MAX_GRID_STEPS, MIN_GRID_S = 240, 120, 2400, 60.0
PLANNING_LIFETIMES = 4  # planning_horizon_s


def _lifetime_grid_s(model: LifetimeModel) -> float:
    """The coarsest step that resolves a bounded model's lifetimes (inf for an unbounded one)."""
    return max(model.t_end / LIFETIME_GRID_PARTS, MIN_GRID_S) if math.isfinite(model.t_end) else math.inf


def default_grid_s(model: LifetimeModel, work_s: float) -> float:
    """The work grid's step for a job of `work_s` under `model` (constants above), shrunk to divide the
    job into whole steps: on a step that did not, the job was solved rounded up (a new user's pass: a
    72 s job on the one-minute step was solved as 120 s and read 67% overhead, 0.51 h 4.1% against
    0.5 h's 2.7%)."""
    step = min(max(work_s / GRID_STEPS, MIN_GRID_S), _lifetime_grid_s(model))
    return work_s / max(math.ceil(work_s / step - 1e-9), 1)


def planning_horizon_s(model: LifetimeModel) -> float:
    """The work a job's first VM is planned for: PLANNING_LIFETIMES of the model's longest lifetimes
    (of its mean ones where it has no longest; always within longest_job_s). The first VM lives one
    at most, so a longer job plans it about alike; the DP's time grows with the square of the work,
    and a runner replans while its job runs (on 2 cores a 300 h plan took 2 s, 30 model hours of
    bench_faults' compressed clock)."""
    return PLANNING_LIFETIMES * (model.t_end if math.isfinite(model.t_end) else model.mean())


def longest_job_s(model: LifetimeModel) -> float:
    """The longest job the default grid schedules: MAX_GRID_STEPS steps of _lifetime_grid_s (no
    limit for a model with no longest lifetime, whose step follows the job)."""
    return MAX_GRID_STEPS * _lifetime_grid_s(model)


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


def with_young_tail(planned_s: list[float], young_s: float) -> list[float]:
    """A planned schedule's intervals for a job that may outlast its stated work: the plan's last
    interval ends at the stated end, which needs no checkpoint, so from then on the job is asked at
    Young's interval (the last entry repeats). Without the tail a job planned as one interval was
    asked for no checkpoint however long it ran (0 checkpoints in 16 h of a job stated as 0.5 h)."""
    return [*planned_s[:-1], max(planned_s[-1], young_s), young_s]


def planned_intervals_s(model: LifetimeModel, job: "Job", vm_age_s: float = 0.0) -> list[float]:
    """Work between checkpoint requests on the job's first VM, started at `vm_age_s`: the DP's for
    the job's work up to planning_horizon_s, then Young's interval for as long as it runs
    (with_young_tail). What thrifty run (transient.adaptive) and md sweep's tasks
    (md.campaign.checkpoint_schedule) ask their jobs for."""
    capped = replace(job, work_s=min(job.work_s, planning_horizon_s(model)))
    planned = plan_schedule(model, capped, "dp", vm_age_s).intervals_s
    return with_young_tail(planned, young_interval_s(job.checkpoint_cost_s, model.mean()))


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
    restart_ages_vm: bool = False  # the restart runs on the new VM (and the first start pays it too)

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
                 grid_s: float | None = None, start_age_s: float | None = None) -> None:
        """With `start_age_s`, only the VM ages a job started at that age can reach are tabulated:
        a segment of k grid steps ages the VM by k g + delta <= k (m + 2) g (delta = (m + f) g, the
        interpolation reads one index further), and a restart begins at age 0 <= start age."""
        job.check()
        self.model, self.job = model, job
        self.resume_age_s = job.restart_cost_s if job.restart_ages_vm else 0.0  # work resumes at this VM age
        top = max(max_work_s or job.work_s, job.work_s)
        if grid_s is None and top > longest_job_s(model) * (1 + 1e-9):
            raise ScheduleError(
                f"a {top / 3600:.4g} h job is longer than the {longest_job_s(model) / 3600:.4g} h this lifetime "
                f"model's checkpoint schedule takes ({MAX_GRID_STEPS:,} steps of {_lifetime_grid_s(model) / 60:.3g} "
                f"min, to resolve VMs that live at most {model.t_end / 3600:.3g} h): give at most that")
        self.grid_s = grid_s or default_grid_s(model, top)
        self.steps = int(math.ceil(top / self.grid_s - 1e-9))
        horizon = model.t_end if math.isfinite(model.t_end) else max(20 * model.mean(), top * 4)
        ages = np.arange(0.0, horizon + self.grid_s, self.grid_s)
        self.max_age_s = math.inf  # ages beyond the table: the VM is dead (S = 0 past t_end)
        if start_age_s is not None:
            work_from = start_age_s + self.resume_age_s
            reach = work_from + self.steps * (job.checkpoint_cost_s // self.grid_s + 2) * self.grid_s
            if reach + self.grid_s < ages[-1]:
                ages = ages[ages <= reach + self.grid_s]
                self.max_age_s = float(ages[-1])  # beyond: not solved, an error to ask about
        self.ages = ages
        fine = np.linspace(0.0, horizon + self.grid_s * (self.steps + 2) + job.checkpoint_cost_s, 20_001)
        survival = model.survival(fine)
        self._fine, self._survival_fine = fine, survival
        self._integral = np.concatenate([[0.0], np.cumsum(0.5 * (survival[1:] + survival[:-1]) * np.diff(fine))])
        self.mttf_s = float(self._integral[-1])  # S = 0 past t_end, so this is the mean lifetime
        if job.restart_ages_vm and not float(self.survival(job.restart_cost_s)) > 1e-12:
            raise ScheduleError(f"no VM survives a restart of {job.restart_cost_s / 3600:.2f} h under this model")

    def restart_penalty_s(self) -> float:
        """What a preemption costs before work resumes at `resume_age_s`: R on a VM it does not age,
        else E[min(T, R)] / S(R) = I(R) / S(R) (fresh VMs until one survives the restart)."""
        restart = self.job.restart_cost_s
        if not self.job.restart_ages_vm:
            return restart
        return float(self.integral(restart) / self.survival(restart))

    def survival(self, t) -> np.ndarray:
        return np.interp(t, self._fine, self._survival_fine, right=0.0)

    def integral(self, t) -> np.ndarray:
        return np.interp(t, self._fine, self._integral)

    def segment_cost(self, k: int, j: int) -> float:
        return k * self.grid_s + (self.job.checkpoint_cost_s if k < j else 0.0)

    def solve(self, fixed_steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """V[j, i] (work j grid steps, age index i) and the chosen segment K[j, i]; with
        `fixed_steps`, every segment is that long (the last one shorter) instead of optimised.

        Vectorised over segments k and ages: a checkpointed segment ends at age a_i + k g + delta,
        i.e. at grid index i + k + m plus a fixed fraction f (delta = (m + f) g), so the future
        value V[j - k] there is a shifted read of its row (linear interpolation, 0 past the
        model's last age, as np.interp(..., right=0) gives). A preemption continues at
        restart_penalty_s() + V(W, a0), a0 = resume_age_s, which depends on itself: V(W, a0) is
        the fixed point min_k (E[attempt] + p V(W - k, .) + (1 - p) penalty) / p at age a0."""
        steps, n_age, g = self.steps, len(self.ages), self.grid_s
        delta = self.job.checkpoint_cost_s
        penalty, resume_age = self.restart_penalty_s(), self.resume_age_s

        def attempt(cost: np.ndarray, at: np.ndarray = self.ages) -> tuple[np.ndarray, np.ndarray]:
            """P(success) and E[attempt] of segments of wall length cost[k] at every age `at`."""
            s_at = self.survival(at)
            alive = s_at > 1e-12
            safe = np.where(alive, s_at, 1.0)
            end = at[None, :] + cost[:, None]
            p = np.where(alive, self.survival(end) / safe, 0.0)
            return p, np.where(alive, (self.integral(end) - self.integral(at)) / safe, 0.0)

        ks_all = np.arange(1, steps + 1)
        p_ck, a_ck = attempt(ks_all * g + delta)  # segments followed by a checkpoint
        p_last, a_last = attempt(ks_all * g)  # the final segment (no checkpoint)
        m, f = divmod(delta / g, 1.0)
        m = int(m)
        # from the resume age (a0 = 0 is column 0; a restart on the VM: anywhere between columns)
        p0_ck, a0_ck = attempt(ks_all * g + delta, np.array([resume_age]))
        p0_last, a0_last = attempt(ks_all * g, np.array([resume_age]))
        m0, f0 = divmod((resume_age + delta) / g, 1.0)
        m0 = int(m0)
        value = np.zeros((steps + 1, n_age + steps + max(m, m0) + 2))  # zero-padded beyond the last age
        choice = np.zeros((steps + 1, n_age), dtype=np.int32)
        cols = np.arange(n_age)

        def shifted(rows: np.ndarray, at: np.ndarray, frac: float) -> np.ndarray:
            return (1 - frac) * value[rows, at] + (frac * value[rows, at + 1] if frac else 0.0)

        for j in range(1, steps + 1):
            if fixed_steps is None:
                ks, last = np.arange(1, j), True
            else:
                ks, last = np.arange(fixed_steps, fixed_steps + 1 if fixed_steps < j else fixed_steps), fixed_steps >= j
            rows_p, rows_partial = ([p_last[j - 1][None, :]], [a_last[j - 1][None, :]]) if last else ([], [])
            rows_p0, rows_partial0 = ([p0_last[j - 1]], [a0_last[j - 1]]) if last else ([], [])
            if ks.size:
                future = shifted((j - ks)[:, None], cols[None, :] + ks[:, None] + m, f)
                p = p_ck[ks - 1]
                rows_p.insert(0, p)
                rows_partial.insert(0, a_ck[ks - 1] + p * future)
                p0 = p0_ck[ks - 1, 0]
                rows_p0.insert(0, p0)
                rows_partial0.insert(0, a0_ck[ks - 1, 0] + p0 * shifted(j - ks, ks + m0, f0))
            k_all = np.concatenate([ks, [j]]) if last else ks
            p, partial = np.concatenate(rows_p), np.concatenate(rows_partial)
            p0, partial0 = np.concatenate(rows_p0), np.concatenate(rows_partial0)
            with np.errstate(divide="ignore", invalid="ignore"):
                fresh = np.where(p0 > 0, (partial0 + (1 - p0) * penalty) / p0, np.inf)
            best = int(np.argmin(fresh))
            if not math.isfinite(fresh[best]):
                longest = (f"the model's longest lifetime is {self.model.t_end / 3600:.2f} h"
                           if math.isfinite(self.model.t_end) else  # no bound: the segments outlive it
                           f"under this model no VM lives that long: its mean lifetime is "
                           f"{self.model.mean() / 3600:.2f} h")
                raise ScheduleError(f"no segment of this job can finish on a fresh VM ({longest})")
            total = partial + (1 - p) * (penalty + fresh[best])
            pick = np.argmin(total, axis=0)
            value[j, :n_age] = total[pick, cols]
            choice[j] = k_all[pick]
            if resume_age == 0.0:  # column 0 is the resume age: its fixed point exactly
                value[j, 0], choice[j, 0] = fresh[best], k_all[best]
        return value[:, :n_age], choice

    def expected_s(self, value: np.ndarray, vm_age_s: float) -> float:
        """E[makespan] of the whole job from a VM of age `vm_age_s` (solve's `value`); a restart on
        the VM is paid at the first start too: E[min(T, a + R) - a | T > a] then V(W, a + R), or
        a preemption during it."""
        whole = value[self.steps]
        if not self.job.restart_ages_vm:
            return float(np.interp(vm_age_s, self.ages, whole))
        restart = self.job.restart_cost_s
        alive = float(self.survival(vm_age_s))
        through = float(self.survival(vm_age_s + restart)) / alive  # P(the first start completes)
        during = float(self.integral(vm_age_s + restart) - self.integral(vm_age_s)) / alive
        resumed = self.restart_penalty_s() + float(np.interp(self.resume_age_s, self.ages, whole))
        return during + through * float(np.interp(vm_age_s + restart, self.ages, whole)) + (1 - through) * resumed


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
    Daly computed with `mttf_s`, default the model's mean lifetime); with a restart that ages the
    VM, the first start pays it too and the intervals begin after it."""
    if policy not in CHECKPOINT_POLICIES:
        raise ScheduleError(f"unknown checkpoint policy {policy!r}; choose one of {', '.join(CHECKPOINT_POLICIES)}")
    if vm_age_s < 0 or not math.isfinite(vm_age_s):
        raise ScheduleError(f"VM age must be a non-negative number, got {vm_age_s}")
    if vm_age_s >= model.t_end:
        raise ScheduleError(f"a VM of age {vm_age_s / 3600:.2f} h is past the model's longest lifetime")
    if policy == "none" and job.work_s > model.t_end:
        raise ScheduleError(f"a {job.work_s / 3600:.2f} h job without checkpoints cannot finish: VMs live "
                            f"at most {model.t_end / 3600:.2f} h under this model")
    solver = Solver(model, job, grid_s=grid_s, start_age_s=vm_age_s)
    value, choice = solver.solve(fixed_interval_steps(policy, solver, mttf_s))
    expected = solver.expected_s(value, vm_age_s)
    work_from = vm_age_s + (job.restart_cost_s if job.restart_ages_vm else 0.0)
    return Schedule(policy, first_vm_intervals(solver, choice, work_from), expected,
                    expected / job.work_s - 1.0, solver.grid_s, solver.mttf_s, choice, solver)


def age_index(solver: Solver, age) -> np.ndarray:
    age = np.asarray(age)
    if np.any(age > solver.max_age_s + solver.grid_s / 2):
        raise ScheduleError(f"VM age {float(np.max(age)) / 3600:.2f} h is beyond the ages this schedule "
                            f"was solved for ({solver.max_age_s / 3600:.2f} h)")
    return np.clip(np.rint(age / solver.grid_s).astype(int), 0, len(solver.ages) - 1)


def first_vm_intervals(solver: Solver, choice: np.ndarray, vm_age_s: float) -> list[float]:
    """Work between checkpoints on the first VM if it lives on, up to the model's longest lifetime
    (past it no VM is alive, so later intervals would never run on this VM)."""
    j, age, out = solver.steps, vm_age_s, []
    while j > 0 and age < solver.model.t_end:
        k = int(choice[j, age_index(solver, age)]) or 1
        out.append(k * solver.grid_s)
        age += solver.segment_cost(k, j)
        j -= k
    return out
