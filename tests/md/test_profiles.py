# SPDX-License-Identifier: MIT
"""Density profiles: bins, block-average error bars, convergence and the landmark densities."""

import math

import numpy as np
import pytest

from thrifty.md import profiles as prof


def test_bins_between_walls_are_about_0_05_nm_and_end_on_the_walls():
    edges = prof.edges_nm((4.5, 7.5), walls=True)
    assert len(edges) == 61 and np.allclose(np.diff(edges), 0.05)
    odd = prof.edges_nm((0.0, 2.03), walls=True)
    assert len(odd) == 42 and odd[-1] == 2.03 and np.allclose(np.diff(odd), 2.03 / 41)
    assert len(prof.edges_nm((0.0, 5.0), walls=False)) == prof.PERIODIC_BINS + 1


def test_error_bars_are_the_standard_error_of_complete_block_means():
    """Three samples per block; the seventh sample opens a fourth block that counts in the mean only."""
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 5, (7, 2, 4)).astype(float)
    blocks = np.zeros((0, 2, 4))
    for sample, c in enumerate(counts):
        blocks = prof.add_sample(blocks, c, sample, 3)
    assert blocks.shape == (3, 2, 4)
    edges = np.linspace(-1.0, 1.0, 5)  # 0.5 nm bins
    p = prof.profiles(blocks, 7, 3, edges, area_nm2=2.0)
    to_molar = 1 / (2.0 * 0.5 * 0.6022)
    assert np.allclose(p.molar, counts.mean(0) * to_molar)
    means = counts[:6].reshape(2, 3, 2, 4).mean(1) * to_molar
    assert p.complete_blocks == 2 and np.allclose(p.error_molar, means.std(0, ddof=1) / math.sqrt(2))
    assert np.allclose(p.z_nm, [-0.75, -0.25, 0.25, 0.75]) and p.bin_width_nm == 0.5
    one = prof.profiles(blocks[:1], 3, 3, edges, 2.0)
    assert np.isnan(one.error_molar).all() and one.max_error_molar() == math.inf


def test_converged_needs_enough_blocks_and_every_error_bar_within_the_tolerance():
    edges = np.linspace(-1.0, 1.0, 3)
    steady = np.ones((prof.MIN_BLOCKS, 1, 2))  # no scatter: zero error bars
    assert prof.converged(prof.profiles(steady, prof.MIN_BLOCKS, 1, edges, 1.0), 0.02)
    assert not prof.converged(prof.profiles(steady[:-1], prof.MIN_BLOCKS - 1, 1, edges, 1.0), 0.02)
    noisy = steady.copy()
    noisy[0, 0, 1] = 3.0
    p = prof.profiles(noisy, prof.MIN_BLOCKS, 1, edges, 1.0)
    assert not prof.converged(p, 0.02) and prof.converged(p, p.max_error_molar())


def test_landmarks_read_contact_peak_and_midplane_bins():
    z = np.linspace(-0.975, 0.975, 40)  # h = 2 nm, 0.05 nm bins
    molar = np.array([np.where(np.abs(np.abs(z) - 0.725) < 0.01, 2.0, 1.0), np.full(40, 0.5)])
    molar[0, 19] = molar[0, 20] = 0.8  # the two bins at the mid-plane
    p = prof.Profiles(z, molar, np.full((2, 40), 0.01), 10, 0.05)
    out = prof.landmarks(p, ("cation", "anion"), (0.275, 0.3))
    cation = out["cation"]
    assert cation["contact_molar"] == 2.0 and cation["peak_molar"] == 2.0 and cation["midplane_molar"] == 0.8
    assert abs(cation["peak_z_nm"]) == pytest.approx(0.725) and cation["midplane_err"] == pytest.approx(0.01 / math.sqrt(2))
    assert out["anion"]["contact_molar"] == 0.5
    assert "contact_molar" not in prof.landmarks(p, ("cation", "anion"), None)["cation"]


def test_md_summary_and_surrogate_read_the_same_contact_density():
    """One definition (md.profile_grid.contact_density): the MD summary's contact value of a profile and
    the surrogate's feature of the same profile resampled onto its grid agree. Mutations caught: either
    side reading the bins at h/2 - d/2 (1.42 M here), or one wall only (2.0 or 1.6 M), instead of the
    walls' averaged maxima within d (1.8 M)."""
    from thrifty.md.profile_grid import features, to_grid
    h, d = 3.0, 0.5
    z = -h / 2 + 0.025 + 0.05 * np.arange(60)  # MD bins of 0.05 nm, z from the mid-plane
    gap = h / 2 - np.abs(z)  # distance from the nearer wall
    height = np.where(z < 0, 2.0, 1.6)  # contact peaks 0.4 nm from each wall, d/2 = 0.25 nm
    molar = np.where(gap >= d / 2, 0.5 + (height - 0.5) * np.exp(-((gap - 0.4) / 0.15) ** 2 / 2), 0.0)
    p = prof.Profiles(z, np.array([molar, molar]), np.full((2, 60), 0.01), 10, 0.05)
    md = prof.landmarks(p, ("cation", "anion"), (d / 2, d / 2))["cation"]["contact_molar"]
    surrogate = features(to_grid(z, molar, h), h, d)["contact"]
    assert md == pytest.approx(1.8, rel=0.01) and surrogate == pytest.approx(md, rel=0.02)


def test_a_relative_tolerance_holds_each_bin_to_its_density_above_an_absolute_floor():
    """Mutations caught: the relative bar ignored (the dilute bin's 0.1 M error passes at 0.15 M
    absolute), the floor ignored (an empty bin's tiny error fails), the bar taken from the largest
    density instead of each bin's."""
    p = prof.Profiles(np.array([-0.5, 0.5]), np.array([[0.05, 2.0]]), np.array([[0.1, 0.15]]), prof.MIN_BLOCKS, 1.0)
    assert prof.converged(p, 0.15)  # absolute only: 0.1 and 0.15 <= 0.15
    assert not prof.converged(p, 0.02, relative=0.1)  # 0.1 > max(0.005, 0.02) in the dilute bin
    assert prof.converged(p, 0.1, relative=0.1)  # 0.1 <= floor 0.1; 0.15 <= 0.1 x 2.0 = 0.2
    assert not prof.converged(p, 0.1, relative=0.05)  # 0.15 > max(0.1, 0.1)
    assert not prof.converged(prof.Profiles(p.z_nm, p.molar, p.error_molar, prof.MIN_BLOCKS - 1, 1.0), 1.0, relative=1.0)


def test_a_run_stops_on_the_relative_bar_above_the_floor_by_default():
    """SamplingSettings' default stop: each bar within max(10% of its bin's density, 0.002 M).
    Mutations caught: stop_reason calling converged without the relative tolerance (the dense bin's
    0.15 M bar fails at 0.002 M); the old absolute 0.02 M default (the dilute bin's 0.005 M bar, 125%
    of its 0.004 M density, passes)."""
    from thrifty.md.sampling_settings import SamplingSettings
    settings = SamplingSettings()
    dense_ok = prof.Profiles(np.array([-0.5, 0.5]), np.array([[0.004, 2.0]]), np.array([[0.001, 0.15]]),
                             prof.MIN_BLOCKS, 1.0)
    assert settings.stop_reason(100, dense_ok) == "converged"
    dilute_unresolved = prof.Profiles(dense_ok.z_nm, dense_ok.molar, np.array([[0.005, 0.15]]), prof.MIN_BLOCKS, 1.0)
    assert settings.stop_reason(100, dilute_unresolved) is None
    assert SamplingSettings(relative_tolerance=0.0, tolerance_molar=0.2).stop_reason(100, dense_ok) == "converged"


def test_symmetric_profiles_average_mirrored_blocks_and_their_error_accounts_for_both_halves():
    """Each block's histogram averaged with its mirror image, then the usual mean and block error.
    Mutations caught: no mirroring (the mean stays lopsided), errors combined as if independent
    after the fact (here the halves are anti-correlated: every ion is in one half, so the symmetric
    profile has no scatter at all)."""
    edges = np.linspace(-1.0, 1.0, 5)
    blocks = np.zeros((4, 1, 4))
    blocks[[0, 2], 0, 0] = 2.0  # two blocks with both ions in the left bin, two in the right
    blocks[[1, 3], 0, 3] = 2.0
    plain = prof.profiles(blocks, 4, 1, edges, 1.0)
    mirrored = prof.profiles(blocks, 4, 1, edges, 1.0, symmetric=True)
    assert np.allclose(plain.molar, mirrored.molar)  # already symmetric on average
    assert plain.error_molar[0, 0] > 0 and np.allclose(mirrored.error_molar, 0.0)
    lopsided = prof.profiles(blocks[[0, 2]], 2, 1, edges, 1.0, symmetric=True)
    assert np.allclose(lopsided.molar[0], lopsided.molar[0, ::-1]) and lopsided.molar[0, 0] > 0


def test_in_a_slit_narrower_than_two_diameters_the_contact_density_is_at_closest_approach():
    """h = 0.7 nm < 2 d = 1.254 nm: all anions in the middle bin at 6.4 M (the issue's run). The
    contact density is the density where an ion centre touches the wall, h/2 - d/2 = 0.037 nm
    from the mid-plane: the middle bin. Mutations caught: the within-one-diameter rule kept (it
    excluded the middle bin and read 0.046 M), one wall only, the mid-plane bin's error counted twice."""
    d = 0.627
    z = np.array([-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3])  # 7 bins of 0.1 nm
    molar = np.array([[0.0, 0.0, 0.046, 6.4, 0.046, 0.0, 0.0]] * 2)
    p = prof.Profiles(z, molar, np.full((2, 7), 0.2), 10, 0.1)
    out = prof.landmarks(p, ("cation", "anion"), (d / 2, d / 2))["anion"]
    assert out["contact_molar"] == pytest.approx(6.4) and out["contact_err"] == pytest.approx(0.2)
    from thrifty.md.profile_grid import contact_bins
    left, right = contact_bins(np.array([-0.15, -0.05, 0.05, 0.15]), 0.8, 0.5)  # closest approach at +-0.15
    assert left.tolist() == [0] and right.tolist() == [3]
