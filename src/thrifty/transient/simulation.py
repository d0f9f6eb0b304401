# SPDX-License-Identifier: MIT
"""Monte Carlo execution of a checkpoint schedule: VMs with drawn lifetimes run the schedule's
decisions (segment lengths by work left and VM age), are preempted, restart (on a VM the restart
does not age, or on the new VM itself), and finish. It checks the DP's expected makespan (tests),
and runs the spot and reuse policies on recorded lifetimes."""

from typing import Protocol

import numpy as np

from thrifty.transient.schedule import Job, Schedule, age_index


class LifetimeSampler(Protocol):
    """Anything that draws VM lifetimes: a LifetimeModel, or the recorded data (EmpiricalLifetimes)."""

    def sample(self, rng: np.random.Generator, size: int, age: float = 0.0) -> np.ndarray: ...


def simulate_runs(schedule: Schedule, age: np.ndarray, death: np.ndarray, draw, leave=None,
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
        elapsed[lost] += death[lost] - age[lost]
        age[lost] = 0.0
        death[lost] = draw(lost.size)
        restart(job, lost, age, death, elapsed, draw)
        active &= remaining > 0
    return elapsed, remaining


def restart(job: Job, idx: np.ndarray, age: np.ndarray, death: np.ndarray, elapsed: np.ndarray, draw) -> None:
    """Runs `idx` start again, in place: R on a VM it does not age; or R on the VM itself, with
    fresh VMs (drawn) for as long as one dies during it (Job.restart_ages_vm)."""
    if not job.restart_ages_vm:
        elapsed[idx] += job.restart_cost_s
        return
    while idx.size:
        dies = age[idx] + job.restart_cost_s > death[idx]
        ok, again = idx[~dies], idx[dies]
        elapsed[ok] += job.restart_cost_s
        age[ok] += job.restart_cost_s
        elapsed[again] += death[again] - age[again]
        age[again] = 0.0
        death[again] = draw(again.size)
        idx = again


def simulate(schedule: Schedule, rng: np.random.Generator, runs: int = 20_000, vm_age_s: float = 0.0,
             source: LifetimeSampler | None = None) -> np.ndarray:
    """Makespans of `runs` simulated executions following the schedule's decisions. VM lifetimes
    come from `source` (default: the schedule's own model), the first VM's conditional on having
    reached `vm_age_s`."""
    source = source or schedule.solver.model
    age = np.full(runs, float(vm_age_s))
    death = source.sample(rng, runs, age=vm_age_s)
    draw = lambda n: source.sample(rng, n)  # noqa: E731
    elapsed = np.zeros(runs)
    if schedule.solver.job.restart_ages_vm:  # the first start pays the restart on its VM too
        restart(schedule.solver.job, np.arange(runs), age, death, elapsed, draw)
    return elapsed + simulate_runs(schedule, age, death, draw)[0]
