# SPDX-License-Identifier: MIT
"""How the surrogate's shape basis was chosen (md.surrogate.ensemble), on splits the held-out
benchmark does not score. One thread.

Data: the replay set (benchmarks/data/md_replay/runs.npz). For each of SPLITS (10-29; the held-out
benchmark, bench_md_surrogate.py, scores 0-4): 30 random runs train the ensemble
(md.surrogate.ensemble.train_ensemble, the default network but for its basis; no calibration: the
band does not move the mean), 50 others score it. Per basis: the held-out RMS against the truth
(md.surrogate.metrics: the MD noise taken out) over the flat profile's, per ion, as the median over
the splits and as the ratio of the mean RMS; and chi^2 per bin.

Bases: cosines over the slit fraction u = |z| / (h/2) (the format /2 basis, 4 or 8 modes); Gaussian
bumps at fixed distances from the wall plane (width 0.15 nm), with and without one slit cosine;
exponentials in the wall distance. The default (bumps at 0.3, 0.55, 0.8, 1.05 nm and one cosine)
is the first row.
"""

import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from common import save_figure, write_result
from thrifty.md.surrogate.baselines import Flat
from thrifty.md.surrogate.ensemble import SurrogateConfig, train_ensemble
from thrifty.md.surrogate.md_noise import held_out_arrays
from thrifty.md.surrogate.metrics import score
from thrifty.md.surrogate.replay import ReplaySet

DATA = Path(__file__).resolve().parent / "data" / "md_replay" / "runs.npz"
SPLITS = range(10, 30)
TRAIN, TEST = 30, 50
IONS = ("cation", "anion")
BASES = {
    "default: bumps 0.3-1.05 nm + 1 cosine": {},
    "8 cosines over the slit (format /2)": {"wall_bumps_nm": (), "slit_modes": 8},
    "4 cosines over the slit": {"wall_bumps_nm": (), "slit_modes": 4},
    "bumps 0.3-1.05 nm, no cosine": {"slit_modes": 0},
    "bumps 0.3-1.3 nm (5), no cosine": {"wall_bumps_nm": (0.3, 0.55, 0.8, 1.05, 1.3), "slit_modes": 0},
    "bumps 0.3, 0.65, 1.0 nm (width 0.2) + 1 cosine": {"wall_bumps_nm": (0.3, 0.65, 1.0), "bump_width_nm": 0.2},
}


def evaluate(data: ReplaySet, config: SurrogateConfig, flat: dict[int, dict]) -> dict:
    """The basis `config` has over SPLITS; `flat` holds each split's flat-profile scores."""
    ratios, truth, chi2 = [], [], []
    for seed in SPLITS:
        train, test, _ = data.split(1000 + seed, TRAIN, TEST)
        model = train_ensemble(train, config)
        points, density, error = held_out_arrays(test, config.bins)
        net = score(points, model.predict(points).mean, density, error)
        ratios.append([net["rms_vs_truth_molar"][i] / flat[seed]["rms_vs_truth_molar"][i] for i in IONS])
        truth.append([[net["rms_vs_truth_molar"][i], flat[seed]["rms_vs_truth_molar"][i]] for i in IONS])
        chi2.append(net["chi2_per_bin"])
    ratios, truth = np.array(ratios), np.array(truth)  # (splits, ion), (splits, ion, network/flat)
    return {"median_rms_vs_truth_over_flat": dict(zip(IONS, np.median(ratios, axis=0).tolist(), strict=True)),
            "mean_rms_vs_truth_over_flat": dict(zip(IONS, (truth[:, :, 0].mean(0) / truth[:, :, 1].mean(0)).tolist(),
                                                    strict=True)),
            "chi2_per_bin_mean": float(np.mean(chi2)),
            "per_split_over_flat": {ion: ratios[:, i].tolist() for i, ion in enumerate(IONS)}}


def plot(rows: dict) -> None:
    from matplotlib.figure import Figure
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    names = list(rows)
    for i, ion in enumerate(IONS):
        ax.barh(np.arange(len(names)) + (i - 0.5) * 0.4, [rows[n]["median_rms_vs_truth_over_flat"][ion] for n in names],
                0.4, label=ion)
    ax.axvline(0.5, color="k", lw=0.6, ls="--")
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"held-out RMS vs truth / flat profile's (median of {len(SPLITS)} splits; goal <= 0.5)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "md_surrogate_basis")


def main() -> None:
    torch.set_num_threads(1)
    began = time.perf_counter()
    data = ReplaySet.load(DATA)
    base = SurrogateConfig(box_nm=data.box_nm)
    flat = {}  # the flat profile needs no training: scored once per split
    for seed in SPLITS:
        _, test, _ = data.split(1000 + seed, TRAIN, TEST)
        points, density, error = held_out_arrays(test, base.bins)
        flat[seed] = score(points, Flat(base.box_nm, base.bins).predict(points), density, error)
    rows = {}
    for name, change in BASES.items():
        rows[name] = {"config": change, **evaluate(data, replace(base, **change), flat)}
        print(f"{name}: {rows[name]['median_rms_vs_truth_over_flat']}", file=sys.stderr, flush=True)
    print(write_result("md_surrogate_basis", {
        "setup": {"data": str(DATA.relative_to(DATA.parents[2])), "splits": list(SPLITS), "train_runs": TRAIN,
                  "test_runs": TEST, "network": {k: v for k, v in base.__dict__.items()}},
        "bases": rows, "wall_s": time.perf_counter() - began}))
    plot(rows)


if __name__ == "__main__":
    main()
