# SPDX-License-Identifier: MIT
"""A stored plan's cost-time plane: `thrifty plan` (and a plan started from the page) stores the
plane it chose from beside its decision (thrifty.plan.plane, thrifty.store's decision_planes), and
that is what is drawn, with the stored recommendation.

A decision stored before planes were kept has only its request (objective, deadline, budget,
workers, spot) and recommendation: its plane is computed again. The job model is rebuilt from the
profile the plan used (the workload's newest profile stored before the decision;
thrifty.perf.jobmodel.build_job_model, as thrifty.pipeline.job_model does), the workload's search
windows are read as `thrifty plan` does, and every candidate of the bundled catalog is evaluated
again (thrifty.plan.plan). Catalog filters (--cloud, --gpu, --max-price, ...), --batch, --epochs and
--precision were not stored, so that front is the bundled catalog's at the defaults;
`plane_source` says which, `matches_stored` whether the recomputed recommendation is the stored one.
"""

from functools import lru_cache

from thrifty.errors import ThriftyError
from thrifty.io import json_safe
from thrifty.serve.stores import ThriftyDb

SAME_KEYS = ("cloud", "region", "instance_type", "nodes", "workers", "global_batch", "spot")


def job_model_of(record: dict, epochs: float | None = None):
    from thrifty.perf.jobmodel import build_job_model
    from thrifty.perf.work import COUNT_VERSION
    meta = record["meta"]
    if meta.get("step_work_version") != COUNT_VERSION or "default_global_batch" not in meta:
        raise ThriftyError(f"profile {record['id']} was stored by an older thrifty: run thrifty plan once to "
                           "complete it")
    return build_job_model(record["samples"], param_count=record["param_count"], train_size=record["train_size"],
                           calibration=record["calibration"], epochs_to_target=epochs,
                           epochs_batch=meta["default_global_batch"],
                           instance_type=record["instance_type"], threads_per_rank=record["threads_per_rank"],
                           meta=meta, recipe=meta.get("recipe"))


@lru_cache(maxsize=16)
def vm_arrays():
    from thrifty.catalog import Hardware, load_catalog
    from thrifty.plan import VMArrays
    return VMArrays.build(load_catalog([]), Hardware.load(None, None, None))


def plane(db: ThriftyDb, plan: dict) -> dict:
    """The plan with the plane it chose from (stored, or computed again), its Pareto front and the
    recommendation in that plane."""
    stored = db.stored_plane(int(plan["id"].split("-")[1]))
    if stored is not None:
        return {**plan, **stored, "plane_source": "stored", "plane_recommendation": plan["recommended"],
                "matches_stored": True}
    return _computed_again(db, plan)


def _computed_again(db: ThriftyDb, plan: dict) -> dict:
    from thrifty.plan import PlanRequest
    from thrifty.plan import plan as run_plan
    from thrifty.plan.plane import plane as plane_of
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
    best = result.describe(result.best)
    stored = plan["recommended"]
    matches = all(best.get(k) == stored.get(k) for k in SAME_KEYS)
    return json_safe({**plan, "profile_id": db.key(profile_id), **plane_of(result), "plane_source": "recomputed",
                      "plane_recommendation": best, "matches_stored": matches,
                      **({} if matches or not _untrainable(stored) else {"mismatch_reason": _untrainable(stored)})})


def _untrainable(recommended: dict) -> str:
    """Why a stored recommendation is not made again, where it is on a GPU that the task's torch
    has no kernels for (catalog.torch_cuda: V100s were planned before); empty otherwise."""
    from thrifty.catalog.torch_cuda import task_torch_build
    vmx, build = vm_arrays(), task_torch_build()
    gone = [i for i, vm in enumerate(vmx.vms) if (vm.cloud, vm.instance_type, vm.accelerator) == (
        recommended.get("cloud"), recommended.get("instance_type"), recommended.get("accelerator"))
        and not vmx.trainable[i]]
    return "" if not gone or build is None else f"its {recommended['accelerator']} is no longer offered: {build.describe()}"
