"""The surrogate ensemble on the analytic stand-in profiles (tests/md/standin_profiles.py, a fixture,
not physics): held-out accuracy, determinism, saving, the uncertainty, reading run folders."""

import numpy as np
import pytest
import torch

from standin_profiles import standin_runs, write_run
from thrifty.errors import ThriftyError
from thrifty.md.active import stopping_test
from thrifty.md.params import ParameterBox
from thrifty.md.runs import grid_arrays, read_runs
from thrifty.md.surrogate import MODEL_FILE, Ensemble, SurrogateConfig, train_ensemble
from thrifty.md.surrogate_metrics import accuracy

SMALL = SurrogateConfig(hidden=(64, 64), max_epochs=300, patience=60)  # the published 512-256 is the default
BOX = ParameterBox()


@pytest.fixture(scope="module")
def trained():
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    train, test = standin_runs(BOX.sample(60, rng), 1), standin_runs(BOX.sample(40, rng), 2)
    return train_ensemble(train, SMALL), train, test


def test_the_ensemble_fits_held_out_standin_runs(trained):
    """60 runs, 40 held out: 68% of the bins within the 95% error bar (0.73 measured) and the mid-plane density
    within 0.1 M (a perfect predictor scores 0.985 and 0.01-0.04 M on these runs)."""
    model, _, test = trained
    points, density, error = grid_arrays(test, SMALL.bins)
    score = accuracy(points, model.predict(points).mean, density, error)
    assert score.within_error >= 0.68, score
    assert score.rmse_molar["cation_mid"] <= 0.1 and score.rmse_molar["anion_mid"] <= 0.1, score
    assert score.rmse_molar["cation_peak"] <= 1.0, score  # peaks reach 8 M at z+ = 3, c = 0.9 M


def test_the_spread_is_larger_far_from_the_training_runs(trained):
    model, train, _ = trained
    near = model.spread(np.stack([r.point for r in train[:20]]))
    far = np.stack([r.point for r in train[:20]]) * np.array([1.6, 1, 1, 2.5, 0.4, 0.4])  # far outside the box
    assert np.median(model.spread(far)) > 2 * np.median(near)


def test_the_stopping_test_scores_unseen_runs_against_the_target(trained):
    model, _, test = trained
    done = stopping_test(model, test[:10], target_within_error=0.5)
    assert done.met and done.runs == 10 and done.accuracy.within_error >= 0.5
    assert not stopping_test(model, test[:10], target_within_error=1.0).met
    with pytest.raises(ThriftyError, match="at least one run"):
        stopping_test(model, [])


def test_training_is_deterministic_for_a_seed_and_saving_keeps_every_number(tmp_path):
    torch.set_num_threads(1)
    runs = standin_runs(BOX.sample(8, np.random.default_rng(3)), 4)
    tiny = SurrogateConfig(hidden=(16,), max_epochs=15, patience=5, members=3)
    a, b = train_ensemble(runs, tiny), train_ensemble(runs, tiny)
    points = np.stack([r.point for r in runs])
    assert np.array_equal(a.predict(points).members, b.predict(points).members)
    other = train_ensemble(runs, SurrogateConfig(**{**tiny.__dict__, "seed": 1}))
    assert not np.array_equal(a.predict(points).members, other.predict(points).members)
    a.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MODEL_FILE]  # no temporary left behind
    loaded = Ensemble.load(tmp_path)
    assert np.array_equal(loaded.predict(points).members, a.predict(points).members)
    assert loaded.config == tiny and loaded.epochs == a.epochs


def test_too_few_runs_and_a_broken_model_file_are_one_line_errors(tmp_path):
    with pytest.raises(ThriftyError, match="at least 5 completed runs, got 4"):
        train_ensemble(standin_runs(BOX.sample(4, np.random.default_rng(0)), 0))
    (tmp_path / MODEL_FILE).write_bytes(b"not a model")
    with pytest.raises(ThriftyError, match="is not a thrifty surrogate"):
        Ensemble.load(tmp_path)


def test_run_folders_read_back_as_written(tmp_path):
    runs = standin_runs(BOX.sample(3, np.random.default_rng(5)), 6)
    for run in runs:
        write_run(tmp_path / run.name, run)
    (tmp_path / "still-running").mkdir()  # no profiles.csv yet: not a completed run
    back = read_runs(tmp_path)
    assert [r.name for r in back] == [r.name for r in runs]
    for mine, theirs in zip(back, runs):
        assert np.allclose(mine.point, theirs.point) and np.allclose(mine.density, theirs.density, atol=1e-6)
    (tmp_path / runs[0].name / "profiles.csv").write_text("z_nm,cation_molar\n0,1\n")
    with pytest.raises(ThriftyError, match="missing columns cation_err, anion_molar, anion_err"):
        read_runs(tmp_path)


def test_an_input_held_constant_in_training_is_centred_not_blown_up():
    """d- = 0.415 in every run has a standard deviation of ~1e-17 after rounding, not 0: dividing by
    it sent a prediction at d- = 0.44 to 1e12 molar."""
    torch.set_num_threads(1)
    points = BOX.sample(24, np.random.default_rng(7))
    points[:, 5] = 0.415
    model = train_ensemble(standin_runs(points, 8), SurrogateConfig(hidden=(16,), max_epochs=20, patience=5))
    assert model.norm["x_std"][5] == 1.0
    query = points[:1].copy()
    query[0, 5] = 0.44
    assert model.predict(query).mean.max() < 100


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
    (tmp_path / "params.json").write_text(json.dumps(dict(zip(PARAMETERS, [3.0, 2, -1, 0.5, 0.474, 0.627]))))
    run = read_run(tmp_path)
    density, error = run.on_grid(50)
    s = np.linspace(-0.49, 0.49, 50)
    assert density == pytest.approx(np.stack([1 + (3 * s) ** 2, 2 + (3 * s) ** 2]), abs=2e-3)
    assert error == pytest.approx(0.1 * density, abs=1e-3)
