# SPDX-License-Identifier: MIT
"""The writes `--allow-writes` opens: a new plan from a stored profile, and the notice to a job.

A plan is decided as `thrifty plan` decides it (thrifty.plan.decision: every candidate of the
bundled catalog evaluated with the workload's search windows, the decision and its plane stored in
one transaction), from the job model rebuilt from the stored profile (serve.plans)."""

import logging

from thrifty.errors import ThriftyError
from thrifty.serve.plans import job_model_of, vm_arrays
from thrifty.serve.stores import ThriftyDb

OBJECTIVES = ("cost", "time", "knee")
SPOT = ("both", "only", "never")

log = logging.getLogger(__name__)


def start_plan(db: ThriftyDb, profile_id: int, objective: str = "cost", deadline_s: float | None = None,
               budget_usd: float | None = None, max_workers: int = 32, spot: str = "both",
               epochs: float | None = None) -> dict:
    """Plan from stored profile `profile_id` (`epochs` to the target, as plan's --epochs); the
    stored decision's id and the recommendation."""
    from thrifty.plan import PlanRequest
    from thrifty.plan.decision import decide
    from thrifty.store import Store
    record = db.profile_record(profile_id)
    if record is None:
        raise LookupError(f"no profile {db.key(profile_id)}")
    if objective not in OBJECTIVES or spot not in SPOT:
        raise ThriftyError(f"objective must be one of {', '.join(OBJECTIVES)} and spot one of {', '.join(SPOT)}")
    request = PlanRequest(objective=objective, deadline_s=deadline_s, budget_usd=budget_usd,
                          max_workers=max_workers, spot=spot)
    with Store(db.path) as store:
        decision = decide(store, record["workload_key"], vm_arrays(), job_model_of(record, epochs), request)
    log.info("plan %s stored for profile %s (objective %s, %d candidates): %s", db.key(decision.decision_id),
             db.key(profile_id), objective, len(decision.result.candidates), decision.recommended)
    return {"id": db.key(decision.decision_id), "recommended": decision.recommended,
            "candidates": len(decision.result.candidates),
            "constraints_at_risk": list(decision.result.constraints_at_risk)}  # as plan --json (plan.optimizer._confident)
