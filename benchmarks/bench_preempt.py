# SPDX-License-Identifier: MIT
"""Preemptible VMs on Google's 2019 lifetimes: checkpoint schedules, VM reuse, spot vs on-demand.

1. Expected overhead (E[makespan] / T - 1) of the model-aware DP schedule against Young and Daly
   (with the model's mean lifetime, and with a 1 h MTTF as in the HPDC 2020 comparison) and no
   checkpoints, for 1-20 h jobs, 60 s checkpoints and restarts, under the censored-MLE bathtub
   model and the paper's least-squares one; each value checked against a Monte Carlo run.
2. Campaigns of back-to-back jobs: always reuse the VM, always take a fresh one, or decide by the
   model, simulated over the real lifetimes (Kaplan-Meier resampling of all 1,442 VMs).
3. A 10 h job with a deadline: spot only, on-demand only, deadline-aware; model and real lifetimes.
"""

import numpy as np

from common import save_figure, write_result
from thrifty.transient.fitting import EmpiricalLifetimes, read_lifetimes
from thrifty.transient.lifetimes import HOUR
from thrifty.transient.registry import data_file, load_model
from thrifty.transient.reuse import REUSE_POLICIES, simulate_campaign
from thrifty.transient.schedule import Job, plan_schedule
from thrifty.transient.simulation import simulate
from thrifty.transient.spot import compare

JOB_HOURS = [1, 2, 3, 5, 8, 10, 15, 20]
POLICIES = {"dp": ("dp", None), "young": ("young", None), "daly": ("daly", None),
            "young, MTTF 1 h": ("young", HOUR), "none": ("none", None)}
MODELS = ["gcp-2019", "gcp-2019-lsq"]


def schedules(rng: np.random.Generator) -> dict:
    out = {}
    for name in MODELS:
        _, model = load_model(name)
        rows = []
        for hours in JOB_HOURS:
            row = {"job_hours": hours}
            for label, (policy, mttf) in POLICIES.items():
                try:
                    schedule = plan_schedule(model, Job(hours * HOUR, 60, 60), policy, mttf_s=mttf)
                except Exception as exc:  # `none` for jobs past the longest lifetime
                    row[label] = {"error": str(exc)}
                    continue
                mc = simulate(schedule, rng, 20_000).mean()
                row[label] = {"overhead_percent": 100 * schedule.overhead_fraction,
                              "checkpoints": len(schedule.intervals_s) - 1,
                              "monte_carlo_difference_percent": 100 * (mc / schedule.expected_makespan_s - 1)}
            rows.append(row)
        out[name] = rows
    return out


def reuse(rng: np.random.Generator, real: EmpiricalLifetimes) -> list[dict]:
    _, model = load_model("gcp-2019")
    rows = []
    for hours in (2, 5, 10):
        row = {"job_hours": hours, "jobs": 10}
        for policy in REUSE_POLICIES:
            total = simulate_campaign(model, real, hours, 10, policy, rng, runs=4000)
            row[policy] = {"mean_hours": float(total.mean() / HOUR),
                           "overhead_percent": float(100 * (total.mean() / (10 * hours * HOUR) - 1))}
        rows.append(row)
    return rows


def spot(rng: np.random.Generator, real: EmpiricalLifetimes) -> list[dict]:
    _, model = load_model("gcp-2019")
    rows = []
    for source_name, source in (("model", model), ("real", real)):
        for deadline in (10.5, 11, 11.5, 12, 14):
            outcomes = compare(model, source, Job(10 * HOUR, 60, 60), deadline * HOUR, spot_price=0.30,
                               on_demand_price=1.00, rng=rng, runs=10_000)
            rows.append({"lifetimes": source_name, "deadline_hours": deadline,
                         **{o.policy: o.to_dict() for o in outcomes}})
    return rows


def main() -> dict:
    rng = np.random.default_rng(2020)
    real = EmpiricalLifetimes(read_lifetimes(data_file()))
    result = {"checkpoint_cost_s": 60, "restart_cost_s": 60, "schedules": schedules(rng),
              "reuse_over_real_lifetimes": reuse(rng, real), "spot_vs_on_demand": spot(rng, real),
              "prices": "spot $0.30/h vs on-demand $1.00/h (GCP preemptible discount ~70%)"}
    _plot(result)
    write_result("preemption", result)
    return result


def _plot(result: dict) -> None:
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for ax, name in zip(axes[:2], MODELS, strict=True):
        for label in POLICIES:
            points = [(r["job_hours"], r[label]["overhead_percent"]) for r in result["schedules"][name]
                      if "overhead_percent" in r[label]]
            ax.plot(*zip(*points, strict=True), "o-", label=label)
        ax.set(xlabel="job length (h)", ylabel="expected overhead (%)", title=f"model {name}", yscale="log")
        ax.legend(fontsize=8)
    rows = [r for r in result["spot_vs_on_demand"] if r["lifetimes"] == "real"]
    for policy in ("spot", "on-demand", "deadline-aware"):
        axes[2].plot([r["deadline_hours"] for r in rows], [r[policy]["mean_cost_usd"] for r in rows], "o-",
                     label=f"{policy} (met {min(r[policy]['deadline_met'] for r in rows):.0%}+)")
    axes[2].set(xlabel="deadline (h)", ylabel="mean cost ($)", title="10 h job, real lifetimes")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "preemption")


if __name__ == "__main__":
    r = main()
    for name, rows in r["schedules"].items():
        print(name)
        for row in rows:
            print(f"  {row['job_hours']:>3} h: " + " | ".join(
                f"{k} {v['overhead_percent']:.1f}% (mc {v['monte_carlo_difference_percent']:+.2f}%)"
                if "overhead_percent" in v else f"{k} -" for k, v in row.items() if k != "job_hours"))
    for row in r["reuse_over_real_lifetimes"]:
        print(f"reuse {row['job_hours']} h x10: " + " | ".join(f"{p} {row[p]['overhead_percent']:.2f}%" for p in REUSE_POLICIES))
    for row in r["spot_vs_on_demand"]:
        print(f"{row['lifetimes']} deadline {row['deadline_hours']} h: " + " | ".join(
            f"{p} ${row[p]['mean_cost_usd']:.2f} met {row[p]['deadline_met']:.3f}" for p in ("spot", "on-demand", "deadline-aware")))
