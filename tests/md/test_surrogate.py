# SPDX-License-Identifier: MIT
"""The surrogate ensemble: physics by construction, soft labels, determinism, saving, the joint
range check, reading run folders. Accuracy on real MD: test_surrogate_heldout.py."""

import logging
import warnings

import numpy as np
import pytest
import torch
from standin_profiles import standin_runs, write_run

from thrifty.errors import ThriftyError
from thrifty.md.params import ParameterBox
from thrifty.md.runs import Run, read_runs
from thrifty.md.surrogate import MODEL_FILE, Ensemble, SurrogateConfig, train_ensemble
from thrifty.md.surrogate.domain import Domain
from thrifty.md.surrogate.ensemble import shape_basis
from thrifty.md.surrogate.shapes import (
    count_integrals,
    flat_profiles,
    integrals,
    net_charge,
    wall_boltzmann,
)

BOX = ParameterBox((2.5, 1, -1, 0.3, 0.474, 0.627), (4.0, 3, -1, 0.9, 0.474, 0.627))
TINY = SurrogateConfig(hidden=(16,), max_epochs=40, patience=10, members=3)


@pytest.fixture(scope="module")
def standin_model():
    torch.set_num_threads(1)
    runs = standin_runs(BOX.sample(12, np.random.default_rng(3)), 4)
    return train_ensemble(runs, TINY), runs


def test_counts_charge_and_symmetry_hold_by_construction_whatever_the_weights(standin_model):
    """Every member, with its last layer's weights scrambled: each ion's integral is the model's count,
    z+ I+ = |z-| I- to float precision, and the profile is even about the mid-plane. Mutations caught:
    the shape not scaled by the count, the anion scaled by c instead of its count, no mirroring."""
    model, _ = standin_model
    with torch.no_grad():
        for net in model.networks:
            net[-1].weight.normal_(0, 3.0)
            net[-1].bias.normal_(0, 3.0)
    points = BOX.sample(40, np.random.default_rng(9))
    members = model.predict(points).members
    for member in members:
        assert integrals(points, member) == pytest.approx(count_integrals(points, None), rel=1e-5)
        assert np.abs(net_charge(points, member)).max() < 1e-5
        assert np.allclose(member, member[..., ::-1])
    assert np.abs(members - members[:1]).max() > 0.01  # the members do differ (the check is not vacuous)


def test_an_untrained_member_predicts_ions_that_feel_only_the_walls():
    """The last layer starts at zero, so before training the shape is the prior: the walls' Boltzmann
    factor (the ideal gas between the model's walls), scaled to the counts; nearly the flat profile.
    Mutation caught: no prior (a uniform shape over the slit, ions inside the walls)."""
    runs = standin_runs(BOX.sample(6, np.random.default_rng(1)), 2)
    model = train_ensemble(runs, SurrogateConfig(hidden=(8,), max_epochs=1, patience=1, members=2, learning_rate=0.0))
    points = BOX.sample(10, np.random.default_rng(4))
    ideal = wall_boltzmann(points, 50)
    ideal *= (count_integrals(points, None) / integrals(points, ideal))[..., None]
    predicted = model.predict(points).mean
    assert np.abs(predicted - ideal).max() < 1e-3 * ideal.max()
    flat = flat_profiles(points, None, 50)
    assert np.abs(predicted - flat)[..., 5:-5].max() < 0.1 * flat.max()  # away from the walls' soft edge
    assert (predicted[..., [0, -1]] < 1e-3 * flat.max()).all()  # no ion centre in the wall


def _copies(point: np.ndarray, shape: np.ndarray, error: float, n: int, name: str) -> list[Run]:
    z = (np.arange(50) + 0.5) / 50 * point[0] - point[0] / 2
    density = shape / (shape.sum(axis=1, keepdims=True) * (z[1] - z[0])) * count_integrals(point, None)[0][:, None]
    return [Run(point, z, density, np.full_like(density, error), f"{name}{i}") for i in range(n)]


def test_soft_labels_weigh_each_bin_by_its_md_error_bar():
    """Runs at one point: three measured well (bars 0.01 M) with the flat profile, three badly (bars
    0.5 M) with ions piled near the walls. Weighted by 1/bar^2 the fit is the well-measured profile; an
    unweighted fit (the mutation) lands halfway."""
    torch.set_num_threads(1)
    point = np.array([3.0, 1, -1, 0.6, 0.474, 0.627])
    z = np.abs((np.arange(50) + 0.5) / 50 - 0.5)
    good = flat_profiles(point, None, 50)[0]
    bad = good * (1 + 2 * (z > 0.3))
    runs = _copies(point, good, 0.01, 3, "good") + _copies(point, bad, 0.5, 3, "bad")
    model = train_ensemble(runs, SurrogateConfig(hidden=(16,), max_epochs=600, patience=600, members=2))
    predicted = model.predict(point).mean[0]
    target_good, target_bad = runs[0].on_grid(50)[0], runs[-1].on_grid(50)[0]
    assert np.abs(predicted - target_good).mean() < 0.2 * np.abs(target_bad - target_good).mean()


def test_training_is_deterministic_for_a_seed_and_saving_keeps_every_number(tmp_path, standin_model, caplog):
    """Also: training logs each member's best epoch and validation chi^2 (info), as the ensemble
    keeps them. Mutation caught: the log line dropped, or listing other epochs than the members'."""
    _, runs = standin_model
    caplog.set_level(logging.DEBUG, logger="thrifty.md.surrogate.ensemble")
    a, b = train_ensemble(runs, TINY), train_ensemble(runs, TINY)
    said = [r for r in caplog.records if r.name == "thrifty.md.surrogate.ensemble"]
    trained = [r.getMessage() for r in said if r.levelno == logging.INFO]
    assert len(trained) == 2 and trained[0] == trained[1]
    assert trained[0].startswith(f"trained 3 members on {len(runs)} runs: best epochs "
                                 f"{', '.join(map(str, a.epochs))}, validation chi^2/bin ")
    assert sum(r.levelno == logging.DEBUG for r in said) == 6  # one per member
    points = np.stack([r.point for r in runs])
    assert np.array_equal(a.predict(points).members, b.predict(points).members)
    other = train_ensemble(runs, SurrogateConfig(**{**TINY.__dict__, "seed": 1}))
    assert not np.array_equal(a.predict(points).members, other.predict(points).members)
    a.band_scale = 1.23
    a.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MODEL_FILE]  # no temporary left behind
    loaded = Ensemble.load(tmp_path)
    assert np.array_equal(loaded.predict(points).members, a.predict(points).members)
    assert np.array_equal(loaded.predict(points).band()[1], a.predict(points).band()[1])
    assert loaded.config == TINY and loaded.epochs == a.epochs and loaded.domain.limit == a.domain.limit


def test_too_few_runs_runs_off_the_models_counts_and_a_broken_model_file_are_one_line_errors(tmp_path, standin_model):
    _, runs = standin_model
    with pytest.raises(ThriftyError, match="at least 5 completed runs, got 4"):
        train_ensemble(runs[:4])
    doubled = [Run(r.point, r.z_nm, 2 * r.density, r.error, r.name) for r in runs]  # not the model's counts
    with pytest.raises(ThriftyError, match="give the box side the runs used"):
        train_ensemble(doubled, TINY)
    (tmp_path / MODEL_FILE).write_bytes(b"not a model")
    with pytest.raises(ThriftyError, match="is not a thrifty surrogate"):
        Ensemble.load(tmp_path)


def test_a_surrogate_of_an_older_format_is_refused_in_one_line_naming_the_retraining(tmp_path, standin_model):
    """A model saved with the slit-fraction cosine basis (format /2) would load weights into a network
    of another meaning: refused, not mispredicted. Mutation caught: the format check dropped (the
    load fails later on the missing config key, as 'not a thrifty surrogate')."""
    model, _ = standin_model
    model.save(tmp_path)
    payload = torch.load(tmp_path / MODEL_FILE, weights_only=True)
    payload["format"] = "thrifty.md.surrogate/2"
    del payload["config"]["wall_bumps_nm"]
    torch.save(payload, tmp_path / MODEL_FILE)
    with pytest.raises(ThriftyError, match=r"format 'thrifty.md.surrogate/2'.*train it again") as error:
        Ensemble.load(tmp_path)
    assert "\n" not in str(error.value)


def test_the_shape_basis_sits_at_fixed_distances_from_the_wall_whatever_the_slit_width():
    """One weight means one thing at every h: a bump centred 0.55 nm from the wall peaks at the bin
    nearest 0.55 nm from the wall in a 2.5 nm and in a 4 nm slit, and has the Gaussian's value at
    each bin's wall distance. Mutation caught: the bumps placed in the slit fraction u (the old
    cosine basis' variable): the peaks move with h."""
    config = SurrogateConfig(wall_bumps_nm=(0.55,), bump_width_nm=0.15, slit_modes=1)
    points = np.array([[2.5, 1, -1, 0.5, 0.474, 0.627], [4.0, 1, -1, 0.5, 0.474, 0.627]])
    basis = shape_basis(points, config)
    half = config.bins // 2
    assert basis.shape == (2, 2, half)
    u = (np.arange(half) + 0.5) / half
    for row, h in zip(basis, points[:, 0], strict=True):
        wall_distance = h / 2 * (1 - u)
        assert np.allclose(row[0], np.exp(-0.5 * ((wall_distance - 0.55) / 0.15) ** 2))
        assert abs(wall_distance[np.argmax(row[0])] - 0.55) <= h / config.bins / 2 + 1e-12
        assert np.allclose(row[1], np.cos(np.pi * u))  # the slit's own mode
    with pytest.raises(ThriftyError, match="basis"):
        SurrogateConfig(wall_bumps_nm=(), slit_modes=0)


def test_the_range_check_is_joint_a_valency_seen_only_at_other_h_is_flagged():
    """Training: z+ = 3 only at h < 3 nm, z+ = 1 and 2 over all h. A query at z+ = 3, h = 3.9 is inside
    every parameter's range but far from every training point (mutation caught: a per-parameter
    check, which passes it); a query amid the training points is inside."""
    rng = np.random.default_rng(0)
    points = BOX.sample(60, rng)
    points = points[(points[:, 1] < 3) | (points[:, 0] < 3.0)]
    domain = Domain.of(points)
    far = np.array([[3.9, 3, -1, 0.6, 0.474, 0.627]])
    assert (points[:, 0].min() <= 3.9 <= points[:, 0].max()) and points[:, 1].max() == 3  # per parameter: in range
    assert not domain.inside(far)[0] and domain.distance(far)[0] > domain.limit
    near = points[:1] + np.array([[0.01, 0, 0, 0.005, 0, 0]])
    assert domain.inside(near)[0]


def test_the_centre_of_a_two_level_grid_is_inside_but_beyond_its_hull_is_not():
    """A 2-level grid in h, c and d+ (z+ = 1, 2): its centre is 0.87 from every corner (scaled),
    beyond the distance limit (0.75), but inside the corners' hull: the surrogate interpolates there
    (mutation caught: the distance alone, which refused it). Outside the grid's box in h, or at a
    valency the grid never ran, it is still refused."""
    grid = np.array([[h, zp, -1, c, dp, 0.627] for h in (2.0, 3.0) for zp in (1, 2) for c in (0.6, 0.9)
                     for dp in (0.4, 0.5)])
    domain = Domain.of(grid)
    centre = np.array([[2.4, 2, -1, 0.75, 0.45, 0.627]])
    assert domain.distance(centre)[0] > domain.limit
    assert domain.inside(centre)[0] and domain.check(centre) > domain.limit
    for outside in ([3.6, 2, -1, 0.75, 0.45, 0.627], [2.4, 3, -1, 0.75, 0.45, 0.627]):
        assert not domain.inside(np.array([outside]))[0]
        with pytest.raises(ThriftyError, match="outside the runs with its valencies"):
            domain.check(np.array([outside]))


def test_a_point_far_beyond_every_range_is_refused_without_a_warning():
    """h = 1e300 nm (check_point takes any positive finite number): refused in one line, with no
    numpy overflow warning printed beside it on a server (mutation caught: the distance's square
    computed without np.errstate)."""
    grid = np.array([[h, 1, -1, c, dp, 0.627] for h in (2.0, 3.0) for c in (0.6, 0.9) for dp in (0.4, 0.5)])
    domain = Domain.of(grid)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ThriftyError, match="the point is inf from the nearest training run"):
            domain.check(np.array([[1e300, 1, -1, 0.75, 0.45, 0.627]]))
        # c = 1e308 over a span below 1 overflows in the scaling itself, and linprog refused the
        # infinite point with a ValueError (a 500 from serve): refused in one line as well
        with pytest.raises(ThriftyError, match="the point is inf from the nearest training run"):
            domain.check(np.array([[2.5, 1, -1, 1e308, 0.45, 0.627]]))


def test_a_parameter_every_run_held_fixed_cannot_move():
    # mutation caught: a constant column scaled by a unit span (d+ 0.3 or 0.6 accepted when every
    # run had 0.474: 0.17 away, inside the limit; only 1.0 was refused)
    grid = np.array([[h, 1, -1, c, 0.474, 0.627] for h in (2.0, 3.0) for c in (0.6, 0.9)])
    domain = Domain.of(grid)
    assert domain.inside(np.array([[2.5, 1, -1, 0.75, 0.474, 0.627]]))[0]
    for moved in (0.3, 0.6):
        query = np.array([[2.5, 1, -1, 0.75, moved, 0.627]])
        assert not domain.inside(query)[0]
        with pytest.raises(ThriftyError, match=f"d_plus_nm was 0.474 in every training run, got {moved:g}"):
            domain.check(query)


def test_run_folders_read_back_as_written(tmp_path):
    runs = standin_runs(BOX.sample(3, np.random.default_rng(5)), 6)
    for run in runs:
        write_run(tmp_path / run.name, run)
    (tmp_path / "still-running").mkdir()  # no profiles.csv yet: not a completed run
    back = read_runs(tmp_path)
    assert [r.name for r in back] == [r.name for r in runs]
    for mine, theirs in zip(back, runs, strict=True):
        assert np.allclose(mine.point, theirs.point) and np.allclose(mine.density, theirs.density, atol=1e-6)
    (tmp_path / runs[0].name / "profiles.csv").write_text("z_nm,cation_molar\n0,1\n")
    with pytest.raises(ThriftyError, match="missing columns cation_err, anion_molar, anion_err"):
        read_runs(tmp_path)
    # a new user's pass: a density of -5 M was trained on (only the error bars were checked)
    (tmp_path / runs[0].name / "profiles.csv").write_text(
        "z_nm,cation_molar,cation_err,anion_molar,anion_err\n0,1,0.1,-5,0.1\n0.1,1,0.1,1,0.1\n")
    with pytest.raises(ThriftyError, match="densities and error bars >= 0"):
        read_runs(tmp_path)
    # a run of fewer than 2 blocks has NaN error bars: said so, as md.md promises (a new user's pass: the
    # generic "need 2+ rows of finite numbers"); mutation caught: the NaN check left out
    (tmp_path / runs[0].name / "profiles.csv").write_text(
        "z_nm,cation_molar,cation_err,anion_molar,anion_err\n0,1,nan,1,nan\n0.1,1,nan,1,nan\n")
    with pytest.raises(ThriftyError, match="have NaN error bars: the run has fewer than 2 complete blocks"):
        read_runs(tmp_path)


def test_the_box_a_run_was_run_in_is_read_from_its_summary_and_a_contradiction_refused(tmp_path):
    # mutations caught: summary.json's box ignored (4 nm runs trained as if in the default 15 nm box,
    # every predicted profile 7% off); a --box-nm that the runs contradict taken; runs of two boxes
    # trained as one
    import json

    from thrifty.md.runs import runs_box_nm
    runs = standin_runs(BOX.sample(3, np.random.default_rng(5)), 6)

    def written(boxes):
        for run, box in zip(runs, boxes, strict=True):
            folder = write_run(tmp_path / "runs" / run.name, run)
            (folder / "summary.json").write_text(json.dumps({"parameters": {"box_nm": box}}))
        return read_runs(tmp_path / "runs")
    assert [r.box_nm for r in written([4.0, 4.0, 4.0])] == [4.0, 4.0, 4.0]
    assert runs_box_nm(read_runs(tmp_path / "runs"), None) == 4.0
    assert runs_box_nm(read_runs(tmp_path / "runs"), 4.0) == 4.0
    with pytest.raises(ThriftyError, match="--box-nm 15 but the runs' summary.json record a box of 4 nm"):
        runs_box_nm(read_runs(tmp_path / "runs"), 15.0)
    # no --box-nm can serve two recorded sides: not advised (a new user's pass: advised, then refused)
    with pytest.raises(ThriftyError, match=r"boxes of 4, 6 nm: train one surrogate per box side \(a --runs folder each\)$"):
        runs_box_nm(written([4.0, 6.0, 4.0]), None)
    defaults = [15.0 if p[3] <= 0.5 else 10.0 for p in (r.point for r in runs)]
    assert runs_box_nm(written(defaults), None) is None  # each at its c's default: the model's rule
    for run in runs:
        (tmp_path / "runs" / run.name / "summary.json").unlink()
    assert runs_box_nm(read_runs(tmp_path / "runs"), None) is None and runs_box_nm(read_runs(tmp_path / "runs"), 4.0) == 4.0


def test_an_input_held_constant_in_training_is_centred_not_blown_up():
    """d- = 0.627 in every run has a standard deviation of ~1e-17 after rounding, not 0: dividing by
    it sent a prediction at d- = 0.6 to 1e12 molar."""
    torch.set_num_threads(1)
    points = BOX.sample(12, np.random.default_rng(7))
    model = train_ensemble(standin_runs(points, 8), TINY)
    assert model.x_std[5] == 1.0
    query = points[:1].copy()
    query[0, 5] = 0.6
    assert np.isfinite(model.predict(query).mean).all() and model.predict(query).mean.max() < 100


def test_a_profiles_csv_written_by_the_md_job_reads_as_a_run(tmp_path):
    """The MD job's own writer (md.profiles: bins from the mid-plane, standard errors) and a params.json."""
    import json

    from thrifty.md import profiles as md_profiles
    from thrifty.md.params import PARAMETERS
    from thrifty.md.runs import read_run
    edges = md_profiles.edges_nm((1.5, 4.5), walls=True)  # a 3 nm slit, 60 bins of 0.05 nm
    centres = 0.5 * (edges[:-1] + edges[1:]) - 3.0
    molar = np.stack([1 + centres ** 2, 2 + centres ** 2])
    md_profiles.write_csv(tmp_path / "profiles.csv", md_profiles.Profiles(centres, molar, 0.1 * molar, 10, 0.05),
                          ("cation", "anion"))
    (tmp_path / "params.json").write_text(json.dumps(dict(zip(PARAMETERS, [3.0, 2, -1, 0.5, 0.474, 0.627], strict=True))))
    run = read_run(tmp_path)
    density, error = run.on_grid(50)
    s = np.linspace(-0.49, 0.49, 50)
    assert density == pytest.approx(np.stack([1 + (3 * s) ** 2, 2 + (3 * s) ** 2]), abs=2e-3)
    assert error == pytest.approx(0.1 * density, abs=1e-3)


def test_a_run_whose_params_json_lacks_a_parameter_is_named_in_the_error(tmp_path):
    """A new user's pass: "missing parameters: z_plus, ..." without the file. Mutation caught: the
    point's error not prefixed with its file."""
    import json

    from thrifty.errors import ThriftyError
    from thrifty.md.runs import read_run
    (tmp_path / "params.json").write_text(json.dumps({"h_nm": 3.0}))
    with pytest.raises(ThriftyError, match=f"run parameters {tmp_path / 'params.json'}: missing parameters: z_plus"):
        read_run(tmp_path)
