# SPDX-License-Identifier: MIT
"""Every benchmark, with what it measures, the command that runs it, its tags and the results it writes.

    python benchmarks/run_all.py                   # every benchmark, one after another (hours)
    python benchmarks/run_all.py --tags quick      # a subset: any of quick, long, md, gpu (comma-separated)
    python benchmarks/run_all.py --list            # the registry, nothing run

Each benchmark runs as its own process (`python benchmarks/bench_x.py ARGS`, the command a result
records) and writes JSON and PNG under benchmarks/results/; docs/results.md is rendered from those
files by benchmarks/render_results.py, which reads this registry. Tags: `quick` (minutes at most on
2 cores), `long` (tens of minutes or more), `md` (molecular dynamics: OpenMM, the torch engine or
campaigns), `gpu` (needs a CUDA GPU; without one the script says so and writes nothing).
"""

import argparse
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
TAGS = frozenset({"quick", "long", "md", "gpu"})


@dataclass(frozen=True)
class Benchmark:
    script: str                 # a file in benchmarks/
    args: tuple[str, ...]       # its command-line arguments
    tags: frozenset[str]
    results: tuple[str, ...]    # the benchmarks/results/NAME.json files it writes
    measures: str               # one sentence: what it measures

    @property
    def command(self) -> str:
        return " ".join(["python", f"benchmarks/{self.script}", *self.args])


def _b(script: str, tags: str, results: str, measures: str, args: tuple[str, ...] = ()) -> Benchmark:
    return Benchmark(script, args, frozenset(tags.split()), tuple(results.split()), measures)


REGISTRY: tuple[Benchmark, ...] = (
    _b("bench_startup.py", "quick", "startup",
       "How fast commands answer from a cold process: `thrifty --help`, `thrifty preempt schedule`, and the "
       "planner's throughput in the first plan of `make demo`'s process."),
    _b("bench_optimizer.py", "quick", "optimizer_throughput",
       "Planner throughput, warm: candidates evaluated per second over the bundled catalog for a fixed "
       "synthetic job model."),
    _b("bench_gpu_projection.py", "long", "gpu_projection",
       "The GPU roofline against published training throughput, held out by model and by GPU, per regime "
       "(launch-, memory-, compute-bound)."),
    _b("bench_cpu_scaling.py", "quick", "cpu_scaling",
       "The Amdahl serial fraction measured at 1 and 2 threads, and the speed-up it projects for big CPU VMs."),
    _b("bench_steptime.py", "long", "steptime_prediction",
       "Step-time prediction error (MdAPE) on held-out configurations of real profiles on this machine, "
       "thrifty's model against Ernest's."),
    _b("bench_steptime_fit.py", "quick", "steptime_fit",
       "The step-time fit with the measured sync against the same fit on step times alone, on held-out "
       "configurations of Pollux-shaped, irregular and locally measured traces."),
    _b("bench_steptime_irregular.py", "quick", "steptime_irregular",
       "The search's step-time model on irregular cluster-like traces, fitted on about 5% of each trace."),
    _b("bench_noise_overhead.py", "quick", "noise_overhead",
       "Cost of measuring the gradient noise scale, as a fraction of step time, on real processes."),
    _b("bench_stateff.py", "long", "statistical_efficiency",
       "Steps to the target metric measured at several batch sizes against those predicted from the "
       "gradient noise scale measured at the smallest."),
    _b("bench_hetero.py", "long", "hetero_training",
       "Heterogeneity-aware training: uniform vs static vs dynamic batching on emulated unequal workers "
       "(4 ranks at OmniLearn's profiles; 2 ranks for the timing claims)."),
    _b("bench_hetero.py", "long", "hetero_reaction",
       "The batch controller's reaction to speed changes: steps to a balanced split and wasted compute, "
       "measured and on the simulated clock.", ("reaction",)),
    _b("bench_asp.py", "long", "asp_training",
       "Asynchronous training with a parameter server: plain ASP against ASP with the batch controller, "
       "with and without its batch floor, at equal wall time."),
    _b("bench_preempt.py", "quick", "preemption",
       "Checkpoint schedules (DP vs Young/Daly vs none) on Google's 2019 preemptible-VM lifetimes, VM reuse "
       "and spot vs on-demand, each checked by Monte Carlo."),
    _b("bench_faults.py", "long md", "fault_injection",
       "An OpenMM job under `thrifty run`, preempted at lifetimes drawn from the bathtub model: lost work, "
       "bit-identity and measured against predicted overhead.", ("md",)),
    _b("bench_faults.py", "long", "fault_injection_train",
       "`thrifty train` (2 ranks) under `thrifty run`, preempted the same way: lost work, bit-identity and "
       "measured against predicted overhead.", ("train",)),
    _b("bench_search.py", "long", "search",
       "Online search against the oracle and the baselines on synthetic traces with real-world irregularities."),
    _b("bench_search_real.py", "long", "search_real",
       "Online search on seeded irregular cluster-like traces, before and after the recoup check."),
    _b("bench_search_local.py", "long", "search_local",
       "Online search on traces measured here with real `thrifty train` launches, and one real local search "
       "end to end."),
    _b("bench_torch_md.py", "long md", "torch_md",
       "Throughput of the batched torch MD engine against OpenMM's CPU platform for R small nanoconfinement "
       "replicas, and one default-size system."),
    _b("bench_md_surrogate.py", "md", "md_surrogate",
       "The nanoconfinement surrogate on real MD held out (the replay set, 5 splits of 30 training and 50 "
       "held-out runs) beside no-ML baselines: RMS against MD and the truth, chi^2, net charge, band coverage."),
    _b("bench_md_surrogate_basis.py", "md", "md_surrogate_basis",
       "How the surrogate's shape basis was chosen: held-out RMS against the truth over the flat profile's "
       "for wall-distance bumps and slit cosines, on 20 splits the held-out benchmark does not score."),
    _b("bench_md_campaign.py", "long md", "md_campaign",
       "A campaign of stand-in simulations (numpy, not MD) on an emulated preemptible Ray pool against the "
       "same campaign on demand."),
    _b("bench_md_campaign_real.py", "long md", "md_campaign_real",
       "The ML-assisted campaign on real MD (nanoconfinement on OpenMM): runs to a held-out accuracy, the "
       "spot pool vs on demand, surrogate speed-up, early stopping."),
    _b("bench_md_replay.py", "long md", "md_replay",
       "Active, random and grid sampling replayed on the stored real-MD data set (benchmarks/data/md_replay): "
       "held-out chi^2 per bin against runs used, over seeds."),
    _b("bench_serve_load.py", "quick", "bench_serve_load",
       "`thrifty serve` under 50 concurrent clients for 30 s while a search writes its store: failed "
       "requests, latency percentiles, the writer's commit times."),
    _b("bench_gpu.py", "gpu", "gpu_training",
       "`thrifty train`'s step on a real GPU beside what `thrifty model project` predicts for it, and the "
       "torch MD engine on CUDA."),
)


def select(tags: Iterable[str] | None) -> list[Benchmark]:
    """The registered benchmarks with any of `tags` (all of them for None)."""
    if tags is None:
        return list(REGISTRY)
    wanted = set(tags)
    unknown = wanted - TAGS
    if unknown:
        raise ValueError(f"unknown tag {', '.join(sorted(unknown))}: known are {', '.join(sorted(TAGS))}")
    return [b for b in REGISTRY if b.tags & wanted]


def by_result(name: str) -> Benchmark | None:
    """The registered benchmark that writes benchmarks/results/NAME.json."""
    return next((b for b in REGISTRY if name in b.results), None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tags", default=None, help="comma-separated: run only benchmarks with any of these tags")
    parser.add_argument("--list", action="store_true", help="print the registry and run nothing")
    args = parser.parse_args(argv)
    try:
        chosen = select(None if not args.tags else [t.strip() for t in args.tags.split(",") if t.strip()])
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.list:
        for b in chosen:
            print(f"{b.command:50s} [{', '.join(sorted(b.tags))}] -> {', '.join(b.results)}")
        return 0
    failed = []
    for number, b in enumerate(chosen, 1):
        print(f"== [{number}/{len(chosen)}] {b.command}", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, str(BENCHMARKS / b.script), *b.args], cwd=BENCHMARKS.parent)
        if done.returncode != 0:
            failed.append(f"{b.command} (exit {done.returncode})")
    print("results in benchmarks/results/; render docs/results.md with python benchmarks/render_results.py",
          file=sys.stderr)
    if failed:
        print("failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
