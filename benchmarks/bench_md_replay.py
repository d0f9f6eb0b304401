# SPDX-License-Identifier: MIT
"""Active learning against random sampling and grids, replayed on real MD (issue 24 item 4). One thread.

Data: the replay set (benchmarks/data/md_replay/runs.npz; benchmarks/build_md_replay.py: OpenMM
runs at uniform random points of h 2.5-4 nm, z+ 1-3, c 0.3-0.9 M in bench_md_campaign_real.py's
4 nm box). A strategy "simulates" a point by taking a stored run, so every strategy and seed sees
the same MD and the comparison costs trainings, not simulations.

Per seed (SEEDS): TEST random runs are held out (never trained on, never picked); the rest is the
candidate pool. Active and random start from the same START random pool runs and add K per round
up to BUDGET (a campaign picks one point per free worker, md.surrogate.active_sweep: K = 5 is a
5-node pool; the same replay at K_COMPARE = 10 a round is reported beside it); after every round the default ensemble (md.surrogate.ensemble: 5 members, patience
150) is trained and scored on the TEST runs (md.surrogate.metrics.score). Active picks with
md.surrogate.active.pick_batch: expected reduction of the model's variance against the MD noise over the
pool, no pick within its min_distance of a run already trained on. Random picks uniformly from the
pool. The grid strategy trains on a sequence of full grids (z+ x h levels x c levels) whose nodes
are snapped to the nearest unused pool run of the same z+ (the pool is a random sample, so a
node's run is up to ~0.1 of the box away from it).

Accuracy is the held-out chi^2 per bin (the soft-label loss; an exact predictor scores about 1),
fixed before the runs; RMS against the truth and the share within 2 MD error bars are kept beside
it. Goal: active reaches random's final accuracy (at BUDGET runs) with <= 0.7 x BUDGET runs, median
over seeds (a seed where active never reaches it counts as infinite; active's shared start does not
count as reaching it). Beside it, the metric's noise floor: the same ratio for random's own curve against its
final value (random_own_ratio), and round by round in how many seeds active's chi^2/bin is below
random's at the same runs (paired_by_runs). The stop test (md.surrogate.active.stopping_test: share
within 2 bars >= DEFAULT_TARGET on the TEST runs, 30 or more) is reported too: the runs at which each strategy would have stopped.
Seeds run in JOBS processes. `--quick`: 2 seeds, TEST 20, BUDGET 30, written as md_replay_quick
(git-ignored).
"""

import multiprocessing
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from common import save_figure, write_result
from thrifty.md.params import ParameterBox
from thrifty.md.runs import Run
from thrifty.md.surrogate.active import DEFAULT_TARGET, MIN_STOP_RUNS, pick_batch
from thrifty.md.surrogate.ensemble import SurrogateConfig, train_ensemble
from thrifty.md.surrogate.md_noise import held_out_arrays
from thrifty.md.surrogate.metrics import score
from thrifty.md.surrogate.replay import ReplaySet

QUICK = "--quick" in sys.argv
NAME = "md_replay_quick" if QUICK else "md_replay"
DATA = Path(__file__).resolve().parent / "data" / "md_replay" / "runs.npz"
SEEDS = (0, 1) if QUICK else tuple(range(10))
TEST, START, K, K_COMPARE = (20 if QUICK else 40), 10, 5, 10
BUDGET = 30 if QUICK else 50
GRID_LEVELS = ((2, 2), (3, 2), (3, 3), (4, 3), (4, 4))  # (h, c) levels x 3 z+: 12 ... 48 runs
JOBS = 2  # seeds replayed in parallel processes
REPLAY_NETWORK: dict = {}  # the default ensemble (5 members, patience 150): what a campaign trains
BOX = ParameterBox((2.5, 1, -1, 0.3, 0.474, 0.627), (4.0, 3, -1, 0.9, 0.474, 0.627))
STRATEGIES = ("active", "random", "grid")


def row(model, test: tuple[np.ndarray, np.ndarray, np.ndarray], n: int) -> dict:
    points, density, error = test
    s = score(points, model.predict(points).mean, density, error)
    return {"runs": n, "chi2_per_bin": s["chi2_per_bin"], "within_2_bars": s["within_2_bars"],
            "rms_vs_truth_molar": s["rms_vs_truth_molar"], "rms_molar": s["rms_molar"]}


def sequential(strategy: str, pool: list[Run], config: SurrogateConfig, test, seed: int, k: int) -> list[dict]:
    rng = np.random.default_rng([seed, 1])
    order = rng.permutation(len(pool))
    chosen = list(order[:START])  # the same start for active and random (same rng stream)
    pick_rng = np.random.default_rng([seed, 2])
    curve = []
    while True:
        model = train_ensemble([pool[i] for i in chosen], config)
        curve.append(row(model, test, len(chosen)))
        print(f"  seed {seed} {strategy} k={k} {len(chosen)}: chi2 {curve[-1]['chi2_per_bin']:.3f}", file=sys.stderr,
              flush=True)
        if len(chosen) + k > BUDGET:
            return curve
        free = [i for i in range(len(pool)) if i not in set(chosen)]
        if strategy == "active":
            points = np.stack([pool[i].point for i in free])
            taken = np.stack([pool[i].point for i in chosen])
            new = [free[j] for j in pick_batch(model, points, k, BOX, taken=taken)]
        else:
            new = [free[j] for j in pick_rng.choice(len(free), k, replace=False)]
        chosen += new


def grid(pool: list[Run], config: SurrogateConfig, test) -> list[dict]:
    unit = BOX.unit(np.stack([r.point for r in pool]))
    curve = []
    for levels in GRID_LEVELS:
        nodes = [(h, zp, c) for zp in (0.0, 0.5, 1.0) for h in np.linspace(0, 1, levels[0])
                 for c in np.linspace(0, 1, levels[1])]
        used: list[int] = []
        for h, zp, c in nodes:
            distance = np.hypot(unit[:, 0] - h, unit[:, 3] - c) + 10 * (np.abs(unit[:, 1] - zp) > 1e-9)
            distance[used] = np.inf
            used.append(int(np.argmin(distance)))
        if len(used) > BUDGET:
            break
        curve.append(row(train_ensemble([pool[i] for i in used], config), test, len(used)))
    return curve


def median_of_ratios(ratios: list[float | None]) -> float:
    """Median over seeds, a seed whose active curve never reached random's final value counted as inf."""
    return float(np.median([np.inf if v is None else v for v in ratios]))


def paired_by_runs(rows: list[dict]) -> list[dict]:
    """At each round past the start: in how many seeds active's held-out chi^2/bin is below random's at
    the same runs, and the mean and median difference (active - random) over seeds."""
    out = []
    for i, point in enumerate(rows[0]["curves"]["active"]):
        if point["runs"] <= START:
            continue
        diff = [r["curves"]["active"][i]["chi2_per_bin"] - r["curves"]["random"][i]["chi2_per_bin"] for r in rows]
        out.append({"runs": point["runs"], "seeds_active_better": int(sum(d < 0 for d in diff)), "seeds": len(diff),
                    "mean_difference": float(np.mean(diff)), "median_difference": float(np.median(diff))})
    return out


def first_reaching(curve: list[dict], chi2: float, after: int = 0) -> int | None:
    """Runs of the first round past `after` runs whose chi^2/bin is at most `chi2`. Active's rounds
    count from its first pick (after=START): a seed where random's final is no better than the
    shared start says nothing for active, so it is not credited with the start."""
    return next((r["runs"] for r in curve if r["runs"] > after and r["chi2_per_bin"] <= chi2), None)


def replay(data: ReplaySet, seed: int, config: SurrogateConfig) -> dict:
    torch.set_num_threads(1)  # in each worker process
    order = np.random.default_rng([seed, 0]).permutation(len(data.runs))
    test_runs = [data.runs[i] for i in order[:TEST]]
    pool = [data.runs[i] for i in order[TEST:]]
    test = held_out_arrays(test_runs, config.bins)
    curves = {"active": sequential("active", pool, config, test, seed, K),
              "random": sequential("random", pool, config, test, seed, K), "grid": grid(pool, config, test)}
    final = curves["random"][-1]
    reached = first_reaching(curves["active"], final["chi2_per_bin"], after=START)
    stops = {s: next((r["runs"] for r in c if r["within_2_bars"] >= DEFAULT_TARGET), None) for s, c in curves.items()}
    compare = {s: sequential(s, pool, config, test, seed, K_COMPARE) for s in ("active", "random")}
    compare_final = compare["random"][-1]
    compare_reached = first_reaching(compare["active"], compare_final["chi2_per_bin"], after=START)
    return {"seed": seed, "curves": curves, "random_final": final,
            "active_runs_to_random_final": reached,
            "ratio_to_random_budget": None if reached is None else reached / final["runs"],
            "random_own_ratio": first_reaching(curves["random"], final["chi2_per_bin"], after=START) / final["runs"],
            "grid_runs_to_random_final": first_reaching(curves["grid"], final["chi2_per_bin"]),
            "stop_at_runs": stops,
            "at_k_compare": {"curves": compare, "random_final": compare_final,
                             "active_runs_to_random_final": compare_reached,
                             "ratio_to_random_budget": None if compare_reached is None
                             else compare_reached / compare_final["runs"]}}


def plot(rows: list[dict]) -> None:
    from matplotlib.figure import Figure
    fig = Figure(figsize=(13, 4.5))
    ax, bx = fig.subplots(1, 2)
    colours = {"active": "tab:red", "random": "tab:blue", "grid": "tab:gray"}
    for strategy in STRATEGIES:
        for i, r in enumerate(rows):
            c = r["curves"][strategy]
            ax.plot([p["runs"] for p in c], [p["chi2_per_bin"] for p in c], "o-", ms=3, lw=1, alpha=0.6,
                    color=colours[strategy], label=strategy if i == 0 else None)
            bx.plot([p["runs"] for p in c], [p["within_2_bars"] for p in c], "o-", ms=3, lw=1, alpha=0.6,
                    color=colours[strategy], label=strategy if i == 0 else None)
    ax.axhline(1.0, color="k", lw=0.5, ls="--")
    ax.set_xlabel("MD runs trained on")
    ax.set_ylabel(f"held-out chi^2 per bin ({TEST} runs; exact predictor ~1)")
    ratios = [r["ratio_to_random_budget"] for r in rows]
    compare = median_of_ratios([r["at_k_compare"]["ratio_to_random_budget"] for r in rows])
    ax.set_title(f"active's runs to random's final / random's, {K} a round: " +
                 ", ".join("-" if v is None else f"{v:.2f}" for v in ratios) +
                 f"\n(median {median_of_ratios(ratios):g}; {K_COMPARE} a round: median {compare:g})", fontsize=9)
    ax.legend()
    bx.axhline(DEFAULT_TARGET, color="k", lw=0.5, ls="--", label=f"stop target {DEFAULT_TARGET}")
    bx.set_xlabel("MD runs trained on")
    bx.set_ylabel("held-out share within 2 MD error bars")
    bx.legend()
    fig.suptitle(f"replayed on {len(rows)} seeds of the real-MD data set{' (--quick)' if QUICK else ''}")
    fig.tight_layout()
    save_figure(fig, NAME)


def main() -> None:
    torch.set_num_threads(1)
    began = time.perf_counter()
    data = ReplaySet.load(DATA)
    config = SurrogateConfig(box_nm=data.box_nm, **REPLAY_NETWORK)
    with multiprocessing.get_context("fork").Pool(JOBS) as workers:
        rows = workers.starmap(replay, [(data, seed, config) for seed in SEEDS])
    for r in rows:
        print(f"seed {r['seed']}: active reaches random's final chi2 {r['random_final']['chi2_per_bin']:.3f} "
              f"at {r['active_runs_to_random_final']} runs", file=sys.stderr, flush=True)
    ratios = [r["ratio_to_random_budget"] for r in rows]
    median_ratio = median_of_ratios(ratios)
    compare_ratios = [r["at_k_compare"]["ratio_to_random_budget"] for r in rows]
    own = [r["random_own_ratio"] for r in rows]
    result = {"setup": {"data": str(DATA.relative_to(DATA.parents[2])), "runs_in_data": len(data.runs),
                        "converged_in_data": int(np.sum(data.converged)), "test_runs": TEST, "start": START,
                        "k": K, "k_compare": K_COMPARE, "budget": BUDGET, "seeds": list(SEEDS), "grid_levels_h_c": GRID_LEVELS,
                        "metric": "held-out chi^2 per bin", "stop_target_within_2_bars": DEFAULT_TARGET,
                        "stop_min_runs": MIN_STOP_RUNS, "network": asdict(config)},
              "ratio_per_seed": ratios, "median_ratio": median_ratio, "goal_met": median_ratio <= 0.7,
              "random_own_ratio_per_seed": own, "random_own_median_ratio": float(np.median(own)),
              "paired_by_runs": paired_by_runs(rows),
              "at_k_compare": {"k": K_COMPARE, "ratio_per_seed": compare_ratios,
                               "median_ratio": median_of_ratios(compare_ratios)},
              "seeds": rows, "wall_s": time.perf_counter() - began}
    print(write_result(NAME, result))
    plot(rows)
    print({"ratio_per_seed": ratios, "median_ratio": median_ratio, "at_k_compare": result["at_k_compare"],
           "stop_at_runs": [r["stop_at_runs"] for r in rows]})


if __name__ == "__main__":
    main()
