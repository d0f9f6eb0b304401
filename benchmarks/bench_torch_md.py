# SPDX-License-Identifier: MIT
"""Throughput of the torch engine (md.torch_physics) against OpenMM for R small nanoconfinement replicas.

R replicas with different parameters (h 2-3 nm, z+ 1-3, c 0.5-1 M, a 4 nm box, cutoff 1.2 nm: 12 to
56 ions each) run `--steps` Langevin steps: all R at once as one batched torch program, and on
OpenMM's CPU platform one replica after another (PME as md.nanoconfinement builds it; the torch
engine sums Ewald at the same tolerance, 5e-4, with its own splitting: ewald.real_space_reach_nm).
The figure of merit is ion-steps per second, sum_i N_i * steps / wall time; building the systems and
contexts is not timed, one warm-up step of each is. The torch engine runs in float64 and in float32
(OpenMM's CPU platform computes mostly in single precision: float32 is the like-for-like row,
float64 the stricter). Run (quiet machine): `python benchmarks/bench_torch_md.py [--device cuda]
[--dtypes float64 float32] [--threads N] [--clock cpu]`; on a shared machine `--threads 1 --clock cpu`
times each engine by the CPU time of this process (all its threads) rather than the wall clock, which
other jobs' load inflates unevenly (a torch step of many small operations is descheduled more often
than OpenMM's few long ones); `--quick` (10 steps, R = 1 and 8, no files) checks it
end to end. Last, one default system (406 ions, 15 x 15 x 9 nm; `--steps`, DEFAULT_REPEATS times
alternating, the median of each engine's rate) on both, reported as ms a step side by side and
their ratio (torch / OpenMM; the goal, issue 24: at most 2): the torch engine's real-space terms
come from a Verlet list (neighbours), OpenMM's from its own list, with PME. Writes results/torch_md.json and .png.
"""

import argparse
import itertools
import statistics
import time

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
DEFAULT_REPEATS = 5
clock = CLOCKS["wall"]

import matplotlib.pyplot as plt
import openmm
import torch
from openmm import unit

from common import save_figure, write_result
from thrifty.md.engines.openmm_nanoconfinement import nanoconfinement_system
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.torch_physics import integrator as it
from thrifty.md.torch_physics import prepare_ewald, replicas


def models(count: int) -> list[NanoconfinementModel]:
    grid = itertools.cycle(itertools.product((2.0, 2.5, 3.0), (1, 2, 3), (0.5, 0.75, 1.0)))
    return [NanoconfinementModel(h_nm=h, z_plus=zp, c_molar=c, box_nm=4.0, cutoff_nm=1.2)
            for (h, zp, c), _ in zip(grid, range(count), strict=False)]


def torch_ion_steps_per_s(batch_models: list[NanoconfinementModel], steps: int, dtype: torch.dtype,
                          device: str) -> float:
    batch, positions = replicas(batch_models, dtype=dtype, device=device)
    setup = prepare_ewald(batch)
    generator = torch.Generator(device=device).manual_seed(0)
    state = it.step(batch, setup, it.start(batch, setup, positions, generator), generator=generator)  # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = clock()
    for _ in range(steps):
        state = it.step(batch, setup, state, generator=generator)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return int(batch.mask.sum()) * steps / (clock() - start)


def openmm_ion_steps_per_s(batch_models: list[NanoconfinementModel], steps: int, threads: int | None) -> float:
    contexts, ions = [], 0
    for model in batch_models:
        md = nanoconfinement_system(model)
        integrator = openmm.LangevinMiddleIntegrator(md.temperature_k, 1.0, md.timestep_ps)
        properties = {"Threads": str(threads)} if threads else {}
        context = openmm.Context(md.system, integrator, openmm.Platform.getPlatformByName("CPU"), properties)
        context.setPositions(md.positions * unit.nanometer)
        context.setVelocitiesToTemperature(md.temperature_k, 1)
        integrator.step(1)  # warm-up
        contexts.append(context)
        ions += md.system.getNumParticles()
    start = clock()
    for context in contexts:
        context.getIntegrator().step(steps)
        context.getState(getPositions=True)  # the step is done when its positions can be read
    return ions * steps / (clock() - start)


def main(counts: list[int], steps: int, dtypes: list[str], device: str, threads: int | None, write: bool) -> list[dict]:
    if threads:
        torch.set_num_threads(threads)
    def measure(batch_models: list[NanoconfinementModel], steps: int) -> dict:
        row = {"replicas": len(batch_models), "steps": steps,
               "openmm_cpu_ion_steps_per_s": openmm_ion_steps_per_s(batch_models, steps, threads)}
        for dtype in dtypes:
            rate = torch_ion_steps_per_s(batch_models, steps, getattr(torch, dtype), device)
            row[f"torch_{dtype}_ion_steps_per_s"] = rate
            row[f"torch_{dtype}_over_openmm"] = rate / row["openmm_cpu_ion_steps_per_s"]
        print(row)
        return row

    rows = [measure(models(count), steps) for count in counts]
    # the default system (406 ions): each engine DEFAULT_REPEATS times, alternating, the median rate
    # of each (one 50-step OpenMM run read 2.3 ms a step in one run and 4.3 ms in the next)
    repeats = [measure([NanoconfinementModel()], steps) for _ in range(DEFAULT_REPEATS)]
    rates = [key for key in repeats[0] if key.endswith("ion_steps_per_s")]
    one_large = {"replicas": 1, "steps": steps, "repeats": repeats,
                 **{key: statistics.median(r[key] for r in repeats) for key in rates}}
    for dtype in dtypes:
        one_large[f"torch_{dtype}_over_openmm"] = (one_large[f"torch_{dtype}_ion_steps_per_s"]
                                                   / one_large["openmm_cpu_ion_steps_per_s"])
    ions = len(nanoconfinement_system(NanoconfinementModel()).species)
    one_large["openmm_cpu_ms_per_step"] = 1e3 * ions / one_large["openmm_cpu_ion_steps_per_s"]
    for dtype in dtypes:
        one_large[f"torch_{dtype}_ms_per_step"] = 1e3 * ions / one_large[f"torch_{dtype}_ion_steps_per_s"]
        one_large[f"torch_{dtype}_ms_over_openmm_ms"] = 1 / one_large[f"torch_{dtype}_over_openmm"]
    print({k: v for k, v in one_large.items() if "ms" in k})
    if write:
        fig, (ax, bars) = plt.subplots(1, 2, figsize=(9, 3.5), gridspec_kw={"width_ratios": [3, 2]})
        for dtype, marker in zip(dtypes, "o^", strict=False):  # one or two dtypes
            ax.plot(counts, [r[f"torch_{dtype}_ion_steps_per_s"] for r in rows], marker + "-",
                    label=f"torch batched ({device}, {dtype})")
        ax.plot(counts, [r["openmm_cpu_ion_steps_per_s"] for r in rows], "s-", label="OpenMM CPU, one by one")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("replicas R")
        ax.set_ylabel("ion-steps per second")
        ax.legend(fontsize=7)
        labels = ["OpenMM CPU", *(f"torch {dtype}" for dtype in dtypes)]
        values = [one_large["openmm_cpu_ms_per_step"], *(one_large[f"torch_{dtype}_ms_per_step"] for dtype in dtypes)]
        bars.bar(labels, values, color=["C2", "C0", "C1"][:len(values)])
        for x, value in enumerate(values):
            bars.text(x, value, f"{value:.2f} ms" + (f"\n{value / values[0]:.2f}x" if x else ""), ha="center",
                      va="bottom", fontsize=7)
        bars.set_ylim(0, 1.25 * max(values))
        bars.set_ylabel("ms per step")
        bars.set_title("one default system (406 ions)", fontsize=8)
        bars.tick_params(axis="x", labelsize=7)
        fig.tight_layout()
        save_figure(fig, "torch_md")
        write_result("torch_md", {"device": device, "dtypes": dtypes, "threads": threads or torch.get_num_threads(),
                                  "clock": next(name for name, f in CLOCKS.items() if f is clock),
                                  "rows": rows, "one_default_system": one_large})
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--dtypes", nargs="+", choices=["float64", "float32"], default=["float64", "float32"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch and OpenMM CPU threads (default: theirs)")
    parser.add_argument("--clock", choices=list(CLOCKS), default="wall",
                        help="wall time, or this process's CPU time (a shared machine, with --threads 1)")
    parser.add_argument("--quick", action="store_true", help="10 steps, R = 1 and 8, no files: an end-to-end check")
    args = parser.parse_args()
    clock = CLOCKS[args.clock]
    if args.quick:
        main([1, 8], 10, args.dtypes, args.device, args.threads, write=False)
    else:
        main(args.replicas, args.steps, args.dtypes, args.device, args.threads, write=True)
