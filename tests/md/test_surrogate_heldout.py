# SPDX-License-Identifier: MIT
"""The surrogate on REAL MD runs it never saw (the replay set, benchmarks/data/md_replay/runs.npz):
trained on a short campaign of 30 runs, scored on 40 others beside the no-ML baselines, with the
band calibrated by cross-validation on the 30. One split; bench_md_surrogate.py has five."""

from pathlib import Path

import numpy as np
import pytest
import torch

from thrifty.md.surrogate.baselines import baselines
from thrifty.md.surrogate.calibration import NETWORK, fit_surrogate
from thrifty.md.surrogate.ensemble import SurrogateConfig
from thrifty.md.surrogate.md_noise import held_out_arrays
from thrifty.md.surrogate.metrics import band_coverage, score
from thrifty.md.surrogate.replay import ReplaySet

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "md_replay" / "runs.npz"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def held_out():
    torch.set_num_threads(1)
    data = ReplaySet.load(DATA)
    train, test, _ = data.split(7, 30, 40)
    config = SurrogateConfig(box_nm=data.box_nm)
    model, cv = fit_surrogate(train, config)
    points, density, error = held_out_arrays(test, config.bins)
    prediction = model.predict(points)
    predicted = {NETWORK: prediction.mean, **{k: b.predict(points) for k, b in
                                              baselines(train, config.box_nm, config.bins).items()}}
    return {name: score(points, p, density, error) for name, p in predicted.items()}, \
        band_coverage(*prediction.band(), density, error), model, points


def test_the_network_beats_every_baseline_on_runs_it_never_saw(held_out):
    """What `train-surrogate` and the campaign report claim: the network earns its place, and its
    RMS against the truth is at most half the flat profile's for both ions (issue 24's goal; 0.40
    and 0.0 here). Mutations caught (tried): a network that does not learn (learning rate 0: its
    ideal-gas prior, which ties the flat profile); the shape's basis in the slit fraction (8 cosine
    modes, no wall bumps: cation 0.501 of flat, a thin margin: test_surrogate.py checks the basis'
    wall distances directly)."""
    scores, _, _, _ = held_out
    net = scores[NETWORK]
    for ion in ("cation", "anion"):
        assert net["rms_vs_truth_molar"][ion] <= 0.5 * scores["flat"]["rms_vs_truth_molar"][ion], (ion, scores)
    for name in ("flat", "nearest run", "gaussian process"):
        assert net["chi2_per_bin"] < scores[name]["chi2_per_bin"], (name, scores)
        assert net["within_2_bars"] > scores[name]["within_2_bars"], (name, scores)
        for ion in ("cation", "anion"):
            assert net["rms_vs_truth_molar"][ion] < scores[name]["rms_vs_truth_molar"][ion], (name, ion, scores)


def test_held_out_profiles_are_electroneutral_and_the_90_percent_band_covers_85_to_95_percent(held_out):
    """Mutation caught (tried): the band from the ensemble's spread alone, without the MD noise (it
    covered 0.30 of the bins, as the issue's "mean +- 2 sd" band did). Not caught: the normal scale
    1.645 without calibration (the fitted scale is close to it here)."""
    scores, coverage, _, _ = held_out
    assert scores[NETWORK]["max_abs_net_charge_molar_nm"] <= 0.02
    assert 0.85 <= coverage <= 0.95, coverage


def test_most_held_out_random_points_are_inside_the_training_domain(held_out):
    """The joint check does not flag the box's own interior: random points of the same box as 30
    training runs are mostly within the limit."""
    _, _, model, points = held_out
    assert np.mean(model.domain.inside(points)) >= 0.7
