# SPDX-License-Identifier: MIT
"""A plan as a decision: planned against the workload's stored search windows and stored, with the
cost-time plane it chose from, in one transaction (thrifty.store). `thrifty plan` and the page's
"plan" button (thrifty.serve.steering) both decide through `decide`."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from thrifty.perf.jobmodel import JobModel
from thrifty.plan.candidates import VMArrays
from thrifty.plan.optimizer import PlanResult, plan
from thrifty.plan.plane import plane
from thrifty.plan.request import PlanRequest
from thrifty.store import Store


@dataclass(frozen=True)
class Decision:
    result: PlanResult
    recommended: dict  # result.describe(result.best)
    plane: dict  # thrifty.plan.plane: the Pareto front and the candidates it chose from
    probes: list[dict]  # the stored search windows of the workload the plan read
    elapsed_s: float  # the planner's time alone
    decision_id: int


def stored_request(request: PlanRequest) -> dict:
    """What a stored decision records of its request."""
    return {"objective": request.objective, "deadline_s": request.deadline_s, "budget_usd": request.budget_usd,
            "max_workers": request.max_workers, "spot": request.spot}


def decide(store: Store, workload_key: str, vms: VMArrays, job: JobModel, request: PlanRequest, *,
           before_storing: Callable[[PlanResult], object] | None = None) -> Decision:
    """Plan `job` over `vms` with the workload's stored search windows, then store the decision;
    `before_storing` runs first (a plot: if it fails, nothing is stored)."""
    probes = store.workload_probes(workload_key)  # what `thrifty search` measured
    started = time.perf_counter()
    result = plan(vms, job, request, probes)
    elapsed = time.perf_counter() - started
    best = result.describe(result.best)
    if before_storing is not None:
        before_storing(result)
    chosen_from = plane(result)
    decision_id = store.save_decision(workload_key, stored_request(request), best, chosen_from)
    return Decision(result, best, chosen_from, probes, elapsed, decision_id)
