# SPDX-License-Identifier: MIT
"""Asynchronous training with a parameter server: plain ASP (equal local batches) against ASP with
the batch controller, with its ASP batch floor (b_k >= B / 2n) and without it, on builtin:digits,
4 workers at OmniLearn's HL4 and HL8 core splits (sleep emulation) and the server: 5 processes on
2 cores. Each (profile, seed) triple of runs is compared
at equal wall time: the accuracy of each run's last evaluation at or before the shortest run's end.
Time counts from each run's first update, not from the server's start: the workers' start-up
(process spawn, RPC, loading the data) took 3-18 s on the shared cores, and counting it cut one
plain run (HL4, seed 1, in the previous result) at 0.156 accuracy after a few seconds of training.
Also staleness, updates per worker and throughput; metric-vs-time curves go to the PNG.

    python benchmarks/bench_asp.py [EPOCHS] [SEEDS]
"""

import csv
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np

from common import save_figure, write_result
from thrifty.train.asp import run_asp
from thrifty.train.hetero import constant, profile_slowdowns
from thrifty.train.trainer import TrainConfig

PROFILES = ("HL4", "HL8")
BASE = TrainConfig(workers=4, global_batch=64, epochs=6, b_max=64, progress=False, timeout_s=600, eval_every=2)
# name -> (policy, ASP batch floor as a share of B / n): plain ASP, the controller with its floor,
# and the controller without it (the ablation: what the floor changes)
VARIANTS = {"uniform": ("uniform", 0.5), "dynamic": ("dynamic", 0.5), "dynamic_no_floor": ("dynamic", 0.0)}
POLICIES = tuple(VARIANTS)


def metric_at(evals: list, time_s: float) -> float:
    """The metric of the last evaluation at or before `time_s`."""
    before = [m for _, t, m in evals if t <= time_s]
    return before[-1] if before else float("nan")


def on_training_clock(summary: dict) -> dict:
    """Times from the first update: wall time, throughput, eval times and the start-up before it."""
    with open(Path(summary["run_dir"]) / "updates.csv") as f:
        first = float(next(csv.DictReader(f))["time_s"])
    training_s = summary["wall_time_s"] - first
    return {**summary, "startup_s": first, "wall_time_s": training_s,
            "samples_per_s": summary["samples_per_s"] * summary["wall_time_s"] / training_s,
            "evals": [[step, t - first, m] for step, t, m in summary["evals"]]}


def main(epochs: int = 6, seeds: int = 3) -> dict:
    runs: dict[tuple[str, str], list[dict]] = {}
    with TemporaryDirectory(prefix="thrifty-bench-asp-") as tmp:
        for seed in range(seeds):
            for profile in PROFILES:
                for policy, (name, share) in VARIANTS.items():
                    config = replace(BASE, epochs=epochs, seed=seed, policy=name,
                                     controller=replace(BASE.controller, asp_min_share=share),
                                     slowdown=constant(profile_slowdowns(profile)),
                                     run_dir=Path(tmp) / f"{profile}-{policy}-{seed}")
                    summary = on_training_clock(run_asp(config))
                    runs.setdefault((profile, policy), []).append(summary)
                    print(f"seed {seed} {profile} {policy:16s} {summary['samples_per_s']:6.0f} samples/s "
                          f"start-up {summary['startup_s']:.1f} s training {summary['wall_time_s']:.1f} s "
                          f"final {summary['final_metric']:.3f} "
                          f"split {summary['final_batch_sizes']}", flush=True)
    table: dict = {}
    for profile in PROFILES:
        row: dict = {}
        equal = [min(r["wall_time_s"] for r in same) for same in zip(*(runs[(profile, p)] for p in POLICIES), strict=True)]
        for policy in POLICIES:
            rs = runs[(profile, policy)]
            row[policy] = {
                "accuracy_at_equal_wall_time_per_seed": [metric_at(r["evals"], t) for r, t in zip(rs, equal, strict=True)],
                "final_accuracy_per_seed": [r["final_metric"] for r in rs],
                "wall_time_s_per_seed": [r["wall_time_s"] for r in rs],
                "startup_s_per_seed": [r["startup_s"] for r in rs],
                "samples_per_s": statistics.median(r["samples_per_s"] for r in rs),
                "staleness_mean": statistics.median(r["staleness_mean"] for r in rs),
                "staleness_p90": statistics.median(r["staleness_p90"] for r in rs),
                "updates_per_worker": rs[-1]["updates_per_worker"],
                "final_batch_sizes": rs[-1]["final_batch_sizes"]}
            row[policy]["accuracy_at_equal_wall_time_mean"] = statistics.fmean(
                row[policy]["accuracy_at_equal_wall_time_per_seed"])
        row["equal_wall_time_s_per_seed"] = equal
        table[profile] = row
    result = {"workload": "builtin:digits", "workers": 4, "profiles": {p: list(profile_slowdowns(p)) for p in PROFILES},
              "global_batch": BASE.global_batch, "epochs": epochs, "seeds": list(range(seeds)),
              "processes": "4 workers + 1 server on 2 cores, sleep emulation",
              "update": "lr(B/n) on the gradient weighted by b_k / (B/n) (asp.ParameterServer.update_weight)",
              "table": table}
    _plot(runs)
    write_result("asp_training", result)
    return result


def _plot(runs: dict) -> None:
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(PROFILES), figsize=(12, 4.5))
    for ax, profile in zip(axes, PROFILES, strict=True):
        for policy, colour in zip(POLICIES, ("C0", "C1", "C2"), strict=True):
            for i, r in enumerate(runs[(profile, policy)]):
                evals = np.array(r["evals"])
                ax.plot(evals[:, 1], evals[:, 2], "-", color=colour, alpha=0.7, label=policy if i == 0 else None)
        ax.set(xlabel="training time from the first update (s)", ylabel="test accuracy", title=f"ASP, 4 workers, {profile}", ylim=(0.5, 1.0))
        ax.legend()
    fig.tight_layout()
    save_figure(fig, "asp_training")


if __name__ == "__main__":
    out = main(*(int(a) for a in sys.argv[1:3]))
    for profile, row in out["table"].items():
        for policy in POLICIES:
            print(profile, policy, row[policy]["accuracy_at_equal_wall_time_per_seed"],
                  f"mean {row[policy]['accuracy_at_equal_wall_time_mean']:.3f}")
