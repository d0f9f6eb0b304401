# SPDX-License-Identifier: MIT
"""Density profiles of the torch engine and of OpenMM (`md.job.run_md`, CPU platform) for the same
parameters agree within their error bars: same run length and sampling, different seeds.

Criterion: four torch replicas (one batch, one seed: four random streams) are each compared with the
OpenMM run: over the bins where either engine has a non-zero error bar, chi^2 per bin of
(torch - openmm) / sqrt(err_t^2 + err_o^2); the median of the four is at most CHI2_PER_BIN = 3, and
bins where both error bars are zero hold the same density (both empty, next to the walls). Why 3:
with block errors from 15 blocks each term would be about a Student t with 14 degrees of freedom
squared (mean 1.17), but neighbouring bins are correlated and the error bars of such short blocks
(2.5 ps) likely run small for both engines, so a comparison scatters widely and sits above 1.17,
with no bias between the engines (mean signed residual -0.05 to 0.0): measured single
comparisons 0.70-2.25, medians of four 1.25-1.63 against four OpenMM runs (OpenMM's CPU platform is
not bit-reproducible), and one median above 2.0 in five runs of this test.
Mutation caught (10x above the threshold): the torch wall repulsion with
s = d (the diameter) instead of d/2 (forces.wall_term, the path a run takes) gave 37 before the median of four, with 97% of the bins off by
more than 3 error bars. Not caught at this size: Ewald charges scaled by 0.5 (0.97): monovalent
profiles between uncharged walls of the same permittivity hardly depend on the electrostatics; a
trivalent system would, but its correlation time needs runs longer than this test may take.
20 ions (10 + 10) in 3 x 3 x 2 nm, 8000 steps of 5 fs, samples every 20 steps after 400, 25 per
block: about 14 s for torch and 6 s for OpenMM (25-30 s in all with the machine under load).
"""

import numpy as np
import torch
from md_jobs import OpenMMJob, run_openmm
from torch_reference_sampling import sample_profiles

from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.transient.protocol import JobCheckpoints

torch.set_num_threads(1)
MODEL = NanoconfinementModel(h_nm=2.0, c_molar=1.0, box_nm=3.0, cutoff_nm=1.0)
SAMPLING = dict(steps=8000, equilibration_steps=400, chunk=20, samples_per_block=25)
CHI2_PER_BIN = 3.0


def test_torch_and_openmm_profiles_agree_within_their_error_bars(tmp_path):
    replicas = sample_profiles([MODEL] * 4, seed=1, **SAMPLING)
    settings = OpenMMJob(system="nanoconfinement", platform="CPU", seed=2, model=MODEL, **SAMPLING)
    run_openmm(settings, tmp_path / "openmm", JobCheckpoints(tmp_path / "ck", handle_signals=False))
    rows = np.loadtxt(tmp_path / "openmm" / "profiles.csv", delimiter=",", skiprows=1)
    openmm_molar, openmm_err = rows[:, [1, 3]].T, rows[:, [2, 4]].T  # (cation, anion) x bins
    chi2_per_bin = []
    for profiles in replicas:
        assert profiles.molar.shape == openmm_molar.shape and profiles.complete_blocks == 15
        sigma = np.sqrt(profiles.error_molar ** 2 + openmm_err ** 2)
        measured = sigma > 0
        assert np.array_equal(profiles.molar[~measured], openmm_molar[~measured])
        assert measured.sum() >= 50  # most bins hold ions: the comparison is not vacuous
        chi2_per_bin.append((((profiles.molar - openmm_molar)[measured] / sigma[measured]) ** 2).mean())
    assert np.median(chi2_per_bin) <= CHI2_PER_BIN, f"chi^2 per bin of the four replicas: {chi2_per_bin}"
