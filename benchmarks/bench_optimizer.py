# SPDX-License-Identifier: MIT
"""Planner throughput: candidates evaluated per second over the bundled catalog, warm (the median of
5 plans after one warm-up; bench_startup.py measures the first plan of a cold process).

Uses a fixed synthetic job model so the number measures the planner alone; the worker limit is
raised to grow the candidate count.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from common import save_figure, write_result
from thrifty.catalog import Hardware, load_catalog
from thrifty.perf.cpu import ThreadScaling
from thrifty.perf.jobmodel import JobModel
from thrifty.perf.steptime import StepTimeModel
from thrifty.perf.work import StepWork
from thrifty.plan import PlanRequest, VMArrays, plan

JOB = JobModel(step_time=StepTimeModel(params=np.array([2e-3, 1e-4, 1.0, 4e-3, 5e-4, 4e-3, 5e-4, 0.0, 1.5]),
                                       sigma_log=0.05),
               noise_scale=200.0, noise_scale_interval=(150.0, 260.0), s_min=5000.0,
               memory_base_bytes=4e8, memory_per_sample_bytes=1.2e5, gradient_bytes=6e5,
               train_size=1_000_000, profiled_instance_type="local", threads_per_rank=1,
               calibration_batch=64, calibration_steps=5000 * (1 + 200 / 64),
               # 60 kernels of a small CNN: convolutions, matmuls, elementwise
               work=StepWork(kind=np.tile([1, 0, 2], 20), flops_fixed=np.zeros(60),
                             flops_per_sample=np.tile([4e6, 1e6, 0.0], 20), bytes_fixed=np.full(60, 2e5),
                              bytes_per_sample=np.full(60, 3e4), outputs_fixed=np.zeros(60),
                              outputs_per_sample=np.full(60, 8e3), param_count=150_000, gradient_bytes=6e5),
               thread_scaling=ThreadScaling(np.array([16.0, 256.0]), np.array([0.3, 0.1]), np.array([0.02, 0.02]),
                                            np.zeros(2, bool)),
               input_s_per_sample=2e-5, profiled_max_local_batch=256)


def main() -> dict:
    vmx = VMArrays.build(load_catalog(), Hardware.load())
    rows = []
    for max_workers in (8, 32, 64, 128, 256):
        request = PlanRequest(max_workers=max_workers)
        plan(vmx, JOB, request)  # warm-up
        times = []
        for _ in range(5):
            start = time.perf_counter()
            result = plan(vmx, JOB, request)
            times.append(time.perf_counter() - start)
        n = len(result.candidates)
        rows.append({"max_workers": max_workers, "candidates": n, "median_s": float(np.median(times)),
                     "candidates_per_s": n / float(np.median(times))})
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["candidates"] for r in rows], [r["candidates_per_s"] for r in rows], "o-")
    ax.axhline(1_000_000, color="red", ls="--", label="goal: 1,000,000/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("candidates per plan")
    ax.set_ylabel("candidates evaluated per second")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, "optimizer_throughput")
    result = {"vm_types": len(vmx.vms), "runs": rows,
              "min_candidates_per_s": min(r["candidates_per_s"] for r in rows)}
    write_result("optimizer_throughput", result)
    return result


if __name__ == "__main__":
    r = main()
    for row in r["runs"]:
        print(f"{row['candidates']:>10,} candidates in {row['median_s'] * 1e3:7.1f} ms = {row['candidates_per_s']:,.0f}/s")
