# SPDX-License-Identifier: MIT
"""`--sampler active`: the initial design, the uncertainty pick, the held-out stop and a restarted
driver, first driving the sampler by hand (a fake surrogate whose uncertainty and accuracy are
known), then on Ray (127.0.0.1 only) with the real ensemble, shrunk. The simulation is the analytic
stand-in profiles of standin_profiles.py written as campaign run folders: no MD."""

import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from standin_profiles import BIN_NM, standin_run, true_profiles, write_run

from thrifty.cli.app import main
from thrifty.errors import ThriftyError
from thrifty.md.campaign.checkpoint_schedule import CheckpointPlan
from thrifty.md.campaign.point_samplers import RandomSampler, point_key
from thrifty.md.campaign.runner import CampaignConfig, run_campaign
from thrifty.md.campaign.store import CampaignStore
from thrifty.md.params import PARAMETERS
from thrifty.md.profile_grid import to_grid
from thrifty.md.space import parse_space
from thrifty.md.surrogate.active_sweep import ActiveSampler, check_active, ensemble_trainer
from thrifty.transient.registry import load_model

pytestmark = pytest.mark.timeout(180)  # each test, the Ray start-up included (30 s quiet; a hang guard, generous for loaded machines)
SPACE = parse_space("[h_nm]\nmin = 3.0\nmax = 4.0\n[c_molar]\nmin = 0.3\nmax = 0.9\n[z_plus]\nvalues = [1, 2]\n")
SRC = str(Path(__file__).resolve().parents[2] / "src")
FIXED = {"z_plus": 1.0, "z_minus": -1.0, "d_plus_nm": 0.5, "d_minus_nm": 0.5}


def _point(params: dict) -> np.ndarray:
    return np.array([float({**FIXED, **params}[name]) for name in PARAMETERS])


class Toy:
    """The campaign's simulation: stand-in profiles (seeded by the point) written as a run folder;
    with `only`, any other point fails (a driver whose runs never complete)."""

    def __init__(self, only: set[str] | None = None) -> None:
        self.only = only

    def __call__(self, params: dict, work_dir: Path, checkpoints) -> dict:
        if self.only is not None and point_key(params) not in self.only:
            raise RuntimeError("this driver dies before the run completes")
        rng = np.random.default_rng(int(point_key(params), 16))
        write_run(work_dir, standin_run(_point(params), rng, work_dir.name))
        return {"steps": 1, "converged": True}


class Fake:
    """A surrogate with a known uncertainty (largest at the corner `peak` of the unit box, h and c)
    and a known accuracy (the noise-free profiles, or zeros); it records what it trained on."""

    def __init__(self, runs: list, peak: tuple[float, float], exact: bool) -> None:
        self.trained_on, self.peak, self.exact = {run.name for run in runs}, np.array(peak), exact
        self.config = SimpleNamespace(bins=50, box_nm=None)
        self.predicted: list[np.ndarray] = []

    def disagreement(self, points: np.ndarray) -> np.ndarray:
        unit = np.column_stack([(points[:, 0] - 3.0) / 1.0, (points[:, 3] - 0.3) / 0.6])
        return np.exp(-3 * np.linalg.norm(unit - self.peak, axis=1))

    def predict(self, points: np.ndarray) -> SimpleNamespace:
        self.predicted.append(points)
        grids = []
        for p in points:
            n = int(round(p[0] / BIN_NM))
            z = -p[0] / 2 + (np.arange(n) + 0.5) * p[0] / n
            grids.append(to_grid(z, true_profiles(p, z), p[0], 50) * self.exact)
        return SimpleNamespace(mean=np.stack(grids))


def _drive(sampler: ActiveSampler, store: CampaignStore, work: Path, k: int, budget: int) -> None:
    """The campaign loop without Ray: run every point asked for, a batch at a time."""
    while len(store.completed()) < budget:
        points = sampler.next_points(store.completed(), min(k, budget - len(store.completed())))
        if not points:
            return
        for params in points:
            run_id = point_key(params)
            store.record_run(run_id, params, Toy()(params, work / run_id, None), 1, 0.0)


def _fakes(peak=(1.0, 1.0), exact=True):
    made: list[Fake] = []

    def train(runs):
        made.append(Fake(runs, peak, exact))
        return made[-1]
    return made, train


def test_the_pick_follows_the_surrogates_uncertainty(tmp_path):
    # mutations caught: the pick replaced by random candidates (or the least uncertain ones): the
    # fake's uncertainty peaks at the corner h = 4, c = 0.9, where a random batch of 4 lands with
    # probability ~3e-4; the initial design not the random sampler's first points
    made, train = _fakes(peak=(1.0, 1.0))
    with CampaignStore(tmp_path / "c.db") as store:
        store.begin({"test": "pick"})
        sampler = ActiveSampler(SPACE, store, tmp_path / "runs", initial_runs=6, seed=3, train=train)
        first = sampler.next_points([], 4)
        assert first == RandomSampler(SPACE, 3).next_points([], 6)
        _drive(sampler, store, tmp_path / "runs", 4, 6)
        batch = sampler.next_points(store.completed(), 4)
    unit = np.array([[(p["h_nm"] - 3.0) / 1.0, (p["c_molar"] - 0.3) / 0.6] for p in batch])
    assert len(batch) == 4 and np.linalg.norm(unit - 1.0, axis=1).max() < 0.4, unit
    assert {p["z_plus"] for p in batch} <= {1.0, 2.0}  # listed values only


def test_the_stop_scores_runs_the_surrogate_had_not_trained_on(tmp_path, caplog):
    # mutations caught: the stopping test scored after the batch joins the training set (the model
    # that scored it trained on it); no stop at the target (the campaign would run to its budget);
    # the outcome not saying why it stopped; the design, the pick and the stop not logged
    caplog.set_level(logging.INFO, logger="thrifty.md.surrogate.active_sweep")
    made, train = _fakes(exact=True)
    with CampaignStore(tmp_path / "c.db") as store:
        store.begin({"test": "stop"})
        sampler = ActiveSampler(SPACE, store, tmp_path / "runs", target_within_error=0.8, initial_runs=6, train=train,
                                min_stop_runs=3)
        _drive(sampler, store, tmp_path / "runs", 3, 30)
        batches, completed = store.batches(), store.completed()
        outcome = sampler.outcome(completed, 30)
    assert len(batches) == 2 and len(completed) == 9  # the design, one picked batch, then the stop
    assert outcome.stopped == "target" and outcome.test.runs == 3 and outcome.test.within_2_bars >= 0.8
    tested = {run_id for run_id, _ in batches[-1]}
    scorers = [m for m in made if m.predicted]
    assert scorers and all(not (m.trained_on & tested) for m in scorers)
    said = [r.getMessage() for r in caplog.records if r.name == "thrifty.md.surrogate.active_sweep"]
    assert said[0] == "initial design: 6 random points"
    assert said[1] == "batch 1: 3 points picked by the surrogate trained on 6 runs"
    assert said[2].startswith("stop test on 3 unseen runs: ") and said[2].endswith(": met")
    stops = [m for m in said if m.startswith("stop: ")]  # outcome() scores the batch again, without a stop
    assert stops == ["stop: the target is met (1.000 of bins within 2 bars on 3 unseen runs, target 0.800)"]


def test_an_inaccurate_surrogate_runs_to_the_budget_and_says_so(tmp_path):
    # mutation caught: "target" reported without the held-out test meeting it
    made, train = _fakes(exact=False)
    with CampaignStore(tmp_path / "c.db") as store:
        store.begin({"test": "budget"})
        sampler = ActiveSampler(SPACE, store, tmp_path / "runs", target_within_error=0.8, initial_runs=6, train=train,
                                min_stop_runs=3)
        _drive(sampler, store, tmp_path / "runs", 2, 10)
        outcome = sampler.outcome(store.completed(), 10)
        rows = list(sqlite3.connect(tmp_path / "c.db").execute("SELECT COUNT(*) FROM md_campaign_runs"))
    assert outcome.stopped == "budget" and outcome.test.runs == 4 and outcome.test.within_2_bars < 0.8
    assert rows == [(10,)]


@pytest.mark.parametrize("extra, reason", [
    (["--target-within-error", "0"], "must be in (0, 1]"),
    (["--target-within-error", "1.5"], "must be in (0, 1]"),
    (["--initial-runs", "1"], "--initial-runs must be at least 5"),
    (["--budget-runs", "6"], "smaller than the initial design"),
    (["--simulation", "standin"], "the stand-in does not write"),
])
def test_bad_active_options_are_one_line_and_exit_2(tmp_path, capsys, extra, reason):
    space = tmp_path / "space.toml"
    space.write_text("[h_nm]\nmin = 3.0\nmax = 4.0\n")
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "20", "--db", str(tmp_path / "c.db"),
                 "--sampler", "active", "--simulation", "nanoconfinement", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and reason in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "c.db").exists()


def test_an_active_campaign_that_met_its_target_starts_no_pool_when_run_again(tmp_path, capsys, monkeypatch):
    # mutation caught: only the budget taken as the active campaign's end (a rerun of one stopped at
    # its target started Ray and the pool, found no point to run and billed their start-up)
    from thrifty.md.campaign import sweep
    from thrifty.md.surrogate import active_sweep

    def no_pool(*args, **kwargs):
        raise AssertionError("the pool was started for a finished campaign")

    monkeypatch.setattr(sweep, "init_ray", no_pool)
    monkeypatch.setattr(active_sweep.ActiveSampler, "outcome",
                        lambda self, completed, budget: active_sweep.Outcome("target", None))
    space, db = tmp_path / "space.toml", tmp_path / "c.db"
    space.write_text("[h_nm]\nmin = 3.0\nmax = 4.0\n[c_molar]\nmin = 0.3\nmax = 0.9\n")
    options = sweep.SweepOptions(space, 20, db=db, sampler="active")
    with CampaignStore(db, "default") as store:
        store.begin(sweep.request(options, parse_space(space.read_text()).to_dict(), sweep.run_settings(options)))
        for point in RandomSampler(parse_space(space.read_text()), 0).next_points([], 10):
            store.record_run(point_key(point), point, {"steps": 100, "converged": True}, 1, 0.0)
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "20", "--db", str(db), "--sampler", "active",
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["already_finished"] is True and report["completed"] == 10
    assert report["active"]["stopped"] == "target" and report["node_hours_model"] == 0


def test_a_space_without_the_surrogates_parameters_is_refused():
    with pytest.raises(ThriftyError, match="the space names h$"):
        check_active(parse_space("[h]\nmin = 3.0\nmax = 4.0\n"), 0.9, 5, 10)


def test_the_active_sampler_imports_torch_only_to_train():
    # mutation caught: md.surrogate (torch) imported at the top of md.surrogate.active_sweep, which the CLI
    # imports for every --sampler active before anything trains
    code = "import sys, thrifty.cli.app, thrifty.md.surrogate.active_sweep; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


@pytest.fixture()
def local_ray(ray_pool):
    """The session's Ray (tests/md/conftest.py: 2 one-CPU nodes, 127.0.0.1 only); its workers import
    this module (Toy) from tests/md."""


def _config(work: Path, budget: int) -> CampaignConfig:
    return CampaignConfig(budget, work, CheckpointPlan(load_model("gcp-2019")[1], 3 * 3600), concurrency=2)


def _tiny_ensemble():
    from thrifty.md.surrogate import SurrogateConfig
    return ensemble_trainer(SurrogateConfig(hidden=(32,), members=3, max_epochs=60, patience=15))


def test_an_active_sweep_on_ray_stops_at_its_target_and_stores_each_run_once(local_ray, tmp_path):
    # mutations caught: a run stored twice or a batch point submitted twice (counts below); the
    # campaign not asking the sampler again after a batch (it would end at the initial design);
    # no stop at the target (it would run on to the budget of 20)
    made, train = _fakes(exact=True)
    with CampaignStore(tmp_path / "c.db") as store:
        store.begin({"test": "ray"})
        sampler = ActiveSampler(SPACE, store, tmp_path / "runs", target_within_error=0.8, initial_runs=6,
                                train=train, min_stop_runs=2)
        report = run_campaign(_config(tmp_path / "runs", 20), sampler, Toy(), store)
        outcome = sampler.outcome(report.runs, 20)
        batches = store.batches()
    rows = list(sqlite3.connect(tmp_path / "c.db").execute("SELECT run_id, COUNT(*) FROM md_campaign_runs GROUP BY run_id"))
    assert report.duplicates == 0 and all(n == 1 for _, n in rows) and len(rows) == report.completed == 8
    assert [len(b) for b in batches] == [6, 2]  # the design, then one point per worker
    assert {r for b in batches for r, _ in b} == {r for r, _ in rows}
    assert outcome.stopped == "target" and outcome.test.runs == 2 and outcome.test.within_2_bars >= 0.8


def test_a_restarted_driver_resubmits_the_pending_batch_and_duplicates_nothing(local_ray, tmp_path):
    # mutations caught: the batch not stored before submission, or a restart that picks afresh
    # (the second driver's surrogate differs, so its pick would be other points); pending points
    # stored twice on completion
    work = tmp_path / "runs"
    design = {point_key(p) for p in RandomSampler(SPACE, 0).next_points([], 6)}
    with CampaignStore(tmp_path / "c.db") as store:
        store.begin({"test": "restart"})
        first = ActiveSampler(SPACE, store, work, target_within_error=1.0, initial_runs=6, train=_tiny_ensemble())
        with pytest.raises(ThriftyError, match="failed in the simulation"):
            run_campaign(_config(work, 10), first, Toy(only=design), store)  # dies in its first picked batch
        pending = store.batches()[-1]
        assert len(store.batches()) == 2 and {r["run_id"] for r in store.completed()} == design
    with CampaignStore(tmp_path / "c.db") as store:
        made, train = _fakes(peak=(0.0, 0.0), exact=False)  # would pick the other corner
        second = ActiveSampler(SPACE, store, work, target_within_error=1.0, initial_runs=6, train=train)
        report = run_campaign(_config(work, 10), second, Toy(), store)
        batches = store.batches()
    assert batches[1] == pending  # resubmitted as stored, not re-picked
    stored = [r["run_id"] for r in report.runs]
    assert len(stored) == len(set(stored)) == 10 and {r for r, _ in pending} <= set(stored)
    assert report.duplicates == 0 and report.stored_now == 10 - len(design)
    assert made  # the second driver trained and picked only after the pending batch completed


def test_the_campaigns_box_side_reaches_the_surrogates_it_trains(tmp_path, monkeypatch):
    # mutation caught: the active sampler's default trainer built SurrogateConfig() (the 15 nm default
    # box) whatever the campaign's --box-nm, so its surrogates' charge scale was the default box's
    seen = []
    monkeypatch.setattr("thrifty.md.surrogate.train_ensemble", lambda runs, config: seen.append(config.box_nm))
    with CampaignStore(tmp_path / "c.db") as store:
        ActiveSampler(SPACE, store, tmp_path / "runs", box_nm=4.0).train([])
        ActiveSampler(SPACE, store, tmp_path / "runs").train([])
    assert seen == [4.0, None]
