# SPDX-License-Identifier: MIT
"""Statistical efficiency check: steps to the target metric measured at several batch sizes versus
the steps predicted from the gradient noise scale measured at the smallest batch.

Prediction (McCandlish et al. 2018): S(B) = S(B0) (1 + B_noise/B) / (1 + B_noise/B0), with S(B0)
and B_noise both taken from the runs at the smallest batch B0. Each batch size is trained with
several seeds; the median steps are compared.
"""

import matplotlib.pyplot as plt
import numpy as np
from rich.progress import track

from common import save_figure, write_result
from thrifty.perf.efficiency import calibrate_s_min, steps_to_target
from thrifty.perf.jobmodel import _noise_arrays
from thrifty.perf.noise import noise_scale_from_samples
from thrifty.train.loop import train_to_target
from thrifty.workloads import load_workload

BATCHES, SEEDS = [16, 32, 64, 128, 256], [0, 1, 2, 3, 4]


def main() -> dict:
    workload = load_workload("builtin:digits")
    steps, noise = {}, {k: [] for k in ("small_batch", "small_grad_sq", "big_batch", "big_grad_sq")}
    for batch, seed in track([(b, s) for b in BATCHES for s in SEEDS], description="training to target"):
        result = train_to_target(workload, [batch], max_steps=5000, eval_every=2, seed=seed,
                                 noise_every=1)
        steps.setdefault(batch, []).append(result.steps if result.reached_target else np.nan)
        if batch == BATCHES[0]:
            for key in noise:
                noise[key] += result.noise[key]
    b0 = BATCHES[0]
    noise_scale = noise_scale_from_samples(*_noise_arrays(noise))
    measured = {b: float(np.nanmedian(v)) for b, v in steps.items()}
    s_min = calibrate_s_min(measured[b0], b0, noise_scale)
    predicted = {b: float(steps_to_target(b, s_min, noise_scale)) for b in BATCHES}
    errors = {b: (predicted[b] - measured[b]) / measured[b] * 100 for b in BATCHES[1:]}
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for b in BATCHES:
        ax.scatter([b] * len(steps[b]), steps[b], color="grey", s=12, alpha=0.6)
    ax.plot(BATCHES, [measured[b] for b in BATCHES], "o-", label="measured (median of seeds)")
    ax.plot(BATCHES, [predicted[b] for b in BATCHES], "s--",
            label=f"predicted from B_noise = {noise_scale:.0f} at B = {b0}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("global batch")
    ax.set_ylabel(f"steps to {workload.metric_name} {workload.target_metric}")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, "statistical_efficiency")
    result = {"workload": "builtin:digits", "target_metric": workload.target_metric, "seeds": SEEDS,
              "noise_scale_at_smallest_batch": noise_scale, "s_min": s_min,
              "steps_by_seed": {str(b): v for b, v in steps.items()},
              "measured_median_steps": {str(b): v for b, v in measured.items()},
              "predicted_steps": {str(b): v for b, v in predicted.items()},
              "prediction_error_percent": {str(b): v for b, v in errors.items()},
              "median_abs_error_percent": float(np.median(np.abs(list(errors.values()))))}
    write_result("statistical_efficiency", result)
    return result


if __name__ == "__main__":
    r = main()
    print(f"B_noise {r['noise_scale_at_smallest_batch']:.1f}")
    for b in BATCHES:
        print(f"B={b:4d}: measured {r['measured_median_steps'][str(b)]:6.0f}  predicted {r['predicted_steps'][str(b)]:6.0f}")
