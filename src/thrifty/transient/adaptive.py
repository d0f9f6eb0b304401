# SPDX-License-Identifier: MIT
"""Checkpoint intervals for `thrifty run` that follow what the job's checkpoints and restarts cost.

The runner starts with intervals planned from assumed costs. Once the job reports measured ones
(transient.protocol), the intervals are planned again with the medians of those measured so far,
whenever a median has moved by more than REPLAN_CHANGE from the cost the current intervals were
planned with. With the job's length the intervals are the DP's (transient.schedule) for a restart
that runs on the new VM (every attempt starts the job's process again there, and the first start
pays it too), followed by Young's tau = sqrt(2 delta M) for a job that outlasts its stated length,
else Young's alone. Costs and intervals are wall seconds; the
lifetime model lives in model seconds, `time_scale` of them per wall second (compressed clock).
"""

import statistics
from dataclasses import dataclass, field

from thrifty.transient.lifetimes import LifetimeModel
from thrifty.transient.schedule import Job, planned_intervals_s, young_interval_s

REPLAN_CHANGE = 0.1  # relative move of a measured median that plans the intervals again


@dataclass
class AdaptiveSchedule:
    model: LifetimeModel
    checkpoint_cost_s: float  # assumed until the job reports its checkpoints' costs
    restart_cost_s: float  # assumed until the job reports a restart
    work_s: float | None = None  # the job's work: the DP schedule; None: Young's interval
    time_scale: float = 1.0  # model seconds per wall second
    intervals_s: list[float] = field(init=False)  # work between checkpoint requests, in order

    def __post_init__(self) -> None:
        self.intervals_s = self.intervals_for(self.checkpoint_cost_s, self.restart_cost_s)

    def moved(self, checkpoint_costs_s: list[float], restart_costs_s: list[float]) -> tuple[float, float] | None:
        """The medians of the measured costs (the planned ones where none is measured yet) if either
        moved by more than REPLAN_CHANGE from the one the intervals were planned with, else None."""
        checkpoint = statistics.median(checkpoint_costs_s) if checkpoint_costs_s else self.checkpoint_cost_s
        restart = statistics.median(restart_costs_s) if restart_costs_s else self.restart_cost_s
        if _moved(checkpoint, self.checkpoint_cost_s) or _moved(restart, self.restart_cost_s):
            return checkpoint, restart
        return None

    def intervals_for(self, checkpoint_cost_s: float, restart_cost_s: float) -> list[float]:
        """The intervals these costs give (no state changes: the runner plans in a thread)."""
        scale = self.time_scale
        if self.work_s is None:
            return [young_interval_s(checkpoint_cost_s * scale, self.model.mean()) / scale]
        job = Job(self.work_s * scale, checkpoint_cost_s * scale, restart_cost_s * scale, restart_ages_vm=True)
        return [i / scale for i in planned_intervals_s(self.model, job)]

    def adopt(self, checkpoint_cost_s: float, restart_cost_s: float, intervals_s: list[float]) -> None:
        self.checkpoint_cost_s, self.restart_cost_s, self.intervals_s = checkpoint_cost_s, restart_cost_s, intervals_s


def _moved(measured: float, planned: float) -> bool:
    return abs(measured - planned) > REPLAN_CHANGE * planned
