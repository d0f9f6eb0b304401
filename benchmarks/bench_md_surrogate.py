"""The nanoconfinement surrogate on the analytic STAND-IN profiles (tests/md/standin_profiles.py, a
fixture, not physics) until the MD campaign runs. One thread.

1. The published network (5 members of 6 -> 512 -> 256 -> 2 x 50) trained on 200 random stand-in
   runs: held-out accuracy on 100 others, training time, and predict latency after load (median
   of 300 single-point predictions with contact, peak and mid-plane, as `thrifty md predict` does).
2. Runs to a target share of bins within the error bar (held-out 40 runs) for active learning
   (max ensemble spread with a minimum distance, k = 5 per round from 10 random runs), random
   sampling (the same start, k = 5) and a sequence of full grids; several seeds; a smaller
   network (64 -> 64) so the comparison fits in minutes.
"""

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "md"))

from common import save_figure, write_result  # noqa: E402
from standin_profiles import learning_curve, runs_to_target, standin_runs  # noqa: E402
from thrifty.md.params import ParameterBox  # noqa: E402
from thrifty.md.profile_grid import features  # noqa: E402
from thrifty.md.runs import grid_arrays  # noqa: E402
from thrifty.md.surrogate import Ensemble, SurrogateConfig, train_ensemble  # noqa: E402
from thrifty.md.surrogate_metrics import accuracy  # noqa: E402

SEEDS = (0, 1, 2)
TARGETS = (0.65, 0.70)
SMALL = SurrogateConfig(hidden=(64, 64), max_epochs=400, patience=60)
STRATEGIES = ("active", "random", "grid")


def published(tmp: Path) -> dict:
    box, rng = ParameterBox(), np.random.default_rng(100)
    train, test = standin_runs(box.sample(200, rng), 101), standin_runs(box.sample(100, rng), 102)
    start = time.perf_counter()
    model = train_ensemble(train, SurrogateConfig())
    train_s = time.perf_counter() - start
    model.save(tmp)
    model = Ensemble.load(tmp)
    points, density, error = grid_arrays(test)
    score = accuracy(points, model.predict(points).mean, density, error)
    latencies = []
    for point in points[np.arange(300) % len(points)]:
        start = time.perf_counter()
        members = model.predict(point).members[:, 0]
        features(members[:, 0], point[0], point[4]), features(members[:, 1], point[0], point[5])
        latencies.append(time.perf_counter() - start)
    return {"train_runs": 200, "test_runs": 100, "train_s": train_s, "best_epochs": model.epochs,
            "accuracy": score.to_dict(), "predict_ms_median": 1e3 * float(np.median(latencies)),
            "predict_ms_p90": 1e3 * float(np.quantile(latencies, 0.9))}


def comparison() -> dict:
    test = standin_runs(ParameterBox().sample(40, np.random.default_rng(99)), 98)
    curves = {s: {seed: learning_curve(s, SMALL, start=10, k=5, budget=80 if s != "grid" else 243, test=test,
                                       seed=seed) for seed in SEEDS} for s in STRATEGIES}
    reached = {f"{t:.2f}": {s: [runs_to_target(curves[s][seed], t) for seed in SEEDS] for s in STRATEGIES}
               for t in TARGETS}
    return {"curves": curves, "runs_to_target": reached}


def plot(result: dict) -> None:
    from matplotlib.figure import Figure
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for strategy, colour in zip(STRATEGIES, ("tab:red", "tab:blue", "tab:gray")):
        for i, curve in enumerate(result["comparison"]["curves"][strategy].values()):
            ax.plot([r["runs"] for r in curve], [r["within_error"] for r in curve], "o-", color=colour, ms=3,
                    alpha=0.7, label=strategy if i == 0 else None)
    for target in TARGETS:
        ax.axhline(target, color="k", lw=0.5, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("stand-in runs trained on")
    ax.set_ylabel("held-out share of bins within the error bar")
    ax.set_title("surrogate on the analytic stand-in (not MD): active vs random vs grid")
    ax.legend()
    save_figure(fig, "md_surrogate")


def main() -> None:
    import tempfile
    torch.set_num_threads(1)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = {"note": "analytic stand-in profiles (tests/md/standin_profiles.py), not MD",
                  "published_network": published(Path(tmp)), "comparison": comparison()}
    result["wall_s"] = time.perf_counter() - start
    write_result("md_surrogate", result)
    plot(result)
    print({k: result[k] for k in ("published_network", "wall_s")}, result["comparison"]["runs_to_target"])


if __name__ == "__main__":
    main()
