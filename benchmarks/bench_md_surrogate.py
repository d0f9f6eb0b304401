# SPDX-License-Identifier: MIT
"""The nanoconfinement surrogate on REAL MD, held out: trained on a short campaign, scored on runs it
never saw, beside the no-ML baselines (issue 24 items 1-3). One thread.

Data: the replay set (benchmarks/data/md_replay/runs.npz, benchmarks/build_md_replay.py: OpenMM
runs over h 2.5-4 nm, z+ 1-3, c 0.3-0.9 M in bench_md_campaign_real.py's 4 nm box, error bars
<= 0.15 M or the 20,000-step cap). For each of SPLITS seeds: TRAIN random runs are the campaign,
TEST other random runs are held out. The surrogate (md.surrogate.calibration.fit_surrogate: the
ensemble, its 90% band calibrated by 5-fold cross-validation on the TRAIN runs only) and the
baselines fitted on the same TRAIN runs (flat profile, nearest run, Gaussian process) predict the
TEST runs' symmetrised profiles. Reported per split and as the median over splits:
- RMS against MD per ion, and against the truth (md.surrogate.metrics.rms_vs_truth: the MD noise
  taken out; an exact predictor scores 0 there and the noise RMS against MD, also reported);
- the share of bins within 2 MD error bars and chi^2 per bin, beside what the noise-free profile
  itself would score on these runs (`exact_predictor`: with 10-20 blocks an error bar is itself
  uncertain, so about 0.92-0.93 and 1.1-1.3 rather than 0.95 and 1);
- the largest |net charge| (M nm) of the predicted profiles;
- the share of held-out bins inside the stated 90% band, and of the TEST points the joint range
  check flags (md.surrogate.domain).
Goals (issue 24): RMS <= 0.5 x the flat baseline's for both ions, |net charge| <= 0.02 M nm, the
90% band covering 0.85-0.95. `--quick`: 2 splits, written as md_surrogate_quick (git-ignored).
"""

import sys
import time
from pathlib import Path

import numpy as np
import torch

from common import save_figure, write_result
from thrifty.md.surrogate.baselines import baselines
from thrifty.md.surrogate.calibration import NETWORK, fit_surrogate
from thrifty.md.surrogate.ensemble import SurrogateConfig
from thrifty.md.surrogate.md_noise import held_out_arrays
from thrifty.md.surrogate.metrics import band_coverage, reached, score
from thrifty.md.surrogate.replay import ReplaySet

QUICK = "--quick" in sys.argv
NAME = "md_surrogate_quick" if QUICK else "md_surrogate"
DATA = Path(__file__).resolve().parent / "data" / "md_replay" / "runs.npz"
SPLITS = (0, 1) if QUICK else (0, 1, 2, 3, 4)
TRAIN, TEST = 30, 50
IONS = ("cation", "anion")


def exact_predictor(blocks: np.ndarray, density: np.ndarray, error: np.ndarray) -> dict:
    """What the noise-free profile itself would score: a bin's (MD - truth) / error bar is Student-t
    with (blocks - 1) degrees of freedom (a standard error from that many block means), so its
    expected chi^2 is nu / (nu - 2) and its share within 2 bars P(|t_nu| <= 2); averaged over the
    reached bins of the runs (the folding and the 0.01 M floor ignored)."""
    from scipy.stats import t
    nu = np.maximum(blocks - 1, 3).astype(float)
    weight = reached(density, error).sum(axis=(1, 2))
    return {"within_2_bars": float(np.average(t.cdf(2, nu) - t.cdf(-2, nu), weights=weight)),
            "chi2_per_bin": float(np.average(nu / (nu - 2), weights=weight))}


def split(data: ReplaySet, seed: int, config: SurrogateConfig) -> dict:
    train, test, held = data.split(1000 + seed, TRAIN, TEST)
    began = time.perf_counter()
    model, _ = fit_surrogate(train, config)
    fit_s = time.perf_counter() - began
    points, density, error = held_out_arrays(test, config.bins)
    prediction = model.predict(points)
    predicted = {NETWORK: prediction.mean, **{name: b.predict(points) for name, b in
                                              baselines(train, config.box_nm, config.bins).items()}}
    scores = {name: score(points, p, density, error) for name, p in predicted.items()}
    low, high = prediction.band()
    flat = scores["flat"]
    return {"seed": seed, "fit_s": fit_s, "band_scale": model.band_scale, "scores": scores,
            "exact_predictor": exact_predictor(data.blocks[held], density, error),
            "noise_rms_molar": {ion: float(np.sqrt(np.mean(error[:, i] ** 2))) for i, ion in enumerate(IONS)},
            "band_coverage": band_coverage(low, high, density, error),
            "flagged_out_of_domain": float(np.mean(~model.domain.inside(points))),
            "rms_over_flat": {ion: scores[NETWORK]["rms_molar"][ion] / flat["rms_molar"][ion] for ion in IONS},
            "rms_vs_truth_over_flat": {ion: scores[NETWORK]["rms_vs_truth_molar"][ion]
                                       / flat["rms_vs_truth_molar"][ion] for ion in IONS},
            "example": {"point": points[0].tolist(), "md": density[0].tolist(), "md_error": error[0].tolist(),
                        "mean": prediction.mean[0].tolist(), "low": low[0].tolist(), "high": high[0].tolist(),
                        "flat": predicted["flat"][0].tolist()}}


def median(rows: list[dict], *keys: str) -> float:
    values = []
    for row in rows:
        for key in keys:
            row = row[key]
        values.append(row)
    return float(np.median(values))


def summary(rows: list[dict]) -> dict:
    names = list(rows[0]["scores"])
    out = {name: {"rms_molar": {ion: median(rows, "scores", name, "rms_molar", ion) for ion in IONS},
                  "rms_vs_truth_molar": {ion: median(rows, "scores", name, "rms_vs_truth_molar", ion) for ion in IONS},
                  "within_2_bars": median(rows, "scores", name, "within_2_bars"),
                  "chi2_per_bin": median(rows, "scores", name, "chi2_per_bin"),
                  "max_abs_net_charge_molar_nm": max(r["scores"][name]["max_abs_net_charge_molar_nm"] for r in rows)}
           for name in names}
    return {"median_over_splits": out,
            "noise_rms_molar": {ion: median(rows, "noise_rms_molar", ion) for ion in IONS},
            "exact_predictor": {k: median(rows, "exact_predictor", k) for k in ("within_2_bars", "chi2_per_bin")},
            "band_coverage": [r["band_coverage"] for r in rows],
            "rms_over_flat": {ion: [r["rms_over_flat"][ion] for r in rows] for ion in IONS},
            "rms_vs_truth_over_flat": {ion: [r["rms_vs_truth_over_flat"][ion] for r in rows] for ion in IONS},
            "flagged_out_of_domain": [r["flagged_out_of_domain"] for r in rows]}


def plot(rows: list[dict], result: dict) -> None:
    from matplotlib.figure import Figure
    fig = Figure(figsize=(15, 4.2))
    ax, bx, cx = fig.subplots(1, 3)
    names = list(result["summary"]["median_over_splits"])
    width = 0.2
    for j, name in enumerate(names):
        for i, ion in enumerate(IONS):
            values = [r["scores"][name]["rms_vs_truth_molar"][ion] for r in rows]
            ax.bar(i + (j - 1.5) * width, np.median(values), width, label=name if i == 0 else None,
                   color=f"C{j}", yerr=[[np.median(values) - min(values)], [max(values) - np.median(values)]])
    ax.set_xticks(range(len(IONS)), IONS)
    ax.set_ylabel("held-out RMS vs truth (MD noise removed), M")
    ax.set_title(f"median (bars: range) over {len(rows)} splits; train {TRAIN}, test {TEST}")
    ax.legend(fontsize=8)
    for j, name in enumerate(names):
        bx.scatter([r["scores"][name]["chi2_per_bin"] for r in rows], [r["scores"][name]["within_2_bars"] for r in rows],
                   color=f"C{j}", label=name)
    bx.axhline(0.95, color="k", lw=0.5, ls="--")
    bx.axvline(1.0, color="k", lw=0.5, ls="--")
    bx.set_xlabel("chi^2 per bin (exact predictor: ~1)")
    bx.set_ylabel("share within 2 MD error bars (exact: ~0.95)")
    bx.legend(fontsize=8)
    example = rows[0]["example"]
    h = example["point"][0]
    z = ((np.arange(len(example["md"][0])) + 0.5) / len(example["md"][0]) - 0.5) * h
    for i, (ion, colour) in enumerate(zip(IONS, ("tab:red", "tab:blue"), strict=True)):
        cx.errorbar(z, example["md"][i], yerr=example["md_error"][i], fmt=".", color=colour, ms=3, label=f"MD {ion}")
        cx.plot(z, example["mean"][i], color=colour, label=f"surrogate {ion}")
        cx.fill_between(z, example["low"][i], example["high"][i], color=colour, alpha=0.2)
        cx.plot(z, example["flat"][i], color=colour, ls=":", lw=1)
    p = example["point"]
    cx.set_title(f"held out: h {p[0]:.2f} nm, z+ {p[1]:.0f}, c {p[3]:.2f} M (band: 90%, dotted: flat)", fontsize=9)
    cx.set_xlabel("z from the mid-plane, nm")
    cx.set_ylabel("density, M")
    cx.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, NAME)


def main() -> None:
    torch.set_num_threads(1)
    began = time.perf_counter()
    data = ReplaySet.load(DATA)
    config = SurrogateConfig(box_nm=data.box_nm)
    rows = []
    for seed in SPLITS:
        rows.append(split(data, seed, config))
        print(f"split {seed}: band coverage {rows[-1]['band_coverage']:.3f}, RMS/flat {rows[-1]['rms_over_flat']}, "
              f"vs truth {rows[-1]['rms_vs_truth_over_flat']}", file=sys.stderr, flush=True)
    result = {"setup": {"data": str(DATA.relative_to(DATA.parents[2])), "runs_in_data": len(data.runs),
                        "train_runs": TRAIN, "test_runs": TEST, "splits": list(SPLITS),
                        "network": {k: v for k, v in config.__dict__.items()}, "data_settings": data.settings},
              "summary": summary(rows), "splits": rows, "wall_s": time.perf_counter() - began}
    print(write_result(NAME, result))
    plot(rows, result)
    print({k: result["summary"][k] for k in ("band_coverage", "rms_over_flat", "rms_vs_truth_over_flat")})


if __name__ == "__main__":
    main()
