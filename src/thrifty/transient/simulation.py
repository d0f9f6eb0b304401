"""Monte Carlo execution of a checkpoint schedule: VMs with drawn lifetimes run the schedule's
decisions (segment lengths by work left and VM age), are preempted, restart, and finish. It checks
the DP's expected makespan (tests), and runs the spot and reuse policies on recorded lifetimes."""

from typing import Protocol

import numpy as np

from thrifty.transient.schedule import Schedule, age_index


class LifetimeSampler(Protocol):
    """Anything that draws VM lifetimes: a LifetimeModel, or the recorded data (EmpiricalLifetimes)."""

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
        k = np.minimum(np.maximum(schedule.choice[j, age_index(solver, age[idx])], 1), j)
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
             source: LifetimeSampler | None = None) -> np.ndarray:
    """Makespans of `runs` simulated executions following the schedule's decisions. VM lifetimes
    come from `source` (default: the schedule's own model), the first VM's conditional on having
    reached `vm_age_s`."""
    source = source or schedule.solver.model
    age = np.full(runs, float(vm_age_s))
    death = source.sample(rng, runs, age=vm_age_s)
    return run_job(schedule, age, death, lambda n: source.sample(rng, n))[0]
