"""Spot or on-demand, and a deadline-aware mix of both.

- spot only: the DP-checkpointed job on preemptible VMs; cost = elapsed time x spot price.
- on-demand only: T x on-demand price, never interrupted.
- deadline-aware: start on spot; before every segment and after every preemption, if the slack
  left (deadline - now - remaining work - the switch's restart cost) could not absorb losing the
  next segment plus a restart, move to on-demand for the rest (cf. SciSpot, Kadupitiya et al.,
  TPDS 2022). It meets the deadline whenever on-demand alone could have (T + R <= deadline).
Evaluated by simulation over lifetimes drawn from a model or from the real data (Kaplan-Meier).
"""

from dataclasses import dataclass

import numpy as np

from thrifty.transient.lifetimes import LifetimeModel
from thrifty.transient.schedule import Job, Lifetimes, plan_schedule, _age_index

SPOT_POLICIES = ("spot", "on-demand", "deadline-aware")


@dataclass(frozen=True)
class Outcome:
    policy: str
    mean_time_s: float
    p95_time_s: float
    mean_cost_usd: float
    deadline_met: float
    switched: float  # fraction of runs that moved to on-demand

    def to_dict(self) -> dict:
        return self.__dict__.copy()


def compare(model: LifetimeModel, source: Lifetimes, job: Job, deadline_s: float, spot_price: float,
            on_demand_price: float, rng: np.random.Generator, runs: int = 10_000) -> list[Outcome]:
    schedule = plan_schedule(model, job, "dp")
    out = []
    for policy in SPOT_POLICIES:
        if policy == "on-demand":
            time = np.full(runs, job.work_s)
            cost, switched = time * on_demand_price / 3600, np.ones(runs, bool)
        else:
            time, cost, switched = _simulate(schedule, source, deadline_s if policy == "deadline-aware" else None,
                                             spot_price, on_demand_price, rng, runs)
        out.append(Outcome(policy, float(time.mean()), float(np.percentile(time, 95)), float(cost.mean()),
                           float(np.mean(time <= deadline_s)), float(np.mean(switched))))
    return out


def _simulate(schedule, source: Lifetimes, deadline_s: float | None, spot_price: float,
              on_demand_price: float, rng: np.random.Generator, runs: int):
    solver, job = schedule.solver, schedule.solver.job
    remaining = np.full(runs, solver.steps)
    age = np.zeros(runs)
    death = source.sample(rng, runs)
    elapsed = np.zeros(runs)
    switched = np.zeros(runs, bool)
    active = np.ones(runs, bool)
    while active.any():
        idx = np.nonzero(active)[0]
        j = remaining[idx]
        k = np.minimum(np.maximum(schedule.choice[j, _age_index(solver, age[idx])], 1), j)
        cost = k * solver.grid_s + np.where(k < j, job.checkpoint_cost_s, 0.0)
        if deadline_s is not None:
            slack = deadline_s - elapsed[idx] - j * solver.grid_s - job.restart_cost_s
            move = slack < cost + job.restart_cost_s
            movers = idx[move]
            switched[movers] = True
            active[movers] = False
            idx, j, k, cost = idx[~move], j[~move], k[~move], cost[~move]
        ok = age[idx] + cost <= death[idx]
        done, lost = idx[ok], idx[~ok]
        elapsed[done] += cost[ok]
        age[done] += cost[ok]
        remaining[done] -= k[ok]
        elapsed[lost] += death[lost] - age[lost] + job.restart_cost_s
        age[lost] = 0.0
        death[lost] = source.sample(rng, lost.size)
        active &= remaining > 0
    spot_time = elapsed.copy()
    on_demand_time = np.where(switched, remaining * solver.grid_s + job.restart_cost_s, 0.0)
    total = spot_time + on_demand_time
    dollars = (spot_time * spot_price + on_demand_time * on_demand_price) / 3600
    return total, dollars, switched
