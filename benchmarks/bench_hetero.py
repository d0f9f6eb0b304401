# SPDX-License-Identifier: MIT
"""Heterogeneity-aware training: uniform vs static vs dynamic batching, side by side in one run.

4 workers (builtin:digits, B = 256, sleep emulation) at OmniLearn's HL1/HL2/HL4/HL8 core splits and
on the dynamic schedule HL1 -> HL2 -> HL4 -> HL8 -> HL4 -> HL2 -> HL1; configurations run in
interleaved rounds and are summarised by the median over rounds. The same comparison runs again
with 2 ranks (slowdowns 1:1, 1:2, 1:4, 1:8) for the timing claims (throughput against the
ideal, HL1 overhead, controller overhead), because 4 ranks on 2 cores time-share the cores: their
per-step compute times scatter by tens of percent and every synchronous step waits for the
slowest draw, which no batching policy can remove.

`python benchmarks/bench_hetero.py reaction [ROUNDS]` runs only the controller's reaction check
(issue 9, item 8): 2 ranks through 1:1 -> 1:8 -> 1:2 -> 1:4 -> 1:1 -> 1:8, 40 steps each, uniform
and dynamic; per segment the steps from the speed change to a split within 10% of ideal and the
wasted-compute fraction, measured and on the simulated clock (hetero_reaction.json / .png).

Ideal throughput (the issue's yardstick) is a steady-state notion, so it is compared with the
throughput measured over the same window, the second half of the steps (B / mean step time);
`samples_per_s` over the whole run, which includes the controller's first corrections from the
uniform start, and the time to target are reported too.
Ideal: each worker's own throughput X_k = b_k / (t_k + u),
with t_k its mean compute time and u the mean optimizer update (a worker alone does both),
measured in the same run after the split settled (the second half of the steps), summed, with the
measured mean all-reduce time added back: ideal = B / (B / sum X_k + mean t_allreduce). B = 256,
so that even at HL8 the slowest worker's fixed per-step cost stays below the fast worker's step
(at B = 64 the controller pins it at b_min = 1 and the ideal is out of reach by construction).
"""

import statistics
import sys
from dataclasses import replace
from pathlib import Path
from tempfile import TemporaryDirectory

import matplotlib.pyplot as plt
import numpy as np

from common import save_figure, write_result
from thrifty.records import RunLog
from thrifty.train.hetero import (
    DYNAMIC_SEQUENCE,
    SimulatedCluster,
    SlowdownSchedule,
    constant,
    named_schedule,
    reaction_steps,
    wasted_compute_fraction,
)
from thrifty.train.policies import BATCH_POLICIES, make_policy
from thrifty.train.trainer import TrainConfig, run_training, total_steps

PROFILES = ["HL1", "HL2", "HL4", "HL8", "dynamic"]
GLOBAL_BATCH, EPOCHS, TRAIN_SIZE = 256, 30, 1438
BASE = TrainConfig(workers=4, global_batch=GLOBAL_BATCH, epochs=EPOCHS, b_max=GLOBAL_BATCH,
                   progress=False, checkpoint_every=0, timeout_s=900)


def _settled(log: RunLog) -> list:
    last = max(r.step for r in log.steps)
    return [r for r in log.steps if r.step >= last // 2]


def settled_samples_per_s(log: RunLog) -> float:
    """Measured throughput over the same window as the ideal: B / mean step time."""
    return GLOBAL_BATCH / statistics.fmean(r.step_time_s for r in _settled(log) if r.rank == 0)


def ideal_samples_per_s(log: RunLog, world: int) -> float:
    settled = _settled(log)
    update = statistics.fmean(r.update_time_s for r in settled if r.rank == 0)
    rates = [statistics.fmean(r.local_batch for r in settled if r.rank == k)
             / (statistics.fmean(r.compute_time_s for r in settled if r.rank == k) + update) for k in range(world)]
    allreduce = statistics.fmean((r.sync_time_s - r.wait_time_s) for r in settled if r.rank == 0)
    return GLOBAL_BATCH / (GLOBAL_BATCH / sum(rates) + allreduce)


def splits_over_time(log: RunLog, world: int) -> list[tuple[int, list[int]]]:
    by_step: dict[int, list[int]] = {}
    for r in log.steps:
        by_step.setdefault(r.step, [0] * world)[r.rank] = r.local_batch
    return sorted(by_step.items())


def settling(log: RunLog, world: int, change_steps: list[int], quiet_steps: int) -> list[dict]:
    """Adjustments after each speed change until the controller stays quiet for `quiet_steps`."""
    series = splits_over_time(log, world)
    changes = [series[i][0] for i in range(1, len(series)) if series[i][1] != series[i - 1][1]]
    ends = change_steps[1:] + [series[-1][0] + 1]
    out = []
    for start, end in zip(change_steps, ends, strict=True):
        mine = [c for c in changes if start <= c < end]
        count, last = 0, start
        for c in mine:
            if c - last >= quiet_steps and count:
                break
            count, last = count + 1, c
        late = [r for r in log.steps if last < r.step < end]
        medians = [statistics.median(r.compute_time_s for r in late if r.rank == k) for k in range(world)] \
            if late else [float("nan")]
        out.append({"change_step": start, "adjustments_to_settle": count,
                    "settled_after_step": last,
                    "settled_compute_max_over_min": max(medians) / min(medians)})
    return out


def _compute_by_step(rows, world: int) -> list[list[float]]:
    by_step: dict[int, list[float]] = {}
    for r in rows:
        by_step.setdefault(r.step, [0.0] * world)[r.rank] = r.compute_time_s
    return list(by_step.values())


def run_grid(rounds: int, workdir: Path) -> dict:
    steps = total_steps(BASE, TRAIN_SIZE, GLOBAL_BATCH)
    runs: dict[tuple[str, str], list[dict]] = {}
    for r in range(rounds):
        for profile in PROFILES:
            for policy in BATCH_POLICIES:
                run_dir = workdir / f"{profile}-{policy}-{r}"
                config = replace(BASE, policy=policy, run_dir=run_dir,
                                 slowdown=named_schedule(profile, steps))
                summary = run_training(config)
                log = RunLog.read(run_dir)
                summary["ideal_samples_per_s"] = ideal_samples_per_s(log, 4)
                summary["settled_samples_per_s"] = settled_samples_per_s(log)
                if profile == "dynamic" and policy == "dynamic":
                    summary["settling"] = settling(log, 4, [0, *config.slowdown.change_steps()],
                                                   quiet_steps=3 * config.controller.every)
                    summary["splits"] = splits_over_time(log, 4)
                    summary["compute_ms"] = [[1e3 * t for t in row] for row in _compute_by_step(log.steps, 4)]
                runs.setdefault((profile, policy), []).append(summary)
                print(f"round {r} {profile:8s} {policy:8s} {summary['samples_per_s']:8.0f} samples/s, settled "
                      f"{summary['settled_samples_per_s']:.0f} (ideal {summary['ideal_samples_per_s']:.0f}) "
                      f"split {summary['final_batch_sizes']} "
                      f"target at {summary['time_to_target_s']}", flush=True)
    return runs


TWO_RANK_SLOWDOWNS = [1, 2, 4, 8]


def run_two_rank_grid(rounds: int, workdir: Path) -> dict:
    """2 ranks on 2 cores, rank 1 slowed by f: the timing claims."""
    runs: dict[tuple[int, str], list[dict]] = {}
    for r in range(rounds):
        for f in TWO_RANK_SLOWDOWNS:
            for policy in BATCH_POLICIES:
                run_dir = workdir / f"two-{f}-{policy}-{r}"
                config = replace(BASE, workers=2, policy=policy, run_dir=run_dir,
                                 slowdown=constant((1.0, float(f))))
                summary = run_training(config)
                summary["ideal_samples_per_s"] = ideal_samples_per_s(RunLog.read(run_dir), 2)
                summary["settled_samples_per_s"] = settled_samples_per_s(RunLog.read(run_dir))
                runs.setdefault((f, policy), []).append(summary)
                print(f"round {r} 2 ranks 1:{f} {policy:8s} {summary['samples_per_s']:8.0f} samples/s, settled "
                      f"{summary['settled_samples_per_s']:.0f} (ideal {summary['ideal_samples_per_s']:.0f}) "
                      f"split {summary['final_batch_sizes']}",
                      flush=True)
    return runs


def median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return float(np.median(values)) if values else None


KEYS = ("samples_per_s", "time_per_epoch_s", "time_to_target_s", "steps_to_target", "final_metric",
        "wait_fraction", "adjustments", "controller_overhead_fraction", "ideal_samples_per_s",
        "settled_samples_per_s")


def _over_ideal(runs: list[dict]) -> float:
    """Median over rounds of each run's settled throughput / its own ideal."""
    return float(np.median([r["settled_samples_per_s"] / r["ideal_samples_per_s"] for r in runs]))


def summarise_cell(rs: list[dict]) -> dict:
    cell = {k: median(rs, k) for k in KEYS}
    cell["final_batch_sizes"] = rs[-1]["final_batch_sizes"]
    return cell


def main(rounds: int = 2, two_rank_rounds: int = 3) -> dict:
    with TemporaryDirectory(prefix="thrifty-bench-hetero-") as tmp:
        runs = run_grid(rounds, Path(tmp))
        two = run_two_rank_grid(two_rank_rounds, Path(tmp))
    two_table = {}
    for f in TWO_RANK_SLOWDOWNS:
        row = {policy: summarise_cell(two[(f, policy)]) for policy in BATCH_POLICIES}
        row["dynamic_over_ideal"] = _over_ideal(two[(f, "dynamic")])
        row["dynamic_over_uniform"] = row["dynamic"]["samples_per_s"] / row["uniform"]["samples_per_s"]
        two_table[f"1:{f}"] = row
    table = {}
    for profile in PROFILES:
        row = {policy: summarise_cell(runs[(profile, policy)]) for policy in BATCH_POLICIES}
        dyn = row["dynamic"]
        row["dynamic_over_ideal"] = _over_ideal(runs[(profile, "dynamic")])
        row["dynamic_over_uniform"] = dyn["samples_per_s"] / row["uniform"]["samples_per_s"]
        row["static_over_uniform"] = row["static"]["samples_per_s"] / row["uniform"]["samples_per_s"]
        table[profile] = row
    dynamic_runs = runs[("dynamic", "dynamic")]
    result = {
        "workload": "builtin:digits", "global_batch": GLOBAL_BATCH, "epochs": EPOCHS, "rounds": rounds,
        "emulation": "sleep", "ranks": "4 for the HL grid (OmniLearn's profiles, balancing behaviour); "
        "2 for the timing claims (4 ranks on 2 cores time-share the cores)",
        "profiles": {p: (list(named_schedule(p, 7).at(0)) if p != "dynamic" else list(DYNAMIC_SEQUENCE))
                     for p in PROFILES},
        "table": table,
        "settling_after_speed_changes": [run["settling"] for run in dynamic_runs],
        "two_ranks": {"rounds": two_rank_rounds, "global_batch": GLOBAL_BATCH, "table": two_table,
                      "hl1_dynamic_slowdown_percent": (1 - two_table["1:1"]["dynamic_over_uniform"]) * 100,
                      "hl1_adjustments": [r["adjustments"] for r in two[(1, "dynamic")]],
                      "controller_overhead_percent_max": 100 * max(
                          r["controller_overhead_fraction"] for f in TWO_RANK_SLOWDOWNS for r in two[(f, "dynamic")])},
        "same_statistics": {p: {pol: table[p][pol]["steps_to_target"] for pol in BATCH_POLICIES} for p in PROFILES},
    }
    _plot(result, dynamic_runs[-1])
    write_result("hetero_training", result)
    return result


def _plot(result: dict, dynamic_run: dict) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    x = np.arange(len(PROFILES))
    for i, policy in enumerate(BATCH_POLICIES):
        axes[0].bar(x + (i - 1) * 0.2, [result["table"][p][policy]["samples_per_s"] for p in PROFILES], 0.2,
                    label=policy)
        axes[1].bar(x + (i - 1) * 0.2, [result["table"][p][policy]["time_to_target_s"] or 0 for p in PROFILES],
                    0.2, label=policy)
    axes[0].plot(x, [result["table"][p]["dynamic"]["ideal_samples_per_s"] for p in PROFILES], "k_", ms=30,
                 mew=2, label="ideal")
    axes[0].set(xticks=x, xticklabels=PROFILES, ylabel="samples/s", title="throughput, 4 workers")
    axes[1].set(xticks=x, xticklabels=PROFILES, ylabel="s", title="training time to 95% accuracy, 4 workers")
    axes[0].legend(fontsize=8)
    steps = [s for s, _ in dynamic_run["splits"]]
    splits = np.array([b for _, b in dynamic_run["splits"]])
    for k in range(splits.shape[1]):
        axes[2].plot(steps, splits[:, k], label=f"rank {k}")
    total = steps[-1] + 1
    for i, hl in enumerate(DYNAMIC_SEQUENCE):
        start = i * total // len(DYNAMIC_SEQUENCE)
        axes[2].axvline(start, color="grey", lw=0.5)
        axes[2].text(start + 1, splits.max() * 0.95, hl, fontsize=8)
    axes[2].set(xlabel="step", ylabel="local batch", title="dynamic policy on the dynamic schedule")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "hetero_training")


REACTION_SEGMENT_STEPS = 40
REACTION_SCHEDULE = SlowdownSchedule(tuple((i * REACTION_SEGMENT_STEPS, (1.0, f))
                                           for i, f in enumerate((1.0, 8.0, 2.0, 4.0, 1.0, 8.0))))


def segment_figures(splits: list[list[int]], times: list[list[float]]) -> list[dict]:
    """Per segment of REACTION_SCHEDULE: steps from its speed change to a split within 10% of
    ideal (hetero.reaction_steps) and the wasted-compute fraction (hetero.wasted_compute_fraction)."""
    out = []
    starts = [s for s, _ in REACTION_SCHEDULE.segments] + [len(splits)]
    for (start, factors), end in zip(REACTION_SCHEDULE.segments, starts[1:], strict=True):
        out.append({"slowdown": list(factors), "first_step": start,
                    "reaction_steps": reaction_steps(splits[start:end], times[start:end]),
                    "wasted_compute_fraction": wasted_compute_fraction(times[start:end])})
    return out


def run_reaction(rounds: int, workdir: Path) -> dict:
    """2 ranks through REACTION_SCHEDULE, uniform and dynamic, in interleaved rounds; and the same
    schedule on the simulated clock (deterministic; 10% log-normal noise, 2 ms + 0.1 ms/sample)."""
    steps = REACTION_SEGMENT_STEPS * len(REACTION_SCHEDULE.segments)
    measured: dict[str, list[list[dict]]] = {"uniform": [], "dynamic": []}
    splits_shown: list[list[int]] = []
    for r in range(rounds):
        for policy in measured:
            run_dir = workdir / f"reaction-{policy}-{r}"
            run_training(replace(BASE, workers=2, policy=policy, steps=steps, epochs=None, run_dir=run_dir,
                                 slowdown=REACTION_SCHEDULE))
            log = RunLog.read(run_dir)
            splits = [b for _, b in splits_over_time(log, 2)]
            figures = segment_figures(splits, _compute_by_step(log.steps, 2))
            measured[policy].append(figures)
            splits_shown = splits if policy == "dynamic" else splits_shown
            print(f"round {r} reaction {policy:8s} " + " | ".join(
                f"1:{f['slowdown'][1]:g} react {f['reaction_steps']} waste {f['wasted_compute_fraction']:.3f}"
                for f in figures), flush=True)
    simulated = []
    for seed in range(5):
        cluster = SimulatedCluster(REACTION_SCHEDULE, sample_s=1e-4, overhead_s=0.002, noise=0.1, seed=seed)
        policy = make_policy("dynamic", GLOBAL_BATCH, 2)
        splits, ideal = [], []
        for step in range(steps):
            splits.append(list(policy.split))
            ideal.append(cluster.ideal_times(step, policy.split))
            policy.observe(step + 1, cluster.times(step, policy.split))
        simulated.append(segment_figures(splits, ideal))
    return {"measured": measured, "simulated_dynamic": simulated, "splits_dynamic_last_round": splits_shown}


def main_reaction(rounds: int = 2) -> dict:
    with TemporaryDirectory(prefix="thrifty-bench-reaction-") as tmp:
        runs = run_reaction(rounds, Path(tmp))
    result = {"workload": "builtin:digits", "global_batch": GLOBAL_BATCH, "ranks": 2, "rounds": rounds,
              "segment_steps": REACTION_SEGMENT_STEPS,
              "schedule": [[s, list(f)] for s, f in REACTION_SCHEDULE.segments],
              "reaction": "steps from a speed change to the first split whose compute times (median over up "
                          "to 5 steps with that split) put every |mean t / t_k - 1| within 10%; null: never",
              "wasted_compute": "sum over the segment's steps of sum_k (max_j t_j - t_k) / (n max_j t_j)",
              **runs}
    _plot_reaction(result)
    write_result("hetero_reaction", result)
    return result


def _plot_reaction(result: dict) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    splits = np.array(result["splits_dynamic_last_round"])
    for k in range(splits.shape[1]):
        axes[0].plot(splits[:, k], label=f"rank {k}")
    for start, factors in result["schedule"]:
        axes[0].axvline(start, color="grey", lw=0.5)
        axes[0].text(start + 1, splits.max() * 0.9, f"1:{factors[1]:g}", fontsize=8)
    axes[0].set(xlabel="step", ylabel="local batch", title="dynamic split, 2 ranks (measured)")
    axes[0].legend(fontsize=8)
    labels = [f"1:{f[1]:g}" for _, f in result["schedule"]]
    x = np.arange(len(labels))
    for i, rnd in enumerate(result["measured"]["dynamic"]):
        axes[1].plot(x, [f["reaction_steps"] if f["reaction_steps"] is not None else np.nan for f in rnd], "o-",
                     label=f"measured, round {i}")
    sim = np.array([[f["reaction_steps"] if f["reaction_steps"] is not None else np.nan for f in run]
                    for run in result["simulated_dynamic"]], float)
    axes[1].plot(x, np.nanmedian(sim, axis=0), "k^--", label="simulated clock, median of 5 seeds")
    axes[1].set(xticks=x, xticklabels=labels, ylabel="steps", title="reaction: change -> split within 10% of ideal")
    axes[1].legend(fontsize=8)
    for i, policy in enumerate(("uniform", "dynamic")):
        waste = np.median([[f["wasted_compute_fraction"] for f in rnd] for rnd in result["measured"][policy]], axis=0)
        axes[2].bar(x + (i - 0.5) * 0.35, 100 * waste, 0.35, label=policy)
    axes[2].set(xticks=x, xticklabels=labels, ylabel="% of compute", title="wasted compute per segment (median)")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "hetero_reaction")


if __name__ == "__main__" and sys.argv[1:2] == ["reaction"]:
    out = main_reaction(*(int(a) for a in sys.argv[2:3]))
    for policy, rounds_ in out["measured"].items():
        for figures in rounds_:
            print(policy, [(f["reaction_steps"], round(f["wasted_compute_fraction"], 3)) for f in figures])
    print("simulated", [[f["reaction_steps"] for f in run] for run in out["simulated_dynamic"]])
elif __name__ == "__main__":
    r = main(*(int(a) for a in sys.argv[1:3]))
    for profile, row in r["table"].items():
        print(f"{profile:8s} " + " | ".join(f"{p} {row[p]['samples_per_s']:7.0f}/s tt {row[p]['time_to_target_s']}"
                                          for p in BATCH_POLICIES)
              + f" | dynamic/ideal {row['dynamic_over_ideal']:.3f} dynamic/uniform {row['dynamic_over_uniform']:.3f}")
    print("settling:", r["settling_after_speed_changes"])
    for name, row in r["two_ranks"]["table"].items():
        print(f"2 ranks {name}: " + " | ".join(f"{p} {row[p]['samples_per_s']:7.0f}/s" for p in BATCH_POLICIES)
              + f" | dynamic/ideal {row['dynamic_over_ideal']:.3f} dynamic/uniform {row['dynamic_over_uniform']:.3f}")
    print("HL1 2 ranks dynamic slowdown %", r["two_ranks"]["hl1_dynamic_slowdown_percent"],
          "controller overhead % max", r["two_ranks"]["controller_overhead_percent_max"])
