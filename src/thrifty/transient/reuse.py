# SPDX-License-Identifier: MIT
"""Run the next job on the VM we have (age a) or on a fresh one?

With the DP schedule's value table V(T, a) (transient.schedule), reuse when V(T, a) <= V(T, 0) +
the fresh VM's start-up time. Under a bathtub model a middle-aged VM is the safest place to be
and one close to the 24-hour wall the worst; `threshold_table` lists, per job length, the ages at
which a fresh VM is better. `simulate_campaign` runs a back-to-back series of jobs under the
always-reuse, always-fresh and model-based policies, on lifetimes from a model or real ones.
"""

from dataclasses import dataclass

import numpy as np

from thrifty.transient.lifetimes import HOUR, LifetimeModel
from thrifty.transient.schedule import Job, Schedule, ScheduleError, Solver
from thrifty.transient.simulation import LifetimeSampler, simulate_runs

REUSE_POLICIES = ("always-reuse", "always-fresh", "model")
# The DP's time grows with the square of its grid steps of work: on the table's 5-minute grid 200 h
# (2,400 steps) took 20 s on this 2-core machine, 400 h 81 s, and 1e9 h asked for 89 GiB. Past a
# few days a job spans many VM lifetimes (at most 24 h each on GCP) and the table stops changing
# with its length.
MAX_REUSE_GRID_STEPS = 2400


@dataclass(frozen=True)
class ReuseRule:
    """Per job length: reuse the VM unless its age falls in one of `fresh_ranges_s`. `job_s` is the
    job as asked; `solved_s` the nearest length on the DP's grid, which the ranges are for."""

    job_s: float
    fresh_ranges_s: list[tuple[float, float]]
    solved_s: float

    def to_dict(self) -> dict:
        """Ages in hours; a range with no end (a model without a longest lifetime) ends at inf."""
        return {"job_hours": self.job_s / HOUR, "solved_job_hours": self.solved_s / HOUR,
                "fresh_vm_better_at_ages_h": [[a / HOUR, b / HOUR] for a, b in self.fresh_ranges_s]}


def _ranges(ages: np.ndarray, mask: np.ndarray, step: float, last: float) -> list[tuple[float, float]]:
    """The runs of `mask` as (first age, last age); a run to the table's end ends at `last`."""
    out, start = [], None
    for age, flag in zip(ages, mask, strict=True):
        if flag and start is None:
            start = age
        if not flag and start is not None:
            out.append((float(start), float(age - step)))
            start = None
    if start is not None:
        out.append((float(start), last))
    return out


def solve_reuse(model: LifetimeModel, job_hours: list[float], checkpoint_cost_s: float = 60.0,
                restart_cost_s: float = 60.0, startup_s: float = 0.0,
                grid_s: float = 300.0) -> tuple[Solver, np.ndarray, np.ndarray, list[ReuseRule]]:
    """One DP for the longest job gives V for every shorter one on the same grid."""
    if max(job_hours) * HOUR / grid_s > MAX_REUSE_GRID_STEPS:
        raise ScheduleError(f"a {max(job_hours):g} h job is beyond the reuse table (at most "
                            f"{MAX_REUSE_GRID_STEPS * grid_s / HOUR:g} h on its {grid_s / 60:g}-minute grid: "
                            "its DP grows with the square of the job's length)")
    longest = max(job_hours) * HOUR
    solver = Solver(model, Job(longest, checkpoint_cost_s, restart_cost_s), grid_s=grid_s)
    value, choice = solver.solve()
    # no VM lives past t_end: the table's ages beyond it (its last grid step) hold no decision, and
    # their values, read off the survival's end, moved with the longest job asked about (a 1 h job's
    # range ended at 24.83 h alone and at 24.75 h beside a 20 h one on gcp-2019). Without a t_end
    # (exponential, Weibull) the table ends where the longest job puts it, and a range reaching its
    # end has none (inf)
    alive = solver.ages < model.t_end
    last = float(model.t_end)
    rules = []
    for hours in job_hours:
        j = max(int(round(hours * HOUR / solver.grid_s)), 1)  # a job is at least one step (36 s was solved as 0)
        fresh_better = value[j] > value[j, 0] + startup_s
        rules.append(ReuseRule(hours * HOUR, _ranges(solver.ages[alive], fresh_better[alive], solver.grid_s, last),
                               j * solver.grid_s))
    return solver, value, choice, rules


def simulate_campaign(model: LifetimeModel, source: LifetimeSampler, job_hours: float, jobs: int, policy: str,
                      rng: np.random.Generator, runs: int = 4000, checkpoint_cost_s: float = 60.0,
                      restart_cost_s: float = 60.0, startup_s: float = 60.0, grid_s: float = 300.0) -> np.ndarray:
    """Total time of `jobs` back-to-back jobs of `job_hours`, per simulated run. Checkpoints follow
    the DP schedule of `model`; VM lifetimes come from `source`; a fresh VM costs `startup_s`."""
    solver, value, choice, _ = solve_reuse(model, [job_hours], checkpoint_cost_s, restart_cost_s,
                                           startup_s, grid_s)
    j = max(int(round(job_hours * HOUR / solver.grid_s)), 1)
    schedule = Schedule("dp", [], float("nan"), float("nan"), solver.grid_s, solver.mttf_s, choice, solver)
    age = np.zeros(runs)
    death = source.sample(rng, runs)
    total = np.zeros(runs)
    for _ in range(jobs):
        if policy == "always-fresh":
            fresh = np.ones(runs, bool)
        elif policy == "always-reuse":
            fresh = np.zeros(runs, bool)
        else:
            index = np.clip(np.rint(age / solver.grid_s).astype(int), 0, len(solver.ages) - 1)
            fresh = value[j, index] > value[j, 0] + startup_s
        fresh |= age >= death  # a VM that has died meanwhile is replaced in any case
        n = int(fresh.sum())
        age[fresh] = 0.0
        death[fresh] = source.sample(rng, n)
        total[fresh] += startup_s
        total += simulate_runs(schedule, age, death, lambda m: source.sample(rng, m), steps=j)[0]
    return total
