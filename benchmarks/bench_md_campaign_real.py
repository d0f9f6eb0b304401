# SPDX-License-Identifier: MIT
"""The ML-assisted MD campaign of issue 12 on REAL MD (the nanoconfinement model on OpenMM's CPU
platform, one thread per run), not the stand-ins of bench_md_campaign.py and bench_md_surrogate.py.

Box: h 2.5-4 nm, z+ 1-3, c 0.3-0.9 M, d+ 0.474 and d- 0.627 nm fixed; a small system (box side
4 nm, Coulomb cutoff 1.5 nm: 8-68 ions) and short runs (1000 steps of equilibration, a sample every
100 steps, 5 samples a block) that stop when every block-averaged error bar is at most 0.15 M
(with at least 10 blocks) or at 20,000 steps. Bins are the MD's 0.05 nm, so on a 16 nm^2 wall a
bin holds few ions and the error bars are wide: the accuracy targets below are for this setup.

(a) Runs to a held-out accuracy: a surrogate (an ensemble of 5 small 64 -> 64 networks, to fit
    the time; the published one is 512 -> 256) is trained after every round and scored on TEST
    held-out random MD runs (share of bins within the MD error bar, md.surrogate.metrics). Active
    learning (md.surrogate.active.next_points: the pick of `--sampler active`) and random sampling start
    from the same START random runs and add K per round up to BUDGET; the grid is a sequence of
    full grids (z+ x levels of h x levels of c). Every point is one MD run (a run two strategies
    share is run once).
(b) The campaign on the emulated spot pool (md.campaign.pool.EmulatedPool: NODES one-CPU Ray nodes,
    bathtub lifetimes gcp-2019, TIME_SCALE model seconds per wall second, DP checkpoints, SciSpot
    placement) vs on demand, the same CAMPAIGN_RUNS random points (md.campaign.point_samplers.RandomSampler, one
    seed, so both run the same points): wall time, node-hours and bill (n1-standard-4), preemptions,
    work redone, duplicate runs.
(c) Held-out accuracy and RMSE of contact, peak and mid-plane density of each strategy's last
    surrogate; predict latency per point (median of single-point predictions) against the mean MD
    wall time per run: the surrogate's speed-up.
(d) Early stopping: MD steps of every run of (a) against a fixed length of the longest any run
    needed (what a campaign without the stop would have to choose to converge everywhere; the cap
    if a run reached it unconverged) and against the cap.

`--quick` (the end-to-end check): looser runs (tolerance 0.3 M, cap 8000 steps), TEST 2, START 5,
K 2, BUDGET 7, a 6-point grid, 4 campaign runs on 2 nodes, one spot seed; writes
md_campaign_real_quick.json / .png (git-ignored: a check, not a result). The full run writes
md_campaign_real.json / .png: 37 min on a quiet 2-core machine (2026-12-01; README "On real MD").

Estimate for the full run, from two quick runs (2-core machine, load average 4-7 from other jobs;
171 and 206 s in all): their 17 MD runs each took 3.5-10 s for 6000-8000 steps (0.6-1.3 ms a step;
6000 is the least a run can take: 1000 + 10 blocks of 500), a training of the small ensemble on
5-7 runs about 5 s, a 4-run campaign on 2 nodes 21-28 s plus the pool's start. At tolerance 0.15 M a run
needs about 4x the samples of one at 0.3 M, so 12,000-20,000 steps (the cap), 10-20 s; (a) runs
about 12 + 8 + 2 x 20 + 45 = 105 distinct MD runs, about 26 min, plus 16 trainings on up to 45
runs, about 3 min; (b) four campaigns of 12 runs on 3 one-CPU nodes (on 2 cores), about 1.5-2 min
each. In all about 35-45 min on a quiet machine, more on a busy one.
"""

import contextlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from bench_md_campaign import pool_campaign
from common import save_figure, write_result
from thrifty.md.campaign.checkpoint_schedule import ScheduledCheckpoints
from thrifty.md.campaign.nanoconfinement_runs import NanoconfinementRuns
from thrifty.md.campaign.point_samplers import RandomSampler
from thrifty.md.params import PARAMETERS, ParameterBox
from thrifty.md.profile_grid import features
from thrifty.md.runs import Run, grid_arrays, read_run
from thrifty.md.sampling_settings import SamplingSettings
from thrifty.md.space import parse_space
from thrifty.md.surrogate import Ensemble, SurrogateConfig, train_ensemble
from thrifty.md.surrogate.active import next_points
from thrifty.md.surrogate.metrics import accuracy

QUICK = "--quick" in sys.argv
NAME = "md_campaign_real_quick" if QUICK else "md_campaign_real"
BOX = ParameterBox((2.5, 1, -1, 0.3, 0.474, 0.627), (4.0, 3, -1, 0.9, 0.474, 0.627))
SPACE = "[h_nm]\nmin = 2.5\nmax = 4.0\n[z_plus]\nvalues = [1, 2, 3]\n[c_molar]\nmin = 0.3\nmax = 0.9\n"
SAMPLING = SamplingSettings(chunk=100, equilibration_steps=1000, samples_per_block=5, tolerance_molar=0.15, relative_tolerance=0.0,
                            cap_steps=20_000)
if QUICK:
    SAMPLING = replace(SAMPLING, tolerance_molar=0.3, cap_steps=8000)
SIM = NanoconfinementRuns(platform="CPU", sampling=SAMPLING, box_nm=4.0, cutoff_nm=1.5)
NETWORK = SurrogateConfig(hidden=(64, 64), max_epochs=400, patience=60)
TEST, START, K, BUDGET = (2, 5, 2, 7) if QUICK else (12, 8, 4, 28)
GRID_LEVELS = ((2, 1),) if QUICK else ((2, 2), (3, 2), (3, 3), (4, 3))  # (h, c) levels, x 3 z+: 45 points
TARGETS = (0.5, 0.6) if QUICK else (0.7, 0.8, 0.9)
NODES, CAMPAIGN_RUNS = (2, 4) if QUICK else (3, 12)
SPOT_SEEDS = (1,) if QUICK else (1, 2, 3)
TIME_SCALE = 600.0  # model seconds per wall second: a 10 s run is 1.7 model hours
os.environ.setdefault("OPENMM_CPU_THREADS", "1")  # one thread per MD run (the Ray nodes inherit it)


class MD:
    """MD runs of points (PARAMETERS order), each simulated once, with its wall time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs: dict[tuple[float, ...], Run] = {}
        self.log: list[dict] = []

    def __call__(self, points: np.ndarray) -> list[Run]:
        return [self.run(p) for p in points]

    def run(self, point: np.ndarray) -> Run:
        key = tuple(round(float(v), 6) for v in point)
        if key not in self.runs:
            folder = self.root / f"run{len(self.runs):04d}"
            began = time.perf_counter()
            [result] = SIM.run_batch([dict(zip(PARAMETERS, point.tolist(), strict=True))], [folder],
                                     ScheduledCheckpoints(folder / "ck", []))
            self.log.append({"point": list(key), "wall_s": time.perf_counter() - began, "steps": result["steps"],
                             "converged": result["converged"]})
            print(f"run {len(self.runs)}: {self.log[-1]}", file=sys.stderr, flush=True)
            self.runs[key] = read_run(folder)
        return self.runs[key]


def grid(levels: tuple[int, int]) -> np.ndarray:
    h = np.linspace(BOX.low[0], BOX.high[0], levels[0])
    c = np.linspace(BOX.low[3], BOX.high[3], levels[1])
    return np.array([[hv, zp, -1, cv, BOX.low[4], BOX.low[5]] for hv in h for zp in (1, 2, 3) for cv in c])


def learning_curves(md: MD, test: list[Run]) -> dict:
    points, density, error = grid_arrays(test, NETWORK.bins)
    curves: dict[str, list[dict]] = {"active": [], "random": [], "grid": []}

    def score(strategy: str, runs: list[Run]) -> Ensemble:
        model = train_ensemble(runs, NETWORK)
        result = accuracy(points, model.predict(points).mean, density, error)
        curves[strategy].append({"runs": len(runs), "within_error": result.within_error, **result.rmse_molar})
        return model

    start = md(BOX.sample(START, np.random.default_rng(1)))
    models: dict[str, Ensemble] = {}
    for strategy in ("active", "random"):
        rng, runs = np.random.default_rng(2), list(start)
        while True:
            models[strategy] = score(strategy, runs)
            if len(runs) + K > BUDGET:
                break
            new = next_points(models[strategy], BOX, K, rng) if strategy == "active" else BOX.sample(K, rng)
            runs += md(new)
    for levels in GRID_LEVELS:
        models["grid"] = score("grid", md(grid(levels)))
    reached = {f"{t:.2f}": {s: next((r["runs"] for r in c if r["within_error"] >= t), None)
                            for s, c in curves.items()} for t in TARGETS}
    return {"curves": curves, "runs_to_target": reached, "latency_ms": predict_latency_ms(models["random"], points)}


def predict_latency_ms(model: Ensemble, points: np.ndarray) -> float:
    """Median of single-point predictions with contact, peak and mid-plane, as `thrifty md predict`."""
    times = []
    for point in points[np.arange(50) % len(points)]:
        began = time.perf_counter()
        mean = model.predict(point).mean[0]
        features(mean[0], point[0], point[4]), features(mean[1], point[0], point[5])
        times.append(time.perf_counter() - began)
    return 1e3 * float(np.median(times))


def early_stopping(log: list[dict]) -> dict:
    steps = [r["steps"] for r in log]
    return {"runs": len(steps), "converged": sum(r["converged"] for r in log), "steps_run": sum(steps),
            "fixed_at_longest_needed": len(steps) * max(steps), "fixed_at_cap": len(steps) * SAMPLING.cap_steps,
            "saved_vs_longest": 1 - sum(steps) / (len(steps) * max(steps)),
            "saved_vs_cap": 1 - sum(steps) / (len(steps) * SAMPLING.cap_steps)}


def campaign(kind: str, root: Path, job_hours: float, seed: int = 0) -> dict:
    with contextlib.redirect_stdout(sys.stderr):  # Ray prints its nodes' deaths on stdout
        return _campaign(kind, root / f"{kind}-{seed}", job_hours, seed)


def _campaign(kind: str, root: Path, job_hours: float, seed: int) -> dict:
    report, cost, duplicates = pool_campaign(kind, root, nodes=NODES, time_scale=TIME_SCALE, job_hours=job_hours,
                                             budget=CAMPAIGN_RUNS, sampler=RandomSampler(parse_space(SPACE), seed=7),
                                             simulation=SIM, seed=seed)
    return {"pool": f"{kind}:{NODES}", "seed": seed, "campaign_wall_s": report.wall_s, "runs": report.completed,
            "steps": report.steps, "converged": report.converged, "preemptions": report.preemptions,
            "retired_for_fresh": report.retired, "attempts": report.attempts, "lost_work_wall_s": report.lost_work_s,
            "lost_work_model_hours": report.lost_work_s * TIME_SCALE / 3600, "duplicate_runs": duplicates, **cost}


def plot(result: dict) -> None:
    from matplotlib.figure import Figure
    fig = Figure(figsize=(12, 4))
    ax, bx = fig.subplots(1, 2)
    for strategy, colour in zip(("active", "random", "grid"), ("tab:red", "tab:blue", "tab:gray"), strict=True):
        curve = result["learning"]["curves"][strategy]
        ax.plot([r["runs"] for r in curve], [r["within_error"] for r in curve], "o-", color=colour, label=strategy)
    ax.set_xlabel("MD runs trained on")
    ax.set_ylabel(f"share of bins within the MD error bar ({TEST} held-out runs)")
    ax.legend()
    campaigns = result["campaigns"]
    labels = [f"{c['pool']} s{c['seed']}" for c in campaigns]
    bx.bar(labels, [c["campaign_wall_s"] for c in campaigns],
           color=["tab:orange" if c["pool"].startswith("spot") else "tab:blue" for c in campaigns])
    bx.set_ylabel("campaign wall time, s")
    bx.set_title(f"{CAMPAIGN_RUNS} MD runs; preemptions " + ", ".join(str(c["preemptions"]) for c in campaigns))
    fig.suptitle(f"nanoconfinement MD campaign{' (--quick)' if QUICK else ''}")
    fig.tight_layout()
    save_figure(fig, NAME)


def main() -> None:
    torch.set_num_threads(1)
    began = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="bench-md-real-"))
    md = MD(root / "learning")
    test = md(BOX.sample(TEST, np.random.default_rng(0)))
    learning = learning_curves(md, test)
    md_wall_s = float(np.mean([r["wall_s"] for r in md.log]))
    job_hours = md_wall_s * TIME_SCALE / 3600
    spots = [campaign("spot", root, job_hours, seed) for seed in SPOT_SEEDS]
    on_demand = campaign("on-demand", root, job_hours)
    spot_cost = float(np.mean([c["cost_at_spot_usd"] for c in spots]))
    spot_wall = float(np.mean([c["campaign_wall_s"] for c in spots]))
    result = {
        "setup": {"quick": QUICK, "simulation": asdict(SIM),
                  "box": BOX.to_dict(), "network": {"hidden": NETWORK.hidden, "members": NETWORK.members},
                  "test_runs": TEST, "start": START, "k": K, "budget": BUDGET, "grid_levels_h_c": GRID_LEVELS,
                  "nodes": NODES, "campaign_runs": CAMPAIGN_RUNS, "time_scale": TIME_SCALE,
                  "lifetime_model": "gcp-2019", "instance_type": "gcp n1-standard-4"},
        "learning": learning,
        "surrogate": {"predict_ms_median": learning["latency_ms"], "md_wall_s_mean": md_wall_s,
                      "speedup_per_prediction": md_wall_s * 1e3 / learning["latency_ms"],
                      "last_within_error": {s: c[-1]["within_error"] for s, c in learning["curves"].items()}},
        "early_stopping": early_stopping(md.log), "md_runs": md.log,
        "campaigns": [*spots, on_demand],
        "spot_bill_over_on_demand_bill": spot_cost / on_demand["cost_at_on_demand_usd"],
        "spot_wall_over_on_demand_wall": spot_wall / on_demand["campaign_wall_s"],
        "duplicate_runs": sum(c["duplicate_runs"] for c in [*spots, on_demand])}
    result["wall_s"] = time.perf_counter() - began
    print(write_result(NAME, result))
    plot(result)
    for key in ("surrogate", "early_stopping", "spot_bill_over_on_demand_bill", "spot_wall_over_on_demand_wall",
                "duplicate_runs", "wall_s"):
        print(key, result[key])
    print("runs to target", learning["runs_to_target"])
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
