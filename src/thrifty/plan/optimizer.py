"""Pick the configuration: evaluate all candidates, keep the feasible ones, rank by the objective."""

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from thrifty.plan.candidates import Candidates, VMArrays, evaluate, feasible, require_any
from thrifty.plan.pareto import knee_index, pareto_front
from thrifty.plan.request import PlanRequest
from thrifty.perf.jobmodel import JobModel


@dataclass
class PlanResult:
    request: PlanRequest
    job: JobModel
    vmx: VMArrays
    candidates: Candidates  # all evaluated candidates
    feasible_mask: np.ndarray
    front: np.ndarray  # indices into candidates, fastest first
    ranked: np.ndarray  # feasible indices in objective order (best first)

    @property
    def best(self) -> int:
        return int(self.ranked[0])

    def describe(self, i: int) -> dict:
        c, vm = self.candidates, self.vmx.vms[int(self.candidates.vm_index[i])]
        return {
            "cloud": vm.cloud, "region": vm.region, "instance_type": vm.instance_type,
            "accelerator": vm.accelerator, "accelerator_count": vm.accelerator_count,
            "nodes": int(c.nodes[i]), "workers": int(c.workers[i]),
            "global_batch": int(c.global_batch[i]), "local_batch": int(c.local_batch[i]),
            "spot": bool(c.spot[i]), "price_per_hour": float(c.price_per_hour[i]),
            "threads_per_rank": int(c.threads_per_rank[i]),
            "step_time_s": float(c.step_time_s[i]), "steps": float(c.steps[i]),
            "predicted_epochs": float(c.steps[i] * c.global_batch[i] / self.job.train_size),
            # what the launch command trains: the predicted epochs, or with a target to stop at,
            # the upper end of their interval as a cap (the run stops at the target before it)
            "epochs": float(self._epochs_cap(i)),
            "until_target": self.job.recipe is None,
            # what the step time assumed: the requested precision on GPUs (the roofline projects
            # it), fp32 on CPUs (their step time is the fp32 profile's)
            "precision": self.request.precision if vm.is_gpu else "fp32",
            "startup_s": self.request.startup_s_for(vm.cloud),
            "predicted_time_s": float(c.time_s[i]),
            "predicted_time_interval_s": [float(c.time_low_s[i]), float(c.time_high_s[i])],
            "predicted_cost_usd": float(c.cost_usd[i]),
            "predicted_cost_interval_usd": [float(c.cost_low_usd[i]), float(c.cost_high_usd[i])],
            "prediction": "measured" if c.measured[i] else "projected",
            # what the step time comes from: the profiled machine's fitted model, stored search
            # windows of this configuration, or a projection
            "source": "search" if c.searched[i] else "profile" if c.measured[i] else "projection",
        }


    def _epochs_cap(self, i: int) -> float:
        c = self.candidates
        steps = self.job.steps_interval(c.global_batch[i])[1] if self.job.recipe is None else c.steps[i]
        return float(steps * c.global_batch[i] / self.job.train_size)


def _rank(c: Candidates, index: np.ndarray, objective: str, front: np.ndarray, by_cost: np.ndarray) -> np.ndarray:
    if objective == "time":
        return index[np.lexsort((c.cost_usd[index], c.time_s[index]))]
    if objective == "cost":
        return by_cost
    knee = front[knee_index(c.time_s[front], c.cost_usd[front])]  # objective == "knee"
    return np.concatenate([[knee], by_cost[by_cost != knee]])


def plan(vmx: VMArrays, job: JobModel, request: PlanRequest, probes: Iterable[dict] = ()) -> PlanResult:
    """Evaluate every candidate and rank the feasible ones; raises PlanError if none is feasible.
    `probes`: the workload's stored search windows (Store.workload_probes), measured step times."""
    candidates = evaluate(vmx, job, request, probes=probes)
    require_any(np.ones(len(candidates), bool), "fits the catalog filters, worker limit and memory")
    ok = feasible(candidates, request)
    require_any(ok, "meets the deadline and budget")
    index = np.flatnonzero(ok)
    time_s, cost_usd = candidates.time_s[index], candidates.cost_usd[index]
    order = np.lexsort((time_s, cost_usd))  # one sort serves the front and the cost ranking
    front = index[pareto_front(time_s, cost_usd, order)]
    return PlanResult(request=request, job=job, vmx=vmx, candidates=candidates, feasible_mask=ok,
                      front=front, ranked=_rank(candidates, index, request.objective, front, index[order]))
