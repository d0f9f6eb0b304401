# SPDX-License-Identifier: MIT
"""TEST FIXTURE, NOT PHYSICS: cheap analytic stand-in profiles for the nanoconfinement surrogate,
for the campaign-machinery tests of active learning (the surrogate's accuracy is tested on real MD:
benchmarks/data/md_replay).

The shape only looks like what confined electrolytes show (Kadupitiya, Fox & Jadhao 2020, Fig. 3):
no ion centre within d/2 of a wall (the depletion layer), a contact peak at d/2 whose height grows
with the valency and the concentration, a dip behind it, decaying over a Debye-like length
0.304 / sqrt(I) nm (I the ionic strength, molar) to the bulk value in the middle, each ion's
profile then scaled to the count the model puts in the slit (md.surrogate.shapes.count_integrals,
the model's default box), so the two charges cancel. Each bin gets Gaussian noise of sd
0.03 rho + 0.01 c_ion and an error bar of 2 sd (a 95% bar), like an MD average with its error.
"""

import json
from pathlib import Path

import numpy as np

from thrifty.md.params import PARAMETERS
from thrifty.md.runs import Run
from thrifty.md.surrogate.shapes import count_integrals

BIN_NM = 0.05


def true_profiles(point: np.ndarray, z_nm: np.ndarray) -> np.ndarray:
    """Noise-free (2, len(z)) cation and anion densities (molar), z from the mid-plane."""
    h, zp, _, c, d_plus, d_minus = (float(v) for v in point)
    ionic_strength = 0.5 * (c * zp ** 2 + zp * c)
    debye_nm = 0.304 / np.sqrt(ionic_strength)
    out = []
    for _valency, bulk, d, gain in ((zp, c, d_plus, 0.6 * zp ** 1.5), (1, zp * c, d_minus, 0.3)):
        height = gain * np.sqrt(c / 0.3) * (0.5 / d) ** 0.5
        rho = np.ones_like(z_nm)
        for x in (h / 2 + z_nm, h / 2 - z_nm):  # distance from each wall
            gap = x - d / 2
            rho += np.where(gap >= 0, height * np.exp(-gap / debye_nm)
                            - 0.3 * height / (1 + height) * np.exp(-((gap - 1.5 * d) / (0.5 * d)) ** 2), 0.0)
        inside = np.minimum(h / 2 + z_nm, h / 2 - z_nm) >= d / 2
        out.append(np.where(inside, bulk * rho, 0.0))
    counts = count_integrals(np.asarray(point, float), None)[0]  # M nm per ion
    return np.array(out) * (counts / np.maximum(np.array(out).sum(axis=1) * (z_nm[1] - z_nm[0]), 1e-12))[:, None]


def standin_run(point: np.ndarray, rng: np.random.Generator, name: str = "") -> Run:
    h = float(point[0])
    n = int(round(h / BIN_NM))
    z_nm = -h / 2 + (np.arange(n) + 0.5) * h / n
    rho = true_profiles(point, z_nm)
    bulk = np.array([[point[3] / point[1]], [point[3]]])
    sd = 0.03 * rho + 0.01 * bulk
    noisy = np.where(rho > 0, np.maximum(rho + sd * rng.standard_normal(rho.shape), 0.0), 0.0)
    return Run(np.asarray(point, float), z_nm, noisy, 2 * sd, name)


def standin_runs(points: np.ndarray, seed: int) -> list[Run]:
    rng = np.random.default_rng(seed)
    return [standin_run(p, rng, f"run{i:04d}") for i, p in enumerate(points)]


def write_run(folder: Path, run: Run) -> Path:
    """The run as the MD campaign writes it: profiles.csv and params.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.json").write_text(json.dumps(dict(zip(PARAMETERS, run.point.tolist(), strict=True))))
    rows = ["z_nm,cation_molar,cation_err,anion_molar,anion_err"]
    rows += [f"{z:.4f},{a:.6f},{ea:.6f},{b:.6f},{eb:.6f}"
             for z, a, ea, b, eb in zip(run.z_nm, run.density[0], run.error[0], run.density[1], run.error[1], strict=True)]
    (folder / "profiles.csv").write_text("\n".join(rows) + "\n")
    return folder
