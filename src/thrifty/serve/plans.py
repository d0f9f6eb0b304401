"""A stored plan's cost-time plane, computed again: thrifty.store keeps a decision's request
(objective, deadline, budget, workers, spot) and its recommendation, not its candidates. The view
rebuilds the job model from the profile the plan used (the workload's newest profile stored
before the decision; thrifty.perf.jobmodel.build_job_model, as thrifty.pipeline.job_model does),
reads the workload's search windows as `thrifty plan` does, and evaluates every candidate of the
bundled catalog again (thrifty.plan.plan). Catalog filters (--cloud, --gpu, --max-price, ...),
--batch, --epochs and --precision are not stored, so the front is that of the bundled catalog at
the defaults; `matches_stored` says whether its recommendation is the stored one.

The plane is drawn from at most MAX_POINTS feasible candidates (an even thinning of those sorted
by time, the front and the recommendation always included)."""

from functools import lru_cache

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.io import json_safe
from thrifty.serve.stores import ThriftyDb

MAX_POINTS = 4000
SAME_KEYS = ("cloud", "region", "instance_type", "nodes", "workers", "global_batch", "spot")


def job_model_of(record: dict):
    from thrifty.perf.jobmodel import build_job_model
    from thrifty.perf.work import COUNT_VERSION
    meta = record["meta"]
    if meta.get("step_work_version") != COUNT_VERSION or "default_global_batch" not in meta:
        raise ThriftyError(f"profile {record['id']} was stored by an older thrifty: run thrifty plan once to "
                           "complete it")
    return build_job_model(record["samples"], param_count=record["param_count"], train_size=record["train_size"],
                           calibration=record["calibration"], epochs_batch=meta["default_global_batch"],
                           instance_type=record["instance_type"], threads_per_rank=record["threads_per_rank"],
                           meta=meta, recipe=meta.get("recipe"))


@lru_cache(maxsize=16)
def vm_arrays():
    from thrifty.catalog import Hardware, load_catalog
    from thrifty.plan import VMArrays
    return VMArrays.build(load_catalog([]), Hardware.load(None, None, None))


def plane(db: ThriftyDb, plan: dict) -> dict:
    """The plan with its candidates (thinned), its Pareto front and the recommendation."""
    from thrifty.plan import PlanRequest
    from thrifty.plan import plan as run_plan
    profile_id = db.profile_for(plan["workload_key"], plan["created_at"])
    if profile_id is None:
        return {**plan, "plane": None, "reason": "no profile of this workload is stored in this database"}
    record = db.profile_record(profile_id)
    if record is None:
        return {**plan, "plane": None, "reason": "its profile is no longer in this database"}
    asked = plan["request"]
    request = PlanRequest(objective=asked["objective"], deadline_s=asked.get("deadline_s"),
                          budget_usd=asked.get("budget_usd"), max_workers=asked.get("max_workers", 32),
                          spot=asked.get("spot", "both"))
    result = run_plan(vm_arrays(), job_model_of(record), request, db.workload_probes(plan["workload_key"]))
    c, ok = result.candidates, result.feasible_mask
    feasible = np.flatnonzero(ok)
    feasible = feasible[np.argsort(c.time_s[feasible], kind="stable")]
    keep = feasible[np.linspace(0, len(feasible) - 1, min(MAX_POINTS, len(feasible))).astype(int)] \
        if len(feasible) else feasible
    keep = np.union1d(keep, np.append(result.front, result.best))
    best = result.describe(result.best)
    stored = plan["recommended"]
    return json_safe({**plan, "profile_id": db.key(profile_id),
                      "plane": {"time_s": c.time_s[keep].tolist(), "cost_usd": c.cost_usd[keep].tolist(),
                                "spot": c.spot[keep].astype(bool).tolist(),
                                "label": _labels(result, keep),
                                "candidates": len(c), "feasible": int(ok.sum()), "shown": len(keep)},
                      "pareto": [result.describe(int(i)) for i in result.front],
                      "recomputed_recommendation": best,
                      "matches_stored": all(best.get(k) == stored.get(k) for k in SAME_KEYS)})


def _labels(result, keep: np.ndarray) -> list[str]:
    """'cloud:type NODESxRANKS B=batch [spot]' per kept candidate."""
    c, vms = result.candidates, result.vmx.vms
    return [f"{vms[v].cloud}:{vms[v].instance_type} {int(n)}x{int(w) // int(n)} B={int(b)}{' spot' if s else ''}"
            for v, n, w, b, s in zip(c.vm_index[keep].astype(int).tolist(), c.nodes[keep].tolist(),
                                     c.workers[keep].tolist(), c.global_batch[keep].tolist(), c.spot[keep].tolist(), strict=True)]
