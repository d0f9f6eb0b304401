# SPDX-License-Identifier: MIT
"""`thrifty train`'s step on a real GPU, beside what `thrifty model project` says for that GPU.

For each built-in at fp32, tf32 and amp (bf16 too, which the planner does not model) and three
local batch sizes: 10 warm-up and 50 measured steps of the one training step (train.step, one
rank, the batch made on the GPU), samples/s from synchronised timers and the peak allocated GPU
memory. Beside each, the step time `thrifty model project` predicts for one GPU of the catalog's
H200 type (gcp a3-ultragpu-8g), reached from the H200's specs (data/gpu) and the workload's counted
work alone: no GPU measurement enters the projection. Last, the torch MD engine on cuda (R = 32
and 128 replicas, float32 and float64; bench_torch_md's systems).

Needs a CUDA GPU: without one it says so and writes nothing. Under 10 minutes on one H200.
Usage: python benchmarks/bench_gpu.py [--steps 50] [--quick]. Writes results/gpu_training.json/.png.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time

import torch

from common import save_figure, write_result
from thrifty.train.loop import fresh_state, run_steps
from thrifty.train.runtime import Runtime
from thrifty.workloads import load_workload

H200_TYPE = "a3-ultragpu-8g"
BATCHES = {"digits": (64, 256, 1024), "tabular": (32, 128, 256), "resnet18-cifar10": (128, 256, 512),
           "resnet50-imagenet": (64, 128, 256)}
PRECISIONS = ("fp32", "tf32", "amp", "bf16")
WARMUP = 10


def measure(name: str, local_batch: int, precision: str, steps: int) -> dict:
    """samples/s and peak memory of `steps` training steps after WARMUP, on cuda:0."""
    workload = load_workload(f"builtin:{name}")
    runtime = Runtime(torch.device("cuda", 0), precision)
    runtime.activate()
    state = fresh_state(workload, [local_batch], runtime=runtime, total_samples=float(local_batch * (steps + WARMUP)))
    run_steps(state, workload, steps=WARMUP)
    torch.cuda.reset_peak_memory_stats()
    begin = runtime.clock()
    run_steps(state, workload, steps=WARMUP + steps)
    elapsed = runtime.clock() - begin
    return {"workload": name, "precision": precision, "local_batch": local_batch,
            "measured_step_s": elapsed / steps, "measured_samples_per_s": local_batch * steps / elapsed,
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30, "skipped_updates": state.skipped_updates}


def project(name: str, batches: tuple[int, ...], precision: str, db: str) -> dict[int, float]:
    """`thrifty model project` on one GPU of the H200 type: step time per local batch."""
    command = [sys.executable, "-m", "thrifty.cli", "model", "project", "--workload", f"builtin:{name}",
               "--instance-type", H200_TYPE, "--workers", "1", "--precision", precision,
               "--local-batch", ",".join(map(str, batches)), "--db", db, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return {b: float("nan") for b in batches}
    return {row["local_batch"]: row["step_time_s"] for row in json.loads(done.stdout)}


def md_rates(counts: tuple[int, ...], steps: int) -> list[dict]:
    from bench_torch_md import models, torch_ion_steps_per_s
    return [{"replicas": r, "dtype": dtype,
             "ion_steps_per_s": torch_ion_steps_per_s(models(r), steps, getattr(torch, dtype), "cuda")}
            for r in counts for dtype in ("float32", "float64")]


def plot(rows: list[dict]) -> None:
    import matplotlib.pyplot as plt
    names = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8))
    for ax, name in zip(axes, names, strict=True):
        for precision in PRECISIONS:
            mine = [r for r in rows if r["workload"] == name and r["precision"] == precision]
            if not mine:
                continue
            line, = ax.plot([r["local_batch"] for r in mine], [r["measured_samples_per_s"] for r in mine],
                            "o-", label=f"{precision} measured")
            projected = [(r["local_batch"], r["local_batch"] / r["projected_step_s"]) for r in mine
                         if r.get("projected_step_s") == r.get("projected_step_s")]
            if projected:
                ax.plot(*zip(*projected, strict=True), "x--", color=line.get_color(), label=f"{precision} projected")
        ax.set(title=name, xlabel="local batch", ylabel="samples/s", xscale="log", yscale="log")
        ax.legend(fontsize=6)
    fig.suptitle(f"thrifty train on {torch.cuda.get_device_name(0)} vs thrifty model project ({H200_TYPE})")
    fig.tight_layout()
    save_figure(fig, "gpu_training")


def main(steps: int, quick: bool) -> None:
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA device on this machine; nothing measured, nothing written")
        return
    names = ["digits", "resnet18-cifar10"] if quick else list(BATCHES)
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/thrifty.db"
        for name in names:
            for precision in PRECISIONS:
                batches = BATCHES[name][:1] if quick else BATCHES[name]
                projected = project(name, batches, precision, db) if precision != "bf16" else {}
                for batch in batches:
                    row = measure(name, batch, precision, steps)
                    row["projected_step_s"] = projected.get(batch, float("nan"))
                    row["projected_over_measured"] = row["projected_step_s"] / row["measured_step_s"]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    md = md_rates((32,) if quick else (32, 128), 20 if quick else 200)
    for row in md:
        print(json.dumps(row), flush=True)
    if quick:
        return
    write_result("gpu_training", {"gpu": torch.cuda.get_device_name(0), "steps": steps, "warmup": WARMUP,
                                  "torch": torch.__version__, "instance_type_projected": H200_TYPE,
                                  "training": rows, "md_torch_engine": md,
                                  "wall_s": time.perf_counter() - started})
    plot(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="two workloads, one batch, no files")
    args = parser.parse_args()
    main(args.steps, args.quick)
