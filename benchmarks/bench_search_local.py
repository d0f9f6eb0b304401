# SPDX-License-Identifier: MIT
"""Online search on traces measured here, and one real search end to end on the local backend.

1. Measured traces: every configuration of the bundled emulated VM types (data/search/
   local_types.csv: 1-2 nodes, at most 2 ranks, global batch 32/64/128) runs as a real
   `thrifty train` launch (search.local) for WARMUP + MEASURE steps, for two workloads
   (builtin:digits, builtin:tabular); the mean step time and sync time of the measured steps
   make a trace (benchmarks/results/local_trace_<workload>.csv). Two moves of the first launch
   measure what this machine pays for each kind: a change of the global batch alone, taken in
   place by the running launch (train.batch_requests), and a relaunch on another type
   (checkpoint, exit, start, resume).
2. On each measured trace, priced by two type tables (the bundled prices, and "flat": every type
   the same $/h per unit of speed), the search and the baselines run in the sim backend over SEEDS
   seeds for a long job (SIM_TARGET: the oracle trains for hours, the regime the search is for;
   objectives cost and time; measurement noise 3%, restart = the relaunch measured here, batch
   change = the in-place change measured here, VM start-up 60 s), as bench_search.py does for
   synthetic traces.
3. End to end: one real `local` search of builtin:digits to its target (cost objective, from the
   configuration `thrifty search --backend local` starts on: the plan's recommendation from a
   fresh profile of the workload, search.start; the job's B_noise is the profile's, as the CLI's
   default), then the oracle's configuration (the best on the
   digits trace, found by the sim) trained from the start to the same target for real; both
   with the wall clock and the bill of search.local.
Run (about 25 minutes on 2 cores):
    PYTHONPATH=src python benchmarks/bench_search_local.py [--seeds 20]
"""

import argparse
import csv
import json
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from bench_search import SKIP_BO_HELP, bayes_wanted, overhead_bars, run_bo
from common import RESULTS, save_figure, write_result
from thrifty.pipeline import job_model
from thrifty.progress import ProgressBar
from thrifty.search.config import Config, batch_change_only
from thrifty.search.harness import STRATEGIES, Scenario, cheapest_start, medians, oracle, run_strategy, with_overheads
from thrifty.search.local import LocalBackend, LocalType, load_local_types, local_candidates, local_search_settings
from thrifty.search.loop import Search
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.search.start import plan_start
from thrifty.search.trace import TraceRow
from thrifty.store import Store

WORKLOADS = {"builtin:digits": 200.0, "builtin:tabular": 100.0}  # stated noise scales B_noise (samples)
BATCHES = [32, 64, 128]
WARMUP, MEASURE = 10, 40
STARTUP_S = 10.0  # emulated VM start-up of the real local runs
SIM_STARTUP_S = 60.0  # VM start-up in the sim, as bench_search.py
SIM_TARGET = 2e8  # samples-at-small-batch: the oracle trains digits for 10-40 h at these step times
E2E_TARGET = 300_000.0  # samples-at-small-batch: the oracle trains digits for several minutes here


def flat_prices(types: list[LocalType]) -> list[LocalType]:
    """Every type at the same $/h per unit of speed per worker (the cheapest's)."""
    rate = min(t.price_per_hour / (t.speed * t.workers_per_node) for t in types)
    return [LocalType(t.instance_type, t.speed, t.workers_per_node, rate * t.speed * t.workers_per_node)
            for t in types]


def measure_trace(workload: str, types: list[LocalType], out: Path) -> tuple[list[dict], float, float]:
    """Mean step and sync time of every configuration, each from its own launch; and the pause of
    one batch change in place and of one relaunch, measured."""
    configs = local_candidates(types, BATCHES, max_nodes=2, max_ranks=2)
    schedule = NoiseSchedule.constant(WORKLOADS[workload], 1e12)  # a target never reached
    rows, restart, batch_change = [], float("nan"), float("nan")
    bar = ProgressBar(f"measure {workload}", len(configs))
    for k, config in enumerate(configs):
        with tempfile.TemporaryDirectory(prefix="thrifty-trace-") as folder:
            backend = LocalBackend(workload, types, schedule, Path(folder), global_batches=BATCHES)
            try:
                backend.launch(config)
                backend.measure(WARMUP)
                window = backend.measure(MEASURE)
                if k == 0:  # one move of each kind: the batch alone (in place), then a relaunch
                    backend.launch(next(c for c in configs if batch_change_only(config, c)))
                    backend.measure(3)
                    batch_change = backend.batch_changes_s[0]
                    backend.launch(next(c for c in configs if c.instance_type != config.instance_type))
                    backend.measure(1)
                    restart = backend.restarts_s[0]
            finally:
                backend.close()
        node = next(t for t in types if t.instance_type == config.instance_type)
        rows.append({"instance_type": config.instance_type, "num_nodes": config.num_nodes,
                     "num_workers": config.num_workers, "local_batch": int(config.local_batch),
                     "step_time_s": float(np.mean(window.step_time_s)), "sync_time_s": window.sync_time_s,
                     "price_per_hour": node.price_per_hour})
        bar.update(k + 1)
    bar.close()
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows, restart, batch_change


def trace_rows(measured: list[dict], types: list[LocalType]) -> list[TraceRow]:
    price = {t.instance_type: t.price_per_hour for t in types}
    return [TraceRow(Config(r["instance_type"], r["num_nodes"], r["num_workers"], r["local_batch"] * r["num_workers"]),
                     r["step_time_s"], r["sync_time_s"], price[r["instance_type"]] * r["num_nodes"])
            for r in measured]


def sim_on_trace(rows: list[TraceRow], noise_scale: float, target: float, restart_s: float, batch_change_s: float,
                 seeds: int, with_bo: bool = True) -> dict:
    strategies = list(STRATEGIES) + (["bayes_opt"] if with_bo else [])
    start = cheapest_start({r.config: r.price_per_hour for r in rows})
    out = {}
    for goal in (Objective("cost"), Objective("time")):
        scenario = Scenario(rows, NoiseSchedule.constant(noise_scale, target), goal, 0.03, restart_s, SIM_STARTUP_S,
                            batch_change_s)
        best = oracle(scenario)
        row = {"oracle_config": best.final_config.to_dict(), "oracle_time_s": best.time_s,
               "oracle_cost_usd": best.cost_usd, "start": start.to_dict()}
        windows = 0
        for name in strategies:
            runs = [with_overheads(run_bo(scenario, s, start, windows) if name == "bayes_opt" else
                                   run_strategy(scenario, name, s, start, windows), best) for s in range(seeds)]
            row[name] = medians(runs)
            row[name]["found_oracle_config"] = float(np.mean([r["final_config"] == row["oracle_config"] for r in runs]))
            if name == "search":
                windows = int(round(row[name]["probes"]))
        out[goal.kind] = row
    return out


def planned_start(workload: str, types: list[LocalType], folder: Path) -> tuple[Config, dict, float]:
    """Where `thrifty search --backend local` starts and what it assumes: the plan's recommendation
    from the workload's job model (a fresh profile here, in a throwaway store) for the cost
    objective, with its predicted time and cost, and the job model's B_noise (the job's noise
    scale for the real runs: the search measures its own, and a stated value far from it would
    make the search and the oracle optimise different jobs)."""
    store = Store(folder / "profile.db")
    try:
        job = job_model(store, workload)[0]
    finally:
        store.close()
    planner = LocalBackend(workload, types, NoiseSchedule.constant(job.noise_scale, E2E_TARGET), folder / "plan",
                           global_batches=BATCHES, startup_cost_s=STARTUP_S)
    try:
        planned = plan_start(job, planner, Objective("cost"))
    finally:
        planner.close()
    return planned.config, {"time_s": planned.time_s, "cost_usd": planned.cost_usd}, float(job.noise_scale)


def read_trace(path: Path) -> list[dict]:
    """A trace measure_trace wrote (for --reuse-traces)."""
    with open(path, newline="") as handle:
        return [{"instance_type": r["instance_type"], "num_nodes": int(r["num_nodes"]),
                 "num_workers": int(r["num_workers"]), "local_batch": int(r["local_batch"]),
                 "step_time_s": float(r["step_time_s"]),
                 "sync_time_s": float(r["sync_time_s"]) if r["sync_time_s"] else None,
                 "price_per_hour": float(r["price_per_hour"])} for r in csv.DictReader(handle)]


def real_run(workload: str, types: list[LocalType], noise_scale: float, target: float, start: Config | None,
             fixed: Config | None, folder: Path) -> dict:
    """A real local job to `target`: searched from `start`, or trained on `fixed` throughout."""
    schedule = NoiseSchedule.constant(noise_scale, target)
    backend = LocalBackend(workload, types, schedule, folder, global_batches=BATCHES, startup_cost_s=STARTUP_S)
    wall = time.perf_counter()
    try:
        if fixed is None:
            outcome = Search(backend, local_search_settings(Objective("cost"), backend)).run(start)
            probes, moves, final = [p.to_dict() for p in outcome.probes], outcome.moves, outcome.final_config
        else:
            backend.launch(fixed)
            backend.finish()
            probes, moves, final = [], 0, fixed
    finally:
        backend.close()
    return {"time_s": backend.elapsed_s, "cost_usd": backend.cost_usd, "final_config": final.to_dict(),
            "moves": moves, "windows": len(probes), "probes": probes, "restarts_s": backend.restarts_s,
            "batch_changes_s": backend.batch_changes_s,
            "wall_s": time.perf_counter() - wall, "launches": len(list(folder.glob("launch-*.log")))}


def main(seeds: int = 20, reuse_traces: bool = False, with_bo: bool = True) -> dict:
    bundled = load_local_types()
    tables = {"bundled prices": bundled, "flat prices": flat_prices(bundled)}
    measured, restarts, batch_changes, sims = {}, {}, {}, {}
    previous = json.loads((RESULTS / "search_local.json").read_text()) if reuse_traces else None
    for workload in WORKLOADS:
        trace = RESULTS / f"local_trace_{workload.split(':')[1]}.csv"
        if previous is not None:  # the traces and relaunch times of the latest run, re-used
            measured[workload], restarts[workload] = read_trace(trace), previous["measured_restart_s"][workload]
            batch_changes[workload] = previous["measured_batch_change_s"][workload]
        else:
            measured[workload], restarts[workload], batch_changes[workload] = measure_trace(workload, bundled, trace)
    for workload, noise in WORKLOADS.items():
        for table, types in tables.items():
            rows = trace_rows(measured[workload], types)
            sims[f"{workload} | {table}"] = sim_on_trace(rows, noise, SIM_TARGET, restarts[workload],
                                                         batch_changes[workload], seeds, with_bo)
            for goal, row in sims[f"{workload} | {table}"].items():
                print(f"{workload:16s} {table:15s} {goal:5s} search {row['search']['overhead_' + goal]:+.1%} "
                      f"(p90 {row['search']['p90_overhead_' + goal]:+.1%}), exhaustive "
                      f"{row['exhaustive']['overhead_' + goal]:+.1%}, random {row['random']['overhead_' + goal]:+.1%}",
                      flush=True)
    digits = trace_rows(measured["builtin:digits"], bundled)
    with tempfile.TemporaryDirectory(prefix="thrifty-e2e-") as folder:
        start, planned, noise = planned_start("builtin:digits", bundled, Path(folder))
        oracle_config = oracle(Scenario(digits, NoiseSchedule.constant(noise, E2E_TARGET), Objective("cost"), 0.0,
                                        restarts["builtin:digits"], STARTUP_S,
                                        batch_changes["builtin:digits"])).final_config
        searched = real_run("builtin:digits", bundled, noise, E2E_TARGET, start, None, Path(folder) / "search")
        best = real_run("builtin:digits", bundled, noise, E2E_TARGET, None, oracle_config, Path(folder) / "oracle")
    e2e = {"target_samples": E2E_TARGET, "noise_scale": noise, "start": start.to_dict(),
           "start_predicted": planned,
           "search": searched, "oracle": best,
           "overhead_time": searched["time_s"] / best["time_s"] - 1,
           "overhead_cost": searched["cost_usd"] / best["cost_usd"] - 1}
    print(f"end to end: search {searched['time_s']:.0f} s ${searched['cost_usd']:.4f} on "
          f"{Config(**searched['final_config']).label()} ({searched['windows']} windows, {searched['moves']} moves); "
          f"oracle {best['time_s']:.0f} s ${best['cost_usd']:.4f} on {oracle_config.label()}: "
          f"{e2e['overhead_time']:+.1%} time, {e2e['overhead_cost']:+.1%} cost")
    plot(sims, e2e)
    data = {"seeds": seeds, "batches": BATCHES, "warmup_steps": WARMUP, "measured_steps": MEASURE,
            "startup_cost_s": STARTUP_S, "sim_startup_cost_s": SIM_STARTUP_S, "sim_target_samples": SIM_TARGET,
            "measured_restart_s": restarts, "measured_batch_change_s": batch_changes, "noise_scales": WORKLOADS,
            "types": {k: [t.__dict__ for t in v] for k, v in tables.items()},
            "bayes_opt": "optuna GPSampler" if with_bo else "skipped (--skip-bo)",
            "traces": measured, "sim": sims, "end_to_end": e2e}
    write_result("search_local", data)
    return data


def plot(sims: dict, e2e: dict) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 1]})
    names = ["search", "exhaustive", "random", "plan_alone", "ernest"] + (
        ["bayes_opt"] if "bayes_opt" in next(iter(sims.values()))["cost"] else [])
    keys = [(k, goal) for k in sims for goal in ("cost", "time")]
    series = {name: [(sims[k][goal][name][f"overhead_{goal}"], sims[k][goal][name][f"p90_overhead_{goal}"])
                     for k, goal in keys] for name in names}
    overhead_bars(left, [f"{k.replace('builtin:', '').replace(' | ', chr(10))}\n{goal}" for k, goal in keys],
                  series, fontsize=7, ncol=3)
    left.set_title("sim on traces measured here")
    bars = [e2e["search"]["cost_usd"] * 100, e2e["oracle"]["cost_usd"] * 100]
    right.bar(["search", "oracle"], bars, color=["tab:blue", "black"])
    for x, (cost, seconds) in enumerate(zip(bars, [e2e["search"]["time_s"], e2e["oracle"]["time_s"]], strict=False)):
        right.annotate(f"{seconds:.0f} s", (x, cost), ha="center", va="bottom", fontsize=8)
    right.set_ylabel("cost to target (US cents)")
    right.set_title("end to end, real local runs")
    fig.tight_layout()
    save_figure(fig, "search_local")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--reuse-traces", action="store_true",
                        help="the traces, relaunch and batch-change times of the latest run instead of measuring "
                             "them again")
    parser.add_argument("--skip-bo", action="store_true", help=SKIP_BO_HELP)
    arguments = parser.parse_args()
    main(arguments.seeds, arguments.reuse_traces, bayes_wanted(parser, arguments.skip_bo))
