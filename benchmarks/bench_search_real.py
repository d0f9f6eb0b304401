# SPDX-License-Identifier: MIT
"""The online search on irregular cluster-like traces (irregular_traces.py), against the previous
run's results (the JSON this overwrites, read first: the sim is seeded, so the previous code's
numbers are reproducible from its commit).

Six held-out workloads (HELD_OUT_SEEDS), six fresh ones (FRESH_SEEDS, never looked at before this
report) and the three the search was tuned on (TUNE_SEEDS), and six well-behaved ones of the shape
of Pollux's testbed (pollux_shaped.py: one GPU model on nodes of 1 and 4 GPUs, added after the
search was built and run once, with no knob changed for them), and the same six workloads on one
type alone, as Pollux's testbed had (nodes of 4 GPUs up to 16; nodes of 1 GPU up to 64; nodes of 4
GPUs of which a job uses 1, 2 or 4), and once more on nodes of 4 GPUs where a job's workers need
not fill its nodes evenly and every configuration was measured on 3 launches, each syncing its
own way (pollux_shaped.placed_trace; the sim lands each launch on one of them, the oracle is
their mean), each under the cost and the time objective: a 3-hour job (the target sized so the objective's
oracle trains 3 h) started where a user would start (the cheapest $/h configuration at the middle
global batch), and a short job (1e7 samples) started on the oracle's configuration. The sim: 3%
per-step noise, 60 s restart, 60 s start-up for new VMs. "after": the settings `thrifty search
--backend sim` runs with (search.harness.Scenario.settings: the defaults, and the job's stated noise
scale as the prior of the measured one); "before": the same row's "after" in the previous JSON, when it has
the row. Overheads are objective / oracle's - 1 over
SEEDS sim seeds: median and worst; settle_gap_median: the median overhead of training the whole
job, from the start, on the configuration the search ended on (what a better final choice would
save; the rest of the overhead is the moves and probes that found it). Run:
    PYTHONPATH=src python benchmarks/bench_search_real.py [--seeds 10]
"""

import argparse
import json
from collections.abc import Iterator
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np

from common import RESULTS, save_figure, write_result
from irregular_traces import FRESH_SEEDS, HELD_OUT_SEEDS, TUNE_SEEDS, irregular_trace
from pollux_shaped import ONE_TYPE, SEARCH_SEEDS, placed_trace, search_trace
from thrifty.search.harness import Scenario, default_start, fixed, oracle, with_overheads
from thrifty.search.loop import Search
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.search.trace import TraceRow

JOB_S, SHORT_TARGET = 3 * 3600.0, 1e7
PLACED_GROUP = "pollux-shaped uneven, 3 launches"
VARIANTS = {"after": {}}


def scenarios(rows: list[TraceRow], noise_scale: float) -> dict:
    """(scenario, start) per job: the 3-hour and the short job under each objective."""
    out = {}
    for kind in ("cost", "time"):
        probe = Scenario(rows, NoiseSchedule.constant(noise_scale, 1e8), Objective(kind))
        target = 1e8 * JOB_S / oracle(probe).time_s  # time is linear in the target, but for the start-up
        long_ = Scenario(rows, NoiseSchedule.constant(noise_scale, target), Objective(kind))
        short = Scenario(rows, NoiseSchedule.constant(noise_scale, SHORT_TARGET), Objective(kind))
        out[f"3 h, {kind}"] = (long_, default_start(rows))
        out[f"short, {kind}"] = (short, oracle(short).final_config)
    return out


def traces() -> Iterator[tuple[str, int, list[TraceRow], float]]:
    """(group, seed, rows, B_noise) of every workload."""
    for group, trace_seeds in (("held out", HELD_OUT_SEEDS), ("fresh", FRESH_SEEDS), ("tuned on", TUNE_SEEDS)):
        for seed in trace_seeds:
            trace = irregular_trace(seed)
            yield group, seed, trace.rows, trace.noise_scale
    for seed in SEARCH_SEEDS:
        yield ("pollux-shaped", seed, *search_trace(seed))
    for name, types in ONE_TYPE.items():
        for seed in SEARCH_SEEDS:
            yield (f"pollux-shaped {name}", seed, *search_trace(seed, types))
    for seed in SEARCH_SEEDS:
        yield (PLACED_GROUP, seed, *placed_trace(seed))


def previous_results() -> tuple[dict, str]:
    """The stored run's rows and its git revision (empty when there is none)."""
    path = RESULTS / "search_real.json"
    if not path.exists():
        return {}, ""
    data = json.loads(path.read_text())
    return data.get("results", {}), str(data.get("revision", f"unrecorded, run {data.get('date')}"))


def run_row(scenario: Scenario, start, seeds: int) -> dict:
    best, metric = oracle(scenario), f"overhead_{scenario.objective.kind}"
    row = {"oracle_config": best.final_config.to_dict(), "oracle_time_s": best.time_s,
           "oracle_cost_usd": best.cost_usd, "start": start.to_dict()}
    for name, knobs in VARIANTS.items():
        settings = replace(scenario.settings(), **knobs)
        outcomes = [Search(scenario.backend(s), settings).run(start) for s in range(seeds)]
        runs = [with_overheads(o, best) for o in outcomes]
        overheads = [r[metric] for r in runs]
        # the overhead of training the whole job where the search ended (once per distinct final
        # configuration: the seeds mostly end on the same one); the rest is the moves and probes
        gap_of = {c: with_overheads(fixed(scenario.backend(0, draw_launches=False), c), best)[metric]
                  for c in {o.final_config for o in outcomes}}
        settle_gaps = [gap_of[o.final_config] for o in outcomes]
        row[name] = {"median": float(np.median(overheads)), "worst": float(np.max(overheads)),
                     "settle_gap_median": float(np.median(settle_gaps)),
                     "moves": float(np.median([r["moves"] for r in runs])),
                     "max_moves": int(max(r["moves"] for r in runs)), "per_seed": overheads}
    return row


def main(seeds: int = 10) -> dict:
    previous, revision = previous_results()
    results = {}
    for group, seed, rows, noise_scale in traces():
        for job, (scenario, start) in scenarios(rows, noise_scale).items():
            key = f"{group} {seed} | {job}"
            results[key] = row = run_row(scenario, start, seeds)
            if key in previous:
                row["before"] = previous[key]["after"]
            before = (f"before {row['before']['median']:+7.1%} / {row['before']['worst']:+7.1%} "
                      f"({row['before']['moves']:.0f} moves)") if "before" in row else "before -"
            print(f"{key:28s} {before}  after {row['after']['median']:+7.1%} / "
                  f"{row['after']['worst']:+7.1%} ({row['after']['moves']:.0f} moves)", flush=True)
    plot(results)
    write_result("search_real", {"seeds": seeds, "job_s": JOB_S, "short_target_samples": SHORT_TARGET,
                                 "before_revision": revision, "fresh_seeds": FRESH_SEEDS,
                                 "tune_seeds": TUNE_SEEDS, "held_out_seeds": HELD_OUT_SEEDS,
                                 "pollux_shaped_seeds": SEARCH_SEEDS,
                                 "variants": {k: {n: float(v) for n, v in knobs.items()} for k, knobs in VARIANTS.items()},
                                 "results": results})
    return results


def plot(results: dict) -> None:
    fig, ax = plt.subplots(figsize=(18, 5))
    x = np.arange(len(results))
    for j, name in enumerate(("before", "after")):
        nan = {"median": np.nan, "worst": np.nan}
        med = np.array([r.get(name, nan)["median"] for r in results.values()])
        worst = np.array([r.get(name, nan)["worst"] for r in results.values()])
        ax.bar(x + 0.4 * j, 1 + med, 0.4, label=name)
        ax.errorbar(x + 0.4 * j, 1 + med, yerr=[np.zeros(len(x)), worst - med], fmt="none", ecolor="k", elinewidth=0.6)
    ax.axhline(1.05, color="k", linestyle="--", linewidth=0.8, label="oracle + 5%")
    ax.axhline(1.10, color="k", linestyle=":", linewidth=0.8, label="oracle + 10%")
    ax.set_xticks(x + 0.2)
    ax.set_xticklabels([k.replace(" | ", "\n") for k in results], fontsize=6, rotation=90)
    ax.set_ylabel("objective / oracle's (median; whisker: worst)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "search_real")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    main(parser.parse_args().seeds)
