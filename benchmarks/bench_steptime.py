"""Step-time prediction error on held-out configurations of real runs on this machine.

Profiles builtin:digits with 1 and 2 gloo worker processes at six local batch sizes, fits thrifty's
model (and Ernest's NNLS model as a baseline) on a handful of configurations and reports the
median absolute percentage error (MdAPE) on all the others.
"""

import sys
from dataclasses import asdict

import matplotlib.pyplot as plt
import numpy as np
from scipy.optimize import nnls

from common import save_figure, write_result
from thrifty.perf.samples import config_medians
from thrifty.perf.steptime import fit_step_time, mdape
from thrifty.train.profiler import profile_workload

WORKERS, BATCHES, FIT_BATCHES = [1, 2], [16, 32, 64, 128, 256, 512], [16, 128, 512]


def ernest_fit(workers, batch, times):
    """Ernest (Venkataraman et al., NSDI 2016): t = th0 + th1 size/m + th2 log m + th3 m, NNLS."""
    size = batch * workers
    features = lambda m, s: np.column_stack([np.ones_like(m), s / m, np.log(m), m])
    theta, _ = nnls(features(workers, size), times)
    return lambda m, b: features(m, b * m) @ theta


def main(steps: int = 40) -> dict:
    profile = profile_workload("builtin:digits", WORKERS, BATCHES, steps=steps, warmup=5)
    c = config_medians([asdict(s) for s in profile.samples])
    fit = np.isin(c.local_batch, FIT_BATCHES)
    model = fit_step_time(c.num_nodes[fit], c.num_workers[fit], c.local_batch[fit], c.step_time_s[fit],
                          c.compute_time_s[fit], c.sync_time_s[fit])
    predicted = model.predict(c.num_nodes, c.num_workers, c.local_batch)
    ernest = ernest_fit(c.num_workers[fit], c.local_batch[fit], c.step_time_s[fit])(c.num_workers, c.local_batch)
    low, high = model.interval(c.num_nodes, c.num_workers, c.local_batch)
    held = ~fit
    result = {
        "workload": "builtin:digits", "workers": WORKERS, "local_batches": BATCHES,
        "fit_local_batches": FIT_BATCHES, "steps_per_config": steps, "ranks_used": "1 and 2 (2 cores)",
        "fit_configs": int(fit.sum()), "held_out_configs": int(held.sum()),
        "heldout_mdape_percent": mdape(predicted[held], c.step_time_s[held]),
        "heldout_mdape_percent_ernest": mdape(ernest[held], c.step_time_s[held]),
        "heldout_coverage_90": float(np.mean((low[held] <= c.step_time_s[held]) & (c.step_time_s[held] <= high[held]))),
        "model": model.to_dict(),
        "configs": [{"workers": int(w), "local_batch": int(b), "measured_s": float(t), "predicted_s": float(p),
                     "ernest_s": float(e), "held_out": bool(h)}
                    for w, b, t, p, e, h in zip(c.num_workers, c.local_batch, c.step_time_s, predicted, ernest, held)],
    }
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for n, colour in zip(WORKERS, ("tab:blue", "tab:orange")):
        m = c.num_workers == n
        ax.plot(c.local_batch[m], c.step_time_s[m] * 1e3, "o", color=colour, label=f"measured, {n} worker(s)")
        ax.plot(c.local_batch[m], predicted[m] * 1e3, "-", color=colour, label=f"thrifty model, {n}")
        ax.plot(c.local_batch[m], ernest[m] * 1e3, ":", color=colour, label=f"Ernest, {n}")
        ax.fill_between(c.local_batch[m], low[m] * 1e3, high[m] * 1e3, color=colour, alpha=0.12)
    ax.scatter(c.local_batch[fit], c.step_time_s[fit] * 1e3, s=120, facecolors="none", edgecolors="k",
               label="used for the fit")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("local batch")
    ax.set_ylabel("step time (ms)")
    ax.set_title(f"held-out MdAPE: thrifty {result['heldout_mdape_percent']:.1f}%, "
                 f"Ernest {result['heldout_mdape_percent_ernest']:.1f}%")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, "steptime_prediction")
    write_result("steptime_prediction", result)
    return result


if __name__ == "__main__":
    r = main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
    print(f"held-out MdAPE thrifty {r['heldout_mdape_percent']:.2f}% | Ernest {r['heldout_mdape_percent_ernest']:.2f}% "
          f"| 90% interval coverage {r['heldout_coverage_90']:.2f}")
