# SPDX-License-Identifier: MIT
"""GPU projection accuracy: the per-kernel roofline (thrifty.perf.roofline) against published
training throughput, held out by model and by GPU, per regime (launch-, memory-, compute-bound).

Fits the roofline on all usable published rows, reports leave-one-model-out and leave-one-GPU-out
median absolute percentage error per regime (goal <= 12%) and a predicted-vs-published plot under
benchmarks/results/. It measures only: the bundled calibration src/thrifty/data/gpu/roofline_params.json
is refitted by `python -m thrifty.perf.gpu_calibration refit` (the same fit;
tests/perf/test_gpu_calibration.py checks that file equals a fresh fit).

    .venv/bin/python benchmarks/bench_gpu_projection.py
"""

import json

import numpy as np

from common import save_figure, write_result
from thrifty.perf.gpu_calibration import calibrate, regime
from thrifty.perf.roofline import read_gpu_specs, regime_times_s, step_time_s

# GPUs without published training rows, reached from specs (issue 22's held-out T4 workloads):
# (model key, precision, local batches)
SPEC_ONLY = (("resnet50_v1.5", "amp", (32, 64, 128, 256)), ("resnet18_cifar", "fp32", (32, 128, 512)))


def spec_only_projections(cal) -> list[dict]:
    """Samples/s on one T4 of the published models above, with each step split by regime."""
    t4 = read_gpu_specs()["t4"]
    out = []
    for key, precision, batches in SPEC_ONLY:
        for b in batches:
            step = float(step_time_s(cal.works[key], t4, [b], 1, precision, cal.params)[0])
            out.append({"model": key, "gpu": "t4", "precision": precision, "batch": b,
                        "samples_per_s": b / step, "step_s": step,
                        "regime_s": regime_times_s(cal.works[key], t4, b, precision, cal.params)})
    return out


def main() -> None:
    cal = calibrate()
    rows, by_model, by_gpu, observed = cal.rows, cal.by_model, cal.by_gpu, cal.observed
    calibration = cal.record()
    result = {**calibration,
              "per_model_median_ape_percent": by_model["per_group_median_ape_percent"],
              "per_gpu_median_ape_percent": by_gpu["per_group_median_ape_percent"],
              "rows": [{"model": r.model_key, "gpu": r.gpu, "gpus": r.gpus, "precision": r.precision,
                        "batch_per_gpu": r.batch_per_gpu, "published": r.samples_per_s_per_gpu,
                        "fitted": float(f), "regime": regime(r, cal.works, cal.params),
                        "leave_model_out": float(m), "leave_gpu_out": float(g)}
                       for r, f, m, g in zip(rows, cal.fitted, by_model["predicted"], by_gpu["predicted"], strict=True)],
              "spec_only_projections": spec_only_projections(cal)}
    write_result("gpu_projection", result)

    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    models = sorted({r.model_key for r in rows})
    for ax, (title, held) in zip(axes, (("leave one model out", by_model), ("leave one GPU out", by_gpu)), strict=True):
        colours = plt.get_cmap("tab20")
        for k, model in enumerate(models):
            idx = [i for i, r in enumerate(rows) if r.model_key == model]
            ax.scatter(observed[idx], np.array(held["predicted"])[idx], s=14, label=model,
                       color=colours(k % 20), marker="os^"[k // 7 % 3])
        lo, hi = observed.min() / 2, observed.max() * 2
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.fill_between([lo, hi], [lo * 0.88, hi * 0.88], [lo * 1.12, hi * 1.12], color="grey", alpha=0.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("published samples/s per GPU")
        ax.set_ylabel("predicted samples/s per GPU")
        regimes = ", ".join(f"{g} {v['median_ape_percent']:.0f}%" for g, v in held["per_regime"].items()
                            if v["median_ape_percent"] is not None)
        ax.set_title(f"{title}: median APE {held['median_ape_percent']:.1f}%\n({regimes})", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    save_figure(fig, "gpu_projection")
    print(json.dumps(calibration["median_ape_percent"], indent=2), f"held-out sigma_log {cal.held_out_sigma_log:.3f}")
    print("params:", {k: f"{v:.4g}" for k, v in cal.params.to_dict().items()})
    for name, held in (("model", by_model), ("GPU", by_gpu)):
        print(f"leave one {name} out, per regime:",
              {g: (v["rows"], None if v["median_ape_percent"] is None else round(v["median_ape_percent"], 1))
               for g, v in held["per_regime"].items()})
    print("per model:", {k: round(v, 1) for k, v in by_model["per_group_median_ape_percent"].items()})
    print("per GPU:", {k: round(v, 1) for k, v in by_gpu["per_group_median_ape_percent"].items()})
    for p in result["spec_only_projections"]:
        print(f"T4 {p['model']} {p['precision']} batch {p['batch']}: {p['samples_per_s']:.0f} samples/s",
              {k: round(v * 1e3, 1) for k, v in p["regime_s"].items()}, "ms")


if __name__ == "__main__":
    main()
