# SPDX-License-Identifier: MIT
"""CPU projection: the Amdahl serial fraction measured here at 1 and 2 threads, and what it
predicts for big CPU VMs (thrifty.perf.cpu).

For two small CNNs, each local batch runs alternately at 1 and 2 threads in one process
(thrifty.train.profiler.measure_thread_scaling, 12 measured steps each); s = 2 T(2)/T(1) - 1.
The projected speed-up on p vCPUs is 1 / (s + (1 - s)/p): bounded by 1/s, never linear.

    .venv/bin/python benchmarks/bench_cpu_scaling.py
"""

import matplotlib.pyplot as plt
import numpy as np

from common import save_figure, write_result
from thrifty.perf.cpu import ThreadScaling
from thrifty.train.profiler import measure_thread_scaling

CASES = {"builtin:digits": (16, 64, 256), "builtin:resnet18-cifar10": (4, 8, 16)}
VCPUS = (2, 8, 32, 96, 192)


def main() -> dict:
    rows = {}
    for workload, batches in CASES.items():
        measured = measure_thread_scaling(workload, batches, steps=12)
        scaling = ThreadScaling.from_dict(measured["thread_scaling"])
        times = measured["thread_times"]
        rows[workload] = {
            "local_batch": list(batches),
            "one_thread_s": [float(np.mean(t)) for t in times["one_thread_steps_s"]],
            "two_threads_s": [float(np.mean(t)) for t in times["two_threads_steps_s"]],
            "serial_fraction": scaling.serial_fraction.tolist(),
            "serial_fraction_sd": scaling.serial_fraction_sd.tolist(),
            "projected_speedup": {str(p): (1.0 / scaling.slowdown(np.array(batches, float), p)).tolist()
                                  for p in VCPUS},
            "input_s_per_sample": measured["input_s_per_sample"]}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for workload, row in rows.items():
        for b, s in zip(row["local_batch"], row["serial_fraction"], strict=True):
            ax.plot(VCPUS, [1 / (s + (1 - s) / p) for p in VCPUS], "o-", ms=3,
                    label=f"{workload.removeprefix('builtin:')} b={b}: s={s:.2f}")
    ax.plot(VCPUS, VCPUS, "k--", lw=0.8, label="linear (the old assumption)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("vCPUs of the VM")
    ax.set_ylabel("projected speed-up over 1 thread")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, "cpu_scaling")
    write_result("cpu_scaling", {"workloads": rows, "vcpus": list(VCPUS)})
    return rows


if __name__ == "__main__":
    for workload, row in main().items():
        print(workload, "s =", [round(s, 3) for s in row["serial_fraction"]],
              "speed-up at 96 vCPUs:", [round(x, 1) for x in row["projected_speedup"]["96"]])
