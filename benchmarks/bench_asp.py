"""Asynchronous training with a parameter server: plain ASP (equal local batches) against ASP with
the batch controller, on builtin:digits, 2 workers (rank 1 slowed 4x by sleep) and the server:
3 processes on 2 cores. Reports staleness, updates per worker, throughput and final accuracy,
median over rounds; the staleness histograms and metric-vs-time curves go to the PNG.
"""

import sys
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np

from common import save_figure, write_result
from thrifty.train.asp import run_asp
from thrifty.train.hetero import constant
from thrifty.train.trainer import TrainConfig

BASE = TrainConfig(workers=2, global_batch=64, epochs=15, b_max=64, progress=False, timeout_s=900,
                   slowdown=constant((1.0, 4.0)))
POLICIES = ("uniform", "dynamic")


def main(rounds: int = 3) -> dict:
    runs: dict[str, list[dict]] = {p: [] for p in POLICIES}
    with TemporaryDirectory(prefix="thrifty-bench-asp-") as tmp:
        for r in range(rounds):
            for policy in POLICIES:
                summary = run_asp(replace(BASE, policy=policy, run_dir=Path(tmp) / f"{policy}-{r}"))
                runs[policy].append(summary)
                print(f"round {r} {policy:8s} {summary['samples_per_s']:7.0f} samples/s staleness mean "
                      f"{summary['staleness_mean']:.2f} max {summary['staleness_max']} final "
                      f"{summary['final_metric']:.3f} split {summary['final_batch_sizes']}", flush=True)
    table = {p: {k: float(np.median([s[k] for s in rs])) for k in
                 ("samples_per_s", "staleness_mean", "staleness_p90", "staleness_max", "final_metric", "wall_time_s")}
             for p, rs in runs.items()}
    for p, rs in runs.items():
        table[p]["time_to_target_s"] = [s["time_to_target_s"] for s in rs]
        table[p]["updates_per_worker"] = rs[-1]["updates_per_worker"]
        table[p]["final_batch_sizes"] = rs[-1]["final_batch_sizes"]
        table[p]["staleness_histogram"] = rs[-1]["staleness_histogram"]
    result = {"workload": "builtin:digits", "workers": 2, "slowdown": [1, 4], "global_batch": 64,
              "epochs": 15, "rounds": rounds, "processes": "2 workers + 1 server on 2 cores", "table": table}
    _plot(runs)
    write_result("asp_training", result)
    return result


def _plot(runs: dict) -> None:
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for policy, rs in runs.items():
        hist = np.array(rs[-1]["staleness_histogram"], float)
        left.bar(np.arange(hist.size) + (0.2 if policy == "dynamic" else -0.2), hist / hist.sum(), 0.4,
                 label=f"{policy} (mean {np.mean([s['staleness_mean'] for s in rs]):.2f})")
        evals = np.array(rs[-1]["evals"])
        right.plot(evals[:, 1], evals[:, 2], "o-", ms=3, label=policy)
    left.set(xlabel="staleness (updates since the pull)", ylabel="fraction of updates", title="staleness")
    right.set(xlabel="time (s)", ylabel="accuracy", title="test accuracy vs time")
    left.legend()
    right.legend()
    fig.tight_layout()
    save_figure(fig, "asp_training")


if __name__ == "__main__":
    out = main(*(int(a) for a in sys.argv[1:2]))
    for policy, row in out["table"].items():
        print(policy, {k: v for k, v in row.items() if k != "staleness_histogram"})
