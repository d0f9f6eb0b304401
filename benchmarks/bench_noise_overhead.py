# SPDX-License-Identifier: MIT
"""Cost of measuring the gradient noise scale, as a fraction of step time, on real processes.

Alternates steps with and without the measurement in the same process group, so both see the same
machine state: 2 ranks (two squared norms riding on the gradient all-reduce) and 1 rank (the batch
split in two micro-batches every 8th step, as the profiler and trainer do).
"""

import matplotlib.pyplot as plt
import numpy as np

from common import save_figure, write_result
from thrifty.perf.noise import noise_due
from thrifty.train.launcher import run_local_workers
from thrifty.train.sampler import GlobalBatchSampler
from thrifty.train.step import train_step
from thrifty.workloads import load_workload


def _rank(rank: int, world_size: int, local_batch: int, steps: int) -> dict:
    import torch
    workload = load_workload("builtin:digits")
    torch.manual_seed(0)
    model = workload.make_model()
    optimizer = workload.make_optimizer(model.parameters(), local_batch * world_size)
    batches = GlobalBatchSampler(workload.train_size, [local_batch] * world_size).iter_rank(rank)
    on, off = [], []
    for step in range(steps):
        measure = step % 2 == 0
        # with one rank the measurement is the micro-batch split, done on every 8th measured step
        noise = measure and noise_due(step // 2, world_size)
        record = train_step(model, optimizer, workload, next(batches), local_batch * world_size,
                            measure_noise=noise)[rank]  # one row per rank; this rank's own
        if step >= 10:
            (on if measure else off).append(record.step_time_s)
    return {"on": on, "off": off}


def main(steps: int = 400) -> dict:
    rows = []
    for world in (1, 2):
        for local_batch in (32, 128):
            results = run_local_workers(_rank, world, timeout_s=600, local_batch=local_batch, steps=steps)
            on = np.max([r["on"] for r in results], axis=0)
            off = np.max([r["off"] for r in results], axis=0)
            rows.append({"workers": world, "local_batch": local_batch,
                         "mean_step_with_noise_s": float(np.mean(on)),
                         "mean_step_without_s": float(np.mean(off)),
                         "overhead_percent": float((np.mean(on) / np.mean(off) - 1) * 100)})
    result = {"workload": "builtin:digits", "steps_each": steps // 2 - 5, "runs": rows,
              "max_overhead_percent": max(r["overhead_percent"] for r in rows)}
    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = [f"{r['workers']} rank(s), b={r['local_batch']}" for r in rows]
    ax.bar(labels, [r["overhead_percent"] for r in rows])
    ax.axhline(5, color="red", ls="--", label="limit: 5%")
    ax.set_ylabel("step-time overhead (%)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, "noise_overhead")
    write_result("noise_overhead", result)
    return result


if __name__ == "__main__":
    for row in main()["runs"]:
        print(f"{row['workers']} worker(s), local batch {row['local_batch']}: overhead {row['overhead_percent']:+.2f}%")
