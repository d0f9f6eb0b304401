# SPDX-License-Identifier: MIT
"""Online search vs the oracle and the baselines, on synthetic traces with real-world irregularities.

Traces come from the step-time model (thrifty.search.synthetic) for four VM types (two CPU, a
1-GPU and a 4-GPU node; 1-8 nodes; global batch 64-2048): smooth; a memory cliff above local
batch 128 (3x slower per sample); the 1-GPU type 2x slower than its price suggests; multi-modal
sync (40% of multi-node configurations 3x slower to synchronise). Each trace, objective (cost,
time, cost with a deadline of 1.5x the fastest possible time) and strategy runs over SEEDS seeds
in the sim backend (measurement noise 3%, restart 60 s, start-up 60 s). Overheads are
time / oracle_time - 1 and cost / oracle_cost - 1. Random search and Bayesian optimisation
(optuna's GP sampler with expected improvement, CherryPick-style; without optuna the run stops
with a one-line error unless --skip-bo says to leave BO out, and the JSON records which)
get the search's median number of windows on that trace. With a deadline, BO is CherryPick's
constrained BO: optuna's GP sampler with the constraint projected time to target / deadline - 1
<= 0 (expected improvement times the probability of meeting it); ~5 s a run. The sim measures the gradient noise per step with
the spreads measured on digits and tabular (search.sim), and the search also runs without
re-checking after settling (`search_no_recheck`: train to the end once settled).

Drift: on the smooth and memory-cliff traces, B_noise also grows 8x over the job, linearly in
progress (350 -> 2,830, geometric mean 1,000: McCandlish et al. 2018 find it grows as the loss
falls, several-fold over a run). The oracle is still the harness's: the one configuration that is
best for the whole job trained from the start (a fixed configuration); a search that moves with
the drift can beat it, so overheads below zero are possible there. `vs_no_recheck` is the
search's objective over the same search's without re-checks (below 1: the re-checks paid). Run:
    PYTHONPATH=src python benchmarks/bench_search.py [--seeds 20] [--only search,search_no_recheck,plan_alone]
`--only`: re-run those strategies and keep every other strategy's row from the stored JSON (marked
"from_previous_run", with its own seed count): the BO baseline is most of the run's time and does
not use the search's model.
"""

import argparse
import importlib.util
import json
import math
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np

from common import RESULTS, save_figure, write_result
from thrifty.search.config import Config
from thrifty.search.harness import STRATEGIES, Scenario, default_start, medians, oracle, run_strategy, with_overheads
from thrifty.search.loop import Outcome, Search
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.search.sim import BATCH_CHANGE_COST_S, GRAD_SQ_SPREAD, TRACE_SPREAD
from thrifty.search.synthetic import Irregularities, VMSpec, synthetic_trace

DEADLINE_CONSTRAINT = "constraints:deadline"  # where optuna 5's samplers read a trial's constraint (set_constraint)
TYPES = [VMSpec("cpu-8", 0.34, 1.0), VMSpec("cpu-32", 1.36, 3.2), VMSpec("gpu-1", 3.0, 12.0),
         VMSpec("gpu-4", 12.0, 12.0, workers_per_node=4)]
NODES, BATCHES = [1, 2, 4, 8], [64, 128, 256, 512, 1024, 2048]
NOISE_SCALE, TARGET = 1000.0, 2e8
DRIFT = 8.0  # B_noise grows this many times over the job in the drifting scenarios
TRACES = {"smooth": Irregularities(),
          "memory cliff": Irregularities(cliff_batch=128, cliff_factor=3.0),
          "type 2x slow": Irregularities(slow_type="gpu-1", slow_factor=2.0),
          "multi-modal sync": Irregularities(slow_sync_share=0.4, sync_modes=3.0)}


class BayesOpt(Search):
    """CherryPick-style BO: optuna's GP sampler (EI) over type x log2 nodes x log2 batch, told
    each window's measured objective per unit of progress (its log) and, with a deadline, the
    constraint projected finish / deadline - 1 <= 0 (optuna's constrained EI, as CherryPick);
    `windows` windows, then the best measured that meets the deadline (Search.best_measured)."""

    def __init__(self, backend, settings, windows: int, seed: int) -> None:
        import optuna
        super().__init__(backend, settings)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna, self.windows = optuna, windows
        self.by_params = {(c.instance_type, int(math.log2(c.num_nodes)), int(math.log2(c.global_batch))): c
                          for c in self.candidates}
        types, nodes, batches = (sorted({k[i] for k in self.by_params}) for i in range(3))
        self.space = {"type": optuna.distributions.CategoricalDistribution(types),
                      "log2_nodes": optuna.distributions.IntDistribution(min(nodes), max(nodes)),
                      "log2_batch": optuna.distributions.IntDistribution(min(batches), max(batches))}
        self.study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=seed, n_startup_trials=3))

    def _value_and_constraint(self, config: Config) -> tuple[float, float]:
        """log objective per unit of progress, and projected finish / deadline - 1 (0 without one)."""
        step_s = self.measured()[config].mean_s
        steps_per_progress = 1 / config.global_batch + 1 / self.noise_scale()
        objective = self.settings.objective
        value = math.log(objective.rate(self.backend.price_per_hour(config)) * step_s * steps_per_progress)
        if objective.deadline_s is None:
            return value, 0.0
        left = self.backend.target - self.backend.progress
        return value, (self.backend.elapsed_s + left * steps_per_progress * step_s) / objective.deadline_s - 1

    def window(self, config: Config, *, cut: bool = True, noise_precision: bool = True) -> None:
        super().window(config, cut=False, noise_precision=noise_precision)
        params = {"type": config.instance_type, "log2_nodes": int(math.log2(config.num_nodes)),
                  "log2_batch": int(math.log2(config.global_batch))}
        value, constraint = self._value_and_constraint(config)
        constraints = {DEADLINE_CONSTRAINT: constraint} if self.settings.objective.deadline_s is not None else {}
        self.study.add_trial(self.optuna.trial.create_trial(params=params, distributions=self.space, value=value,
                                                            system_attrs=constraints))

    def next_probe(self) -> Config | None:
        if len(self.probes) >= self.windows:
            return None
        for _ in range(100):  # combinations outside the trace (batch < workers) are refused
            trial = self.study.ask(self.space)
            config = self.by_params.get((trial.params["type"], trial.params["log2_nodes"],
                                         trial.params["log2_batch"]))
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            if config is not None and config not in self.times:
                return config
        return None


def bayes_available() -> bool:
    """optuna, and torch for its GP sampler."""
    return all(importlib.util.find_spec(name) is not None for name in ("optuna", "torch"))


SKIP_BO_HELP = "leave out the Bayesian-optimisation baseline (it needs optuna and torch)"


def bayes_wanted(parser: argparse.ArgumentParser, skip: bool, needed: bool = True) -> bool:
    """Whether the BO baseline runs: never dropped without a word. Needed and not installed, with
    no --skip-bo: a one-line error, exit 2."""
    if skip or not needed:
        return False
    if not bayes_available():
        parser.error("the Bayesian-optimisation baseline needs optuna and torch: pip install -e '.[bench]' "
                     "(make bench does), or pass --skip-bo to run without it")
    return True


def run_bo(scenario: Scenario, seed: int, start: Config, windows: int) -> Outcome:
    return BayesOpt(scenario.backend(seed), scenario.settings(), windows, seed).run(start)


def run_no_recheck(scenario: Scenario, seed: int, start: Config) -> Outcome:
    """The search that trains to the end once settled (no re-checks of the noise scale)."""
    return Search(scenario.backend(seed), replace(scenario.settings(), recheck_every=None)).run(start)


def schedules() -> dict[str, NoiseSchedule]:
    """The constant noise scale, and one growing DRIFT-fold with the same geometric mean."""
    low = NOISE_SCALE / math.sqrt(DRIFT)
    return {"": NoiseSchedule.constant(NOISE_SCALE, TARGET),
            f", B_noise {DRIFT:g}x": NoiseSchedule.from_points([0, 1], [low, low * DRIFT], TARGET)}


def run(scenario: Scenario, name: str, seed: int, start: Config, windows: int) -> Outcome:
    if name == "bayes_opt":
        return run_bo(scenario, seed, start, windows)
    if name == "search_no_recheck":
        return run_no_recheck(scenario, seed, start)
    return run_strategy(scenario, name, seed, start, windows)


def objectives(rows) -> dict[str, Objective]:
    fastest = oracle(Scenario(rows, NoiseSchedule.constant(NOISE_SCALE, TARGET), Objective("time"))).time_s
    return {"cost": Objective("cost"), "time": Objective("time"),
            "cost, deadline": Objective("cost", 1.5 * fastest)}


def main(seeds: int = 20, only: list[str] | None = None, with_bo: bool = True) -> dict:
    every = ["search", "search_no_recheck", *STRATEGIES[1:], "bayes_opt"]
    strategies = every if with_bo else every[:-1]
    stored = json.loads((RESULTS / "search.json").read_text()) if only else {}
    if only and "bayes_opt" not in only:  # BO's rows, if any, come from the stored run
        bayes = stored.get("bayes_opt", "skipped")
    else:
        bayes = "optuna GPSampler" if with_bo else "skipped (--skip-bo)"
    previous = stored.get("results", {})
    results = {}
    for trace_name, irregular in TRACES.items():
        rows = synthetic_trace(TYPES, NODES, BATCHES, irregular, seed=1)
        start = default_start(rows)
        for drift_name, schedule in schedules().items():
            if drift_name and trace_name not in ("smooth", "memory cliff"):
                continue
            for goal_name, goal in objectives(rows).items():
                scenario = Scenario(rows, schedule, goal)
                key = f"{trace_name}{drift_name} | {goal_name}"
                results[key] = run_row(scenario, key, start, only or strategies, seeds, previous.get(key, {}),
                                       stored.get("seeds"))
    plot(results, [name for name in every if any(name in row for row in results.values())])  # stored rows too
    data = {"seeds": seeds, "noise_scale": NOISE_SCALE, "drift": DRIFT, "target_samples": TARGET,
            "measurement_noise": 0.03, "grad_sq_spread": GRAD_SQ_SPREAD, "trace_spread": TRACE_SPREAD,
            "restart_cost_s": 60.0, "startup_cost_s": 60.0, "batch_change_cost_s": BATCH_CHANGE_COST_S,
            "types": [t.__dict__ for t in TYPES],
            "oracle": "the one configuration best for the whole job, trained there from the start (with a "
                      "drifting noise scale: the best fixed configuration, which a moving search can beat)",
            "bayes_opt": bayes,
            "results": results}
    write_result("search", data)
    return data


def run_row(scenario: Scenario, key: str, start: Config, strategies: list[str], seeds: int,
            previous: dict | None = None, previous_seeds: int | None = None) -> dict:
    """Every strategy over the seeds on one scenario, with overheads against its oracle; the
    strategies not in `strategies` are taken from `previous` (the stored run's row)."""
    goal, best = scenario.objective, oracle(scenario)
    row = {"oracle_config": best.final_config.to_dict(), "oracle_time_s": best.time_s,
           "oracle_cost_usd": best.cost_usd, "start": start.to_dict(), "configurations": len(scenario.rows)}
    windows = 0
    for name in strategies:
        runs = [with_overheads(run(scenario, name, s, start, windows), best) for s in range(seeds)]
        summary = medians(runs)
        summary["seeds"] = seeds
        summary["found_oracle_config"] = float(np.mean([r["final_config"] == row["oracle_config"] for r in runs]))
        summary["met_deadline"] = float(np.mean([r["time_s"] <= (goal.deadline_s or np.inf) for r in runs]))
        row[name] = summary
        if name == "search":
            windows = int(round(summary["probes"]))
        print(f"{key:34s} {name:22s} overhead time {summary['overhead_time']:7.1%} "
              f"(p90 {summary['p90_overhead_time']:7.1%})  cost {summary['overhead_cost']:7.1%} "
              f"(p90 {summary['p90_overhead_cost']:7.1%})  windows {summary['probes']:.0f}  "
              f"moves {summary['moves']:.0f}",
              flush=True)
    for name, summary in (previous or {}).items():
        if isinstance(summary, dict) and "overhead_time" in summary and name not in strategies:
            row[name] = {**summary, "from_previous_run": True, "seeds": summary.get("seeds", previous_seeds)}
    for name in ("defaults_most_workers", "defaults_cheapest", "search_no_recheck"):
        row[f"search_vs_{name}"] = {"time": row["search"]["time_s"] / row[name]["time_s"],
                                    "cost": row["search"]["cost_usd"] / row[name]["cost_usd"]}
    return row


def overhead_bars(ax, labels: list[str], series: dict[str, list[tuple[float, float]]], *, fontsize: int = 8,
                  ncol: int = 4) -> None:
    """Objective / oracle's as grouped bars (median) with whiskers up to the p90, one group per
    label; `series` maps each strategy to its (median, p90) overheads (fractions), label by label."""
    width = 0.8 / len(series)
    for j, (name, pairs) in enumerate(series.items()):
        medians_, p90 = 1 + np.array(pairs, float).reshape(-1, 2).T
        x = np.arange(len(labels)) + j * width
        ax.bar(x, medians_, width, label=name.replace("_", " "))
        ax.errorbar(x, medians_, yerr=[np.zeros(len(x)), p90 - medians_], fmt="none", ecolor="k", elinewidth=0.6)
    ax.axhline(1.05, color="k", linestyle="--", linewidth=0.8, label="oracle + 5%")
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2)
    ax.set_xticklabels(labels, fontsize=fontsize)
    ax.set_ylabel("objective / oracle's (median; whisker: p90)")
    ax.legend(fontsize=7, ncol=ncol)


def plot(results: dict, strategies: list[str]) -> None:
    """Median overhead in the objective (bars) with p90 (whiskers), per trace and objective."""
    fig, ax = plt.subplots(figsize=(20, 6))
    series = {}
    for name in strategies:
        series[name] = []
        for key, row in results.items():
            metric = "overhead_time" if key.endswith("| time") else "overhead_cost"
            summary = row.get(name, {metric: np.nan, f"p90_{metric}": np.nan})
            series[name].append((summary[metric], summary[f"p90_{metric}"]))
    overhead_bars(ax, [k.replace(" | ", "\n") for k in results], series)
    fig.tight_layout()
    save_figure(fig, "search")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--only", type=lambda text: text.split(","), default=None,
                        help="strategies to re-run (the others are kept from the stored JSON)")
    parser.add_argument("--skip-bo", action="store_true", help=SKIP_BO_HELP)
    args = parser.parse_args()
    if args.skip_bo and args.only and "bayes_opt" in args.only:
        parser.error("--skip-bo and --only bayes_opt contradict each other")
    main(args.seeds, args.only, bayes_wanted(parser, args.skip_bo, needed=not args.only or "bayes_opt" in args.only))
