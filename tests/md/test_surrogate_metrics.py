# SPDX-License-Identifier: MIT
"""The surrogate's accuracy metric against cases computed by hand."""

import numpy as np
import pytest

from thrifty.md.profile_grid import features, reduced_grid, to_grid, to_z_nm
from thrifty.md.surrogate.metrics import accuracy, fraction_within_error, rmse


def test_fraction_within_error_counts_bins_inside_the_bar_edges_included():
    simulated = np.array([1.0, 1.0, 1.0, 1.0])
    error = np.array([0.1, 0.1, 0.5, 0.0])
    predicted = np.array([1.05, 1.2, 1.5, 1.0])  # inside, outside, on the edge, exact with no bar
    assert fraction_within_error(predicted, simulated, error) == 0.75


def test_rmse_by_hand():
    assert rmse([1.0, 2.0], [0.0, 4.0]) == pytest.approx(np.sqrt((1 + 4) / 2))


def test_features_read_contact_peak_and_mid_plane_off_the_grid():
    bins, h, d = 10, 4.0, 0.8  # grid s = -0.45..0.45 step 0.1: z = s h = -1.8..1.8 step 0.4
    profile = np.array([0.0, 3.0, 1.0, 0.5, 0.4, 0.6, 0.5, 1.0, 2.0, 0.0])
    got = features(profile, h, d)
    # within d = 0.8 nm of a wall: z = -1.8, -1.4 (left: max 3) and 1.4, 1.8 (right: max 2)
    assert got["contact"] == pytest.approx(2.5)
    assert got["peak"] == 3.0
    assert got["mid"] == pytest.approx(0.5)  # s = 0 halfway between 0.4 and 0.6
    assert reduced_grid(bins)[0] == pytest.approx(-0.45) and to_z_nm(h, bins)[-1] == pytest.approx(1.8)


def test_to_grid_maps_any_z_range_onto_reduced_position():
    z = np.linspace(10.0, 13.0, 7)  # a slit of h = 3 whose mid-plane is at z = 11.5
    values = 2.0 * (z - 11.5)  # linear: the resampled profile is 2 s h
    assert to_grid(z, values, 3.0, bins=6) == pytest.approx(2 * reduced_grid(6) * 3.0)


def test_accuracy_over_runs_by_hand():
    points = np.array([[4.0, 1, -1, 0.5, 1.0, 1.0]])  # 4 bins; contact layer h (1/2 - |s|) <= 1 nm: the outer ones
    simulated = np.array([[[1.0, 0.5, 0.5, 1.0], [2.0, 1.0, 1.0, 2.0]]])
    predicted = simulated + np.array([[[0.1, 0.0, 0.0, 0.3], [0.0, 0.0, 0.2, 0.0]]])
    error = np.full_like(simulated, 0.15)
    got = accuracy(points, predicted, simulated, error)
    assert got.within_error == 6 / 8
    assert got.rmse_molar["cation_contact"] == pytest.approx(0.2)  # (1.1 + 1.3) / 2 - 1
    assert got.rmse_molar["cation_peak"] == pytest.approx(0.3)
    assert got.rmse_molar["anion_mid"] == pytest.approx(0.1)  # (1 + 1.2) / 2 - 1
