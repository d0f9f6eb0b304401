# SPDX-License-Identifier: MIT
"""Where a local search starts without --start: the configuration `thrifty plan`'s models
recommend among the emulated types (search.local) for the objective and deadline.

A configuration of type t (speed s_t, $/h p_t per node) with n nodes, r ranks and global batch B
runs every rank on this machine (emulated nodes talk over loopback), so the job model's step-time
model fitted here (perf.steptime, what `thrifty plan` uses for the profiled machine) applies with
n = 1 node and r co-located ranks:

    step time  T = ((T_c(B / r, r) / s_t)^g + T_n(r ranks, 1 node)^g)^(1/g)
               the emulation stretches a rank's compute (zero_grad, forward, backward: train.step)
               to 1/s_t as long (train.emulation); T_c also holds the optimizer update, which is
               not stretched, so T is a slight overestimate for slow types
    steps      K = E_min / B + I(E_min)  (search.noise_schedule, the schedule the search counts with);
               with the workload's own B_noise and E_min = S_min B_noise this is
               S(B) = S_min (1 + B_noise / B) (McCandlish et al. 2018)
    time       startup + K T   (the first launch's emulated VM start-up, as LocalBackend clocks it)
    cost       max(time, 60 s) x n x p_t / 3600   (per-second billing, one-minute minimum)

The start is the candidate with the least cost (or time) among those predicted to meet the
deadline, ties broken by the other quantity.
"""

from dataclasses import dataclass

import numpy as np

from thrifty.catalog.vmtype import MINIMUM_BILLED_S
from thrifty.errors import ThriftyError
from thrifty.perf.jobmodel import JobModel
from thrifty.search.config import Config
from thrifty.search.local import LocalBackend
from thrifty.search.rule import Objective


@dataclass(frozen=True)
class PlannedStart:
    """The recommended configuration with its predicted time to the target and cost."""

    config: Config
    time_s: float
    cost_usd: float


def predict_local(job: JobModel, backend: LocalBackend) -> tuple[list[Config], np.ndarray, np.ndarray]:
    """(candidates, predicted time in s, predicted cost in $) of every configuration of `backend`
    (formulas in the module docstring)."""
    configs = backend.candidates()
    ranks = np.array([c.num_workers for c in configs], float)
    batch = np.array([c.global_batch for c in configs], float)
    speed = np.array([backend.types[c.instance_type].speed for c in configs], float)
    step_time_s = job.step_time.predict(np.ones_like(ranks), ranks, batch / ranks, compute_slowdown=1.0 / speed)
    schedule = backend.schedule
    target = float(schedule.progress[-1])
    steps = np.array([schedule.steps(0.0, target, b) for b in batch])
    time_s = backend.startup_cost_s + steps * step_time_s
    price_per_hour = np.array([backend.price_per_hour(c) for c in configs], float)
    return configs, time_s, np.maximum(time_s, MINIMUM_BILLED_S) * price_per_hour / 3600.0


def plan_start(job: JobModel, backend: LocalBackend, objective: Objective) -> PlannedStart:
    """The predicted-best configuration; an error naming the fastest if none meets the deadline."""
    configs, time_s, cost_usd = predict_local(job, backend)
    ok = np.isfinite(time_s) & np.isfinite(cost_usd)
    if objective.deadline_s is not None:
        ok &= time_s <= objective.deadline_s
    if not np.any(ok):
        fastest = int(np.nanargmin(time_s))
        raise ThriftyError(f"no emulated configuration is predicted to meet the deadline of "
                           f"{objective.deadline_s:.0f} s: the fastest, {configs[fastest].label()}, is predicted "
                           f"to take {time_s[fastest]:.0f} s")
    first, second = (cost_usd, time_s) if objective.kind == "cost" else (time_s, cost_usd)
    index = np.flatnonzero(ok)
    best = int(index[np.lexsort((second[index], first[index]))[0]])
    return PlannedStart(configs[best], float(time_s[best]), float(cost_usd[best]))
