# SPDX-License-Identifier: MIT
"""Pick the configuration: evaluate all candidates, keep the feasible ones, rank by the objective.
Differences within a prediction's resolution are ties (plan.ties): they go to the cheaper candidate
for `time`, to the faster for `cost`, in every row of the ranking, and the front and the tables
show one point for them."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from thrifty.catalog.torch_cuda import task_torch_build
from thrifty.catalog.vmtype import MINIMUM_BILLED_S
from thrifty.errors import PlanError
from thrifty.perf.jobmodel import MAX_TRAINED_EPOCHS, JobModel
from thrifty.plan.candidates import Bounds, Candidates, VMArrays, evaluate, refusals, require_any
from thrifty.plan.pareto import knee_index, pareto_front
from thrifty.plan.request import PlanRequest
from thrifty.plan.ties import Resolved, plan_resolution_log
from thrifty.quantities import fmt_duration, fmt_usd, told_apart

log = logging.getLogger(__name__)

# The --until-target launch's epoch cap over the upper end of the steps' interval, which comes from
# the noise scale's interval alone: the calibration run's steps to target are one draw of a quantity
# that differs between seeds by tens of percent (builtin:digits at B = 32 needed 121 steps where
# that upper end said 102, and the printed launch line stopped at 0.91 accuracy, short of 0.95).
# The run stops at the target; the cap only bounds a run that never reaches it.
UNTIL_TARGET_MARGIN = 2.0


@dataclass
class PlanResult:
    request: PlanRequest
    job: JobModel
    vmx: VMArrays
    candidates: Candidates  # all evaluated candidates
    feasible_mask: np.ndarray
    front: np.ndarray  # indices into candidates, fastest first, near-duplicates collapsed
    front_merged: np.ndarray  # per front point: the front points within its resolution it stands for
    ranked: np.ndarray  # feasible indices: the pick first, then in the objective's order (cost for the knee)
    resolved: Resolved
    # the constraints ("deadline", "budget") held at the predicted values only: no candidate holds
    # them at its 90% interval's upper end (_confident)
    constraints_at_risk: tuple[str, ...] = ()

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The best k rows by the tie rule, each the rule's pick of the plans left, without
        near-duplicates, and how many each row stands for (plan.ties.Resolved.tie_rows)."""
        objective = "time" if self.request.objective == "time" else "cost"
        return self.resolved.tie_rows(self.ranked[1:], objective, k, first=int(self.ranked[0]))

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
            # a cap of UNTIL_TARGET_MARGIN x the upper end of their interval (the run stops at the
            # target before it); epochs the user stated (--epochs) are trained as predicted (a new
            # user's pass: 5,000 stated epochs were planned and the line stopped at the workload's
            # own target after 3)
            "epochs": float(self._epochs_cap(i)),
            "until_target": self._until_target,
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


    @property
    def _until_target(self) -> bool:
        """Whether the launch trains to the workload's target: the steps came from a calibration
        run to it (no recipe, no --epochs)."""
        return self.job.recipe is None and not self.job.epochs_stated

    def _epochs_cap(self, i: int) -> float:
        c = self.candidates
        if self._until_target:
            steps = UNTIL_TARGET_MARGIN * self.job.steps_interval(c.global_batch[i])[1]
        else:
            steps = c.steps[i]
        # never past what thrifty train takes (a cap of twice an interval's end had printed 229,096)
        return float(min(steps * c.global_batch[i] / self.job.train_size, MAX_TRAINED_EPOCHS))


def _rank(r: Resolved, index: np.ndarray, objective: str, pareto: np.ndarray, by_cost: np.ndarray) -> np.ndarray:
    """Feasible candidates, the objective's pick first (ties resolved; for the knee, the knee point
    of the collapsed front), then in the order of the objective (cost for the knee); the table
    applies the tie rule to every row (PlanResult.top)."""
    rest = by_cost if objective in ("cost", "knee") else r.ordered(index, objective)
    if objective == "knee":
        front = r.collapse_front(pareto)[0]
        first = front[knee_index(r.time_s[front], r.cost_usd[front])]
    else:
        first = r.best_of_ordered(rest, objective)
    return np.concatenate([[first], rest[rest != first]])


def _none_meets(c: Candidates, request: PlanRequest, finite: np.ndarray) -> str:
    """Why no candidate is feasible: the constraints given, and how near the best come to them."""
    asked, nearest = [], []
    for limit, values, fmt, ask, near in ((request.deadline_s, c.time_s, fmt_duration, "meets the deadline of",
                                           "the fastest takes"),
                                          (request.budget_usd, c.cost_usd, fmt_usd, "fits the budget of",
                                           "the cheapest costs")):
        if limit is None:
            continue
        limit_text, best_text = told_apart(fmt, limit, values[finite].min() if finite.any() else np.nan)
        asked.append(f"{ask} {limit_text}")
        if finite.any():
            nearest.append(f"{near} {best_text}")
    said = f"no configuration {' and '.join(asked) or 'has a finite time and cost'}"
    if request.deadline_s is not None and request.budget_usd is not None and finite.any():
        fastest, cheapest = (int(np.flatnonzero(finite)[np.argmin(v[finite])]) for v in (c.time_s, c.cost_usd))
        if c.time_s[fastest] <= request.deadline_s and c.cost_usd[cheapest] <= request.budget_usd:
            # each alone is met (a new user's pass: "the fastest takes 4.09 min" under a 9 min deadline)
            return (f"{said}: each alone is met, not both at once: the fastest takes {fmt_duration(c.time_s[fastest])} "
                    f"for {fmt_usd(c.cost_usd[fastest])}, the cheapest costs {fmt_usd(c.cost_usd[cheapest])} and takes "
                    f"{fmt_duration(c.time_s[cheapest])}; relax one of them")
    return f"{said}{': ' + ', '.join(nearest) if nearest else ''}; relax the constraints or widen the filters"


def _confident(c: Candidates, request: PlanRequest, ok: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """The feasible candidates that meet the deadline and fit the budget at the upper ends of their
    90% intervals (each a 95% one-sided chance) where any does; else those holding the deadline
    there, else those holding the budget there, else every feasible one. With the constraints held
    at the predicted values only (the second value: "deadline", "budget"). A deadline met by the
    point estimate alone was recommended without a word while its interval ran a fifth past it."""
    deadline_sure = ok if request.deadline_s is None else ok & (c.time_high_s <= request.deadline_s)
    budget_sure = ok if request.budget_usd is None else ok & (c.cost_high_usd <= request.budget_usd)
    for sure, at_risk in ((deadline_sure & budget_sure, ()), (deadline_sure, ("budget",)),
                          (budget_sure, ("deadline",))):
        if sure.any():
            return sure, at_risk
    return ok, ("deadline", "budget")


def _untrainable(vmx: VMArrays) -> str:
    """Which GPUs of the catalog no plan offers because the task's torch has no kernels for them
    (VMArrays.trainable), and why; empty when none."""
    gpus = sorted({vm.accelerator for vm, ok in zip(vmx.vms, vmx.trainable, strict=True) if not ok and vm.accelerator})
    build = task_torch_build()
    if not gpus or build is None:
        return ""
    return (f"{', '.join(gpus)} left out: {build.describe()}, and a plan's task installs it "
            f"(thrifty plan where an older torch is installed pins that one)")


def plan(vmx: VMArrays, job: JobModel, request: PlanRequest, probes: Iterable[dict] = ()) -> PlanResult:
    """Evaluate every candidate and rank the feasible ones; raises PlanError if none is feasible.
    `probes`: the workload's stored search windows (Store.workload_probes), measured step times."""
    candidates = evaluate(vmx, job, request, probes=probes)
    left_out = _untrainable(vmx)
    if left_out:
        log.debug(left_out)
    require_any(np.ones(len(candidates), bool), "fits the catalog filters, worker limit and memory"
                + (" on a GPU with BF16 tensor cores (Ampere or later; --precision amp runs on the others)"
                   if request.precision == "bf16" else "")
                + (" at a spot price (--spot only: no VM type these filters keep has one)" if request.spot == "only"
                   and not any(vm.spot_price_per_hour is not None for vm in vmx.vms) else "")
                + (f" ({left_out})" if left_out else ""))
    refused = refusals(candidates, request)
    ok = ~np.logical_or.reduce(list(refused.values()))  # feasible: no reason refuses it
    log.debug("%d of %d candidates refused: %s", int((~ok).sum()), ok.size,
              ", ".join(f"{int(mask.sum())} {why}" for why, mask in refused.items()))
    if not ok.any():
        raise PlanError(_none_meets(candidates, request, ~refused["no finite time or cost"]))
    point_ok = ok
    ok, at_risk = _confident(candidates, request, ok)
    if request.deadline_s is not None or request.budget_usd is not None:
        log.debug("%d more meet the constraints at their predicted values only, not at their 90%% intervals' upper "
                  "ends%s", int((point_ok & ~ok).sum()), f" (the {' and '.join(at_risk)} held at the predicted "
                  "values: no plan holds it there)" if at_risk else "")
    index = np.flatnonzero(ok)
    time_s, cost_usd = candidates.time_s[index], candidates.cost_usd[index]
    order = np.lexsort((time_s, cost_usd))  # one sort serves the front and the cost ranking
    # the profile's measurement noise (plan.ties) scatters the steps, not the start-up nor the billed minute
    training_s = candidates.steps * candidates.step_time_s
    noise = job.step_time.sigma_log
    time_share = training_s / candidates.time_s
    billed_share = training_s / np.maximum(candidates.time_s, MINIMUM_BILLED_S)

    def resolutions(b: Bounds) -> tuple[np.ndarray, np.ndarray]:
        return (plan_resolution_log(b.time_low_s, b.time_high_s, noise, time_share),
                plan_resolution_log(b.cost_low_usd, b.cost_high_usd, noise, billed_share))
    (time_sigma, cost_sigma), other_gpu, same_gpu = map(resolutions, (
        candidates.unshared, candidates.against_other_gpu, candidates.against_same_gpu))
    resolved = Resolved(candidates.time_s, candidates.cost_usd, time_sigma, cost_sigma,
                        group=candidates.error_group,
                        time_sigma_grouped=np.column_stack([other_gpu[0], same_gpu[0]]),
                        cost_sigma_grouped=np.column_stack([other_gpu[1], same_gpu[1]]))
    pareto = index[pareto_front(time_s, cost_usd, order)]
    ranked = _rank(resolved, index, request.objective, pareto, index[order])
    # the choice stands for the front points it ties with, and the front is collapsed around it (it
    # is on the front: nothing feasible is both faster and cheaper than the cheapest of a tie, or
    # the fastest)
    front, members = resolved.collapse_front(pareto, keep=int(ranked[0]))
    result = PlanResult(request=request, job=job, vmx=vmx, candidates=candidates, feasible_mask=ok,
                        front=front, front_merged=np.array([g.size - 1 for g in members], int),
                        resolved=resolved, ranked=ranked, constraints_at_risk=at_risk)
    best = result.describe(result.best)
    log.info("chose %s:%s x %d node(s), %d worker(s), global batch %d, %s, by %s: %.3g s, $%.4g (%s) of %d "
             "feasible candidates", best["cloud"], best["instance_type"], best["nodes"], best["workers"],
             best["global_batch"], "spot" if best["spot"] else "on-demand", request.objective,
             best["predicted_time_s"], best["predicted_cost_usd"], best["prediction"], index.size)
    return result

