# SPDX-License-Identifier: MIT
"""The no-ML baselines of the surrogate's reports: the flat profile, the nearest run and the
Gaussian process (numpy/scipy, Rasmussen & Williams 2006), against cases with known answers."""

import numpy as np
import pytest

from thrifty.md.runs import Run
from thrifty.md.surrogate.baselines import Flat, GaussianProcessBaseline, NearestRun
from thrifty.md.surrogate.gp import GaussianProcess
from thrifty.md.surrogate.shapes import count_integrals, integrals, reachable_fraction


def test_the_flat_profile_holds_each_ions_count_over_the_width_it_reaches():
    """h 3 nm, d- 0.627: the anion's centre reaches |z| <= 1.1865 nm; its density there is
    I- / (h - d-), zero beyond. Mutations caught: c instead of the count, the whole slit instead of
    h - d, the cation's diameter for the anion."""
    point = np.array([[3.0, 2, -1, 0.5, 0.474, 0.627]])
    flat = Flat(4.0, 50).predict(point)
    counts = count_integrals(point, 4.0)
    assert integrals(point, flat) == pytest.approx(counts)
    z = ((np.arange(50) + 0.5) / 50 - 0.5) * 3.0
    inner = np.abs(z) < (3.0 - 0.627) / 2 - 0.06
    assert flat[0, 1, inner] == pytest.approx(counts[0, 1] / (3.0 - 0.627))
    assert (flat[0, 1, np.abs(z) > (3.0 - 0.627) / 2 + 0.06] == 0).all()
    assert reachable_fraction(point, 50)[0, 0].sum() * 3.0 / 50 == pytest.approx(3.0 - 0.474)


def _runs(points: np.ndarray) -> list[Run]:
    z = (np.arange(50) + 0.5) / 50 - 0.5
    out = []
    for i, p in enumerate(points):
        density = np.stack([p[3] * (1.5 + 0.5 * np.cos(2 * np.pi * z) * p[0] / 4), p[3] * (1 + z ** 2 * p[1])])
        out.append(Run(p, z * p[0], density, np.full_like(density, 0.01), f"r{i}"))
    return out


def test_the_nearest_run_is_the_stored_profile_of_the_closest_point_in_scaled_parameters():
    """Scaled: h over its 2.5-4 nm training range, z+ per valency step, c over 0.3-0.9 M. The query
    (h 2.6, z+ 1, c 0.85) is 0.23 from run 0 in scaled units, 0.1 nm and 0.05 M from run 1 but a
    valency step away (1.0): mutation caught, distance in raw units (run 1 nearer)."""
    points = np.array([[2.5, 1, -1, 0.5, 0.474, 0.627], [2.7, 2, -1, 0.9, 0.474, 0.627],
                       [4.0, 3, -1, 0.3, 0.474, 0.627]])
    runs = _runs(points)
    got = NearestRun(runs, 50).predict(np.array([[2.6, 1, -1, 0.65, 0.474, 0.627]]))
    assert got[0] == pytest.approx(runs[0].on_grid(50)[0], abs=1e-9)


def test_the_gaussian_process_fits_a_smooth_function_and_its_variance_grows_away_from_data():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (40, 2))
    f = lambda a: np.column_stack([np.sin(3 * a[:, 0]) + a[:, 1] ** 2, np.cos(2 * a[:, 1])])
    gp = GaussianProcess(x, f(x) + 0.01 * rng.standard_normal((40, 2)))
    test = rng.uniform(0.1, 0.9, (50, 2))
    mean, var = gp.predict(test)
    assert np.abs(mean - f(test)).max() < 0.05
    _, far = gp.predict(np.array([[3.0, 3.0]]))
    assert far.min() > 10 * var.mean()
    # maximised marginal likelihood: no worse than the starting guesses (mutation: the optimiser's result unused)
    start = np.r_[np.log([1.0, 1.0]), 0.0, np.log(0.1)]
    assert gp._negative_log_likelihood(gp.log_params) <= gp._negative_log_likelihood(start)


def test_the_gaussian_process_baseline_predicts_symmetric_non_negative_profiles():
    points = np.column_stack([np.linspace(2.5, 4.0, 12), np.tile([1, 2, 3], 4), -np.ones(12),
                              np.linspace(0.3, 0.9, 12)[::-1], np.full(12, 0.474), np.full(12, 0.627)])
    baseline = GaussianProcessBaseline(_runs(points), 50)
    got = baseline.predict(points[:3] + np.array([0.05, 0, 0, 0.01, 0, 0]))
    assert (got >= 0).all() and np.allclose(got, got[..., ::-1])
    truth = np.stack([r.on_grid(50)[0] for r in _runs(points[:3])])
    assert np.abs(got - 0.5 * (truth + truth[..., ::-1])).max() < 0.1
