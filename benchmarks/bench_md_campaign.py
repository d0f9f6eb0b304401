# SPDX-License-Identifier: MIT
"""A small MD campaign on an emulated preemptible pool vs the same campaign on demand.

Ray's multi-node test cluster on this machine (md.campaign.pool.EmulatedPool: a head and NODES one-CPU
raylet nodes on 127.0.0.1). Spot: every node is SIGKILLed when a lifetime drawn from the bundled
bathtub model (gcp-2019) runs out and replaced; on demand: no kills. Scaled time: one simulated
hour is one real second (TIME_SCALE = 3600). The simulation is the numpy STAND-IN (md.campaign.standin),
not MD: each run converges in about 0.5-4 s of wall time (0.5-4 simulated hours). Three spot
campaigns (lifetime seeds 1-3) and one on demand run the same BUDGET grid points with DP
checkpoints and SciSpot placement; the bill is per node-second (model time, one-minute minimum)
at the catalog's n1-standard-4 prices. Reported: wall
time, node-hours, cost at spot and at on-demand prices, preemptions, work redone after
preemptions, runs stored twice (the goal is 0) and whether every run equals an uninterrupted one.
"""

import contextlib
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from common import save_figure, write_result
from thrifty.catalog import load_catalog
from thrifty.md.campaign.checkpoint_schedule import CheckpointPlan, ScheduledCheckpoints
from thrifty.md.campaign.point_samplers import GridSampler, Sampler
from thrifty.md.campaign.pool import EmulatedPool, Placement, PoolSpec, bill, loopback_ray
from thrifty.md.campaign.runner import CampaignConfig, CampaignReport, run_campaign
from thrifty.md.campaign.simulations import BatchSimulation, SimulationFn
from thrifty.md.campaign.standin import StandIn
from thrifty.md.campaign.store import CampaignStore
from thrifty.md.space import parse_space
from thrifty.transient.registry import load_model

NODES, BUDGET, TIME_SCALE, JOB_HOURS = 3, 16, 3600.0, 2.0
SPOT_SEEDS = (1, 2, 3)  # lifetime draws of the spot pool, one campaign each
SPACE = "[h]\nvalues = [3.0, 3.5, 4.0, 4.5]\n[c]\nvalues = [0.3, 0.5, 0.7, 0.9]\n"
SIM = StandIn(chunk_wall_s=0.03)


def campaign(kind: str, root: Path, seed: int = 0) -> dict:
    with contextlib.redirect_stdout(sys.stderr):  # Ray prints its nodes' deaths on stdout
        return _campaign(kind, root / f"{kind}-{seed}", seed)


def pool_campaign(kind: str, root: Path, *, nodes: int, time_scale: float, job_hours: float, budget: int,
                  sampler: Sampler, simulation: BatchSimulation | SimulationFn, seed: int) -> tuple[CampaignReport, dict, int]:
    """One campaign on a fresh emulated pool of `nodes` (spot: bathtub kills, gcp-2019) in scaled
    time, DP checkpoints for `job_hours` and SciSpot placement: its report, its bill at the
    catalog's n1-standard-4 prices, and the runs stored more than once (the goal is 0)."""
    _, model = load_model("gcp-2019")
    vm = next(v for v in load_catalog() if v.cloud == "gcp" and v.instance_type == "n1-standard-4")
    ray_tmp = os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    plan = CheckpointPlan(model, job_hours * 3600, time_scale=time_scale)
    pool = EmulatedPool(PoolSpec(kind, nodes), model, time_scale, root / "shared", seed=seed)
    ray = loopback_ray()
    try:
        ray.init(address=pool.start(), _node_ip_address="127.0.0.1", log_to_driver=False, logging_level="ERROR")
        with CampaignStore(root / "campaign.db") as store:
            store.begin({"benchmark": kind})
            report = run_campaign(CampaignConfig(budget, root / "runs", plan, nodes), sampler, simulation, store,
                                  pool, Placement.solve(model, plan.job_s, 60, 60, 60))
    finally:
        ray.shutdown()
        pool.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    rows = list(sqlite3.connect(root / "campaign.db").execute("SELECT run_id FROM md_campaign_runs"))
    return report, bill(pool.lives, vm, time_scale, time.time()), report.duplicates + len(rows) - len({r[0] for r in rows})


def _campaign(kind: str, root: Path, seed: int) -> dict:
    began = time.monotonic()
    report, cost, duplicates = pool_campaign(kind, root, nodes=NODES, time_scale=TIME_SCALE, job_hours=JOB_HOURS,
                                             budget=BUDGET, sampler=GridSampler(parse_space(SPACE)), simulation=SIM,
                                             seed=seed)
    identical = all(run["result"] == SIM.__class__(chunk_wall_s=0.0)(
        run["params"], root / "ref" / run["run_id"], ScheduledCheckpoints(root / "ref" / run["run_id"] / "ck", []))
        for run in report.runs)
    return {"pool": f"{kind}:{NODES}", "seed": seed, "wall_s_with_pool_start": time.monotonic() - began,
            "campaign_wall_s": report.wall_s, "runs": report.completed, "steps": report.steps,
            "converged": report.converged, "preemptions": report.preemptions, "retired_for_fresh": report.retired,
            "attempts": report.attempts, "lost_work_wall_s": report.lost_work_s,
            "lost_work_model_hours": report.lost_work_s * TIME_SCALE / 3600,
            "duplicate_runs": duplicates, "all_equal_uninterrupted": identical, **cost}


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-md-campaign-"))
    spots = [campaign("spot", root, seed) for seed in SPOT_SEEDS]
    on_demand = campaign("on-demand", root)
    results = [*spots, on_demand]
    mean = {k: float(np.mean([r[k] for r in spots])) for k in (
        "campaign_wall_s", "node_hours_model", "cost_at_spot_usd", "preemptions", "lost_work_model_hours")}
    summary = {"spot_mean": mean,
               "spot_bill_over_on_demand_bill": mean["cost_at_spot_usd"] / on_demand["cost_at_on_demand_usd"],
               "spot_wall_over_on_demand_wall": mean["campaign_wall_s"] / on_demand["campaign_wall_s"],
               "duplicate_runs": sum(r["duplicate_runs"] for r in results),
               "all_equal_uninterrupted": all(r["all_equal_uninterrupted"] for r in results)}
    path = write_result("md_campaign", {
        "setup": {"nodes": NODES, "budget_runs": BUDGET, "time_scale_model_s_per_wall_s": TIME_SCALE,
                  "job_hours_for_the_schedule": JOB_HOURS, "lifetime_model": "gcp-2019", "spot_seeds": SPOT_SEEDS,
                  "instance_type": "gcp n1-standard-4", "simulation": "numpy stand-in (md.campaign.standin), not MD",
                  "space": SPACE},
        "campaigns": results, **summary})
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    labels = [f"spot, seed {r['seed']}" for r in spots] + ["on demand"]
    colors = ["tab:orange"] * len(spots) + ["tab:blue"]
    axes[0].bar(labels, [r["campaign_wall_s"] for r in results], color=colors)
    axes[0].set_ylabel("campaign wall time, s")
    axes[1].bar(labels, [r["node_hours_model"] for r in results], color=colors)
    axes[1].set_ylabel("node-hours (simulated)")
    axes[2].bar(labels, [r["cost_at_spot_usd"] for r in spots] + [on_demand["cost_at_on_demand_usd"]], color=colors)
    axes[2].set_ylabel("bill, USD (spot at spot price)")
    for ax in axes:
        ax.tick_params(axis="x", labelrotation=30)
    fig.suptitle(f"{BUDGET} stand-in runs on {NODES} nodes; spot: {sum(r['preemptions'] for r in spots)} preemptions, "
                 f"{sum(r['lost_work_model_hours'] for r in spots):.2f} h redone, {summary['duplicate_runs']} duplicates")
    fig.tight_layout()
    save_figure(fig, "md_campaign")
    print(path)
    for r in results:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})
    print(summary)
    shutil.rmtree(root, ignore_errors=True)

if __name__ == "__main__":
    main()
