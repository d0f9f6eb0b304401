# SPDX-License-Identifier: MIT
"""The campaign's pieces without Ray: the space file, samplers, the store's once-only insert, the
checkpoint schedule, and the stand-in's resume (bit-identical, from the checkpoint, falling back
past a damaged newest checkpoint)."""

import json

import numpy as np
import pytest

from thrifty.cli.app import main
from thrifty.md.campaign.checkpoint_schedule import CheckpointPlan, ScheduledCheckpoints, lost_work
from thrifty.md.campaign.point_samplers import GridSampler, RandomSampler, point_key
from thrifty.md.campaign.standin import StandIn
from thrifty.md.campaign.store import CampaignStore
from thrifty.md.campaign.sweep import SweepOptions
from thrifty.md.space import parse_space
from thrifty.transient.registry import load_model
from thrifty.transient.schedule import Job, plan_schedule, young_interval_s

SPACE = "[h]\nmin = 3.0\nmax = 4.0\npoints = 2\n[zp]\nvalues = [1, 2, 3]\n"


@pytest.mark.parametrize("text, reason", [
    ("[h\nmin = 1", "not valid TOML"),
    ("", "defines no parameters"),
    ("[h]\nmin = 4.0\nmax = 3.0\n", "must be below max"),
    ("[h]\nmin = nan\nmax = 3.0\n", "finite number"),
    ("[h]\nvalues = []\n", "non-empty list"),
    ("[h]\nmin = 1.0\n", "needs min and max"),
    ("[h]\nmin = 1.0\nmax = 2.0\npoints = 0\n", "positive integer"),
    # built in memory: 1e9 points had taken 23 GB before the kernel stopped the sweep
    ("[h]\nmin = 3.0\nmax = 4.0\npoints = 1000000000\n", "points must be at most 10,000"),
    ("h = 3\n", "must be a table"),
])
def test_a_bad_space_file_is_one_line_and_exit_2(tmp_path, capsys, text, reason):
    space = tmp_path / "space.toml"
    space.write_text(text)
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "2", "--db", str(tmp_path / "c.db")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and reason in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize("extra, reason", [
    (["--pool", "spot"], "--pool must be spot:N"),
    (["--pool", "preemptible:4"], "--pool must be spot:N"),
    (["--budget-runs", "0"], "--budget-runs must be a positive integer"),
    (["--sampler", "sobol"], "unknown sampler"),
    (["--simulation", "nowhere"], "unknown simulation"),
    (["--simulation", "thrifty.md.nothing:simulate"], "cannot load simulation"),
    (["--instance-type", "z9-huge"], "unknown GCP instance type"),
    (["--lifetime-model", "nope"], "unknown lifetime model"),
    (["--ckpt-cost", "5h", "--job-hours", "1"], "checkpoint cost"),
    (["--address", "127.0.0.1:1", "--emulate-preemptions"], "not both"),
    # ray.init retried a dead head for minutes (mutation caught: check_reachable not called)
    (["--address", "127.0.0.1:1"], "--address 127.0.0.1:1: no Ray head accepts connections there"),
    (["--tolerance", "0.1"], "apply to --simulation nanoconfinement only, not standin"),
    # checked by the active sampler alone before (mutation caught: the check left to it)
    (["--target-within-error", "1.5"], "--target-within-error must be in (0, 1], got 1.5"),
    (["--target-within-error", "nan"], "--target-within-error must be in (0, 1], got nan"),
])
def test_bad_sweep_options_are_one_line_and_exit_2_before_ray_starts(tmp_path, capsys, extra, reason):
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "2", "--db", str(tmp_path / "c.db"),
                 "--simulation", "standin", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and reason in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "c.db").exists()


def test_a_budget_beyond_the_grid_is_said(tmp_path, caplog):
    # mutation caught: the warning removed (8 runs asked of a 6-point grid ended at 6/8 in silence);
    # the store's refusal after it (an empty --db) keeps Ray from starting
    space = tmp_path / "space.toml"
    space.write_text(SPACE)  # 2 x 3 points
    (tmp_path / "empty.db").touch()
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "8", "--db", str(tmp_path / "empty.db"),
                 "--simulation", "standin"])
    assert code == 2
    assert "the grid has 6 points: the campaign ends there, short of --budget-runs 8" in caplog.text
    caplog.clear()
    main(["md", "sweep", "--space", str(space), "--budget-runs", "6", "--db", str(tmp_path / "empty.db"),
          "--simulation", "standin"])
    assert "the grid has" not in caplog.text


def test_the_progress_bar_counts_to_the_runs_the_campaign_does():
    # a new user's pass: 6 runs asked of a 4-point grid ended the bar at 4/6 (mutation caught: the
    # budget as the total whatever the sampler)
    from thrifty.md.campaign.sweep import runs_the_campaign_does
    space = parse_space(SPACE)  # 2 x 3 points
    assert runs_the_campaign_does("grid", space, 8) == 6 and runs_the_campaign_does("grid", space, 4) == 4
    assert runs_the_campaign_does("random", space, 8) == 8


def test_a_ray_that_does_not_start_is_one_line_and_ends_its_session(tmp_path, capsys, monkeypatch):
    """Mutation caught: Ray's start-up error let through (a traceback, exit 1, and a session left
    open that thrifty serve shows as running)."""
    from thrifty.md.campaign import sweep

    def no_ray(*args, **kwargs):
        raise Exception("The current node timed out during startup. This could happen because ...\nmore")

    monkeypatch.setattr(sweep, "init_ray", no_ray)
    space, db = tmp_path / "space.toml", tmp_path / "c.db"
    space.write_text(SPACE)
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "2", "--db", str(db), "--simulation", "standin"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.endswith("Ray did not start: The current node timed out during startup. This could "
                                      "happen because ...") and len(err.splitlines()) == 1, err
    with CampaignStore(db, "default") as store:
        assert [s["ended_at"] is not None for s in store.sessions()] == [True]


# the budget met with grid points left; the grid (6 points) run out below the budget
@pytest.mark.parametrize("budget, stored", [(4, 4), (8, 6)])
def test_a_finished_campaign_starts_no_pool_and_bills_nothing(tmp_path, capsys, monkeypatch, budget, stored):
    # mutations caught: a rerun of a finished campaign starting Ray and the pool (init_ray reached),
    # opening a session and billing its start-up; the budget's or the grid's end not taken as the end; the stand-in
    # reported as run on the openmm engine
    from thrifty.md.campaign import sweep
    from thrifty.md.space import load_space

    def no_pool(*args, **kwargs):
        raise AssertionError("the pool was started for a finished campaign")

    monkeypatch.setattr(sweep, "init_ray", no_pool)
    space, db = tmp_path / "space.toml", tmp_path / "c.db"
    space.write_text(SPACE)
    options = SweepOptions(space, budget, db=db, simulation="standin")
    with CampaignStore(db, "default") as store:
        store.begin(sweep.request(options, load_space(space).to_dict(), sweep.run_settings(options)))
        for point in GridSampler(load_space(space)).next_points([], stored):
            store.record_run(point_key(point), point, {"steps": 10, "converged": True}, 1, 0.0)
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", str(budget), "--db", str(db),
                 "--simulation", "standin", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["resumed"] is True and report["already_finished"] is True
    assert (report["completed"], report["stored_now"], report["steps"]) == (stored, 0, 10 * stored)
    assert report["node_hours_model"] == 0 and report["cost_at_on_demand_usd"] == 0 and report["engine"] is None
    with CampaignStore(db, "default") as store:
        assert store.sessions() == []
    main(["md", "sweep", "--space", str(space), "--budget-runs", str(budget), "--db", str(db), "--simulation", "standin"])
    assert "campaign 'default' had finished already: nothing ran, no pool started" in capsys.readouterr().out


def test_a_database_or_work_folder_that_cannot_serve_is_one_line_before_ray_starts(tmp_path, capsys):
    # mutations caught: an empty file or another program's SQLite file taken as the campaign's
    # database (md_campaign tables added to it); --work-dir checked only by the first run, after
    # the store was written and Ray started
    import sqlite3
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    (tmp_path / "empty.db").touch()
    with sqlite3.connect(tmp_path / "other.db") as other:
        other.execute("CREATE TABLE foo (x)")
    (tmp_path / "afile").write_text("x")
    for extra, reason in ((["--db", tmp_path], "it is a folder"),
                          (["--db", "/"], "it is a folder"),  # no name to put the runs beside (had been a traceback)
                          (["--db", tmp_path / "empty.db"], "it is an empty file"),
                          (["--db", tmp_path / "other.db"], "another program's SQLite database (tables foo)"),
                          (["--work-dir", tmp_path / "afile" / "w"], "--work-dir")):
        code = main(["md", "sweep", "--space", str(space), "--budget-runs", "2", "--db", str(tmp_path / "c.db"),
                     "--simulation", "standin", *map(str, extra)])
        err = capsys.readouterr().err.strip()
        assert code == 2 and reason in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "c.db").exists()
    with sqlite3.connect(tmp_path / "other.db") as other:
        assert [r[0] for r in other.execute("SELECT name FROM sqlite_master")] == ["foo"]


def test_each_campaign_has_its_own_work_folder_and_another_campaigns_is_refused(tmp_path, capsys):
    # mutations caught: the run folders keyed by the point alone in one folder for every campaign of
    # a database (a second campaign rewrote the first one's runs, which its store still counted);
    # a --work-dir holding another campaign's runs taken, or refused only after the store took the
    # campaign's request
    import sqlite3
    space, db = tmp_path / "space.toml", tmp_path / "c.db"
    space.write_text(SPACE)
    sweep = ["md", "sweep", "--space", str(space), "--budget-runs", "2", "--db", str(db), "--simulation", "standin",
             "--pool", "on-demand:1", "--json"]
    assert main(sweep) == 0 and main([*sweep, "--campaign", "B", "--seed", "1", "--pool", "on-demand:3"]) == 0
    # a pool beyond the tasks is said (mutation caught: spot:100000 for 2 runs billed $106 in silence)
    err = capsys.readouterr().err
    assert "--pool on-demand:3 has more nodes than the campaign has tasks left (2)" in err
    assert err.count("more nodes than") == 1
    first, second = tmp_path / "c.runs", tmp_path / "c.runs-B"
    owner = json.loads((first / ".campaign.json").read_text())
    assert owner == {"db_name": "c.db", "campaign": "default", "db": str(db.resolve())}
    assert json.loads((second / ".campaign.json").read_text())["campaign"] == "B"
    summaries = {p: p.read_bytes() for p in first.glob("*/profiles.csv")}
    assert len(summaries) == 2 and len(list(second.glob("*/profiles.csv"))) == 2
    code = main([*sweep, "--campaign", "C", "--work-dir", str(first)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{first} holds the runs of campaign 'default' of {db.resolve()}: give campaign 'C' of {db} its own --work-dir" in err
    assert {p: p.read_bytes() for p in first.glob("*/profiles.csv")} == summaries
    with sqlite3.connect(db) as conn:  # refused before the store took C's request
        assert conn.execute("SELECT name FROM md_campaigns ORDER BY name").fetchall() == [("B",), ("default",)]


def test_a_campaign_goes_on_where_its_sessions_ran_and_its_database_may_move(tmp_path, capsys):
    # mutations caught: a campaign whose stored sessions used a folder (one from before folders were
    # per campaign: DB.runs shared with the default campaign) restarted in a new empty one (its
    # checkpoints lost; the active sampler's reads of its runs failed); a database moved with its
    # runs refused as another campaign's owner (the marker keyed on the absolute path)
    import shutil
    space, db = tmp_path / "space.toml", tmp_path / "c.db"
    space.write_text(SPACE)
    sweep = ["md", "sweep", "--space", str(space), "--db", str(db), "--simulation", "standin", "--pool", "on-demand:1",
             "--json"]
    assert main([*sweep, "--budget-runs", "2"]) == 0
    assert main([*sweep, "--budget-runs", "2", "--campaign", "B", "--seed", "1", "--work-dir", str(tmp_path / "c.runs")]) \
        == 2  # a new campaign is refused the default one's folder
    with CampaignStore(db, "B") as store:  # as a store from before per-campaign folders holds B: its session ran in c.runs
        store.begin(json.loads(json.dumps(_request_of(space, db))))
        store.end_session(store.begin_session("on-demand:1", "n1-standard-4", tmp_path / "c.runs"), {})
    capsys.readouterr()
    assert main([*sweep, "--budget-runs", "3", "--campaign", "B", "--seed", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["completed"] == 3
    assert len(list((tmp_path / "c.runs").glob("*/profiles.csv"))) >= 3 and not (tmp_path / "c.runs-B").exists()
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.move(db, moved / "c.db")
    shutil.move(tmp_path / "c.runs", moved / "c.runs")
    moved_sweep = [moved / "c.db" if a == str(db) else a for a in sweep]
    assert main([*map(str, moved_sweep), "--budget-runs", "3"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["completed"] == 3


def _request_of(space, db) -> dict:
    """Campaign B's request as md sweep stores it (seed 1, the stand-in)."""
    from thrifty.md.campaign import sweep
    from thrifty.md.space import load_space
    options = SweepOptions(space, 3, db=db, campaign="B", seed=1, simulation="standin", pool="on-demand:1")
    return sweep.request(options, load_space(space).to_dict(), sweep.run_settings(options))


def test_a_campaign_is_run_by_one_driver_at_a_time(tmp_path):
    # mutation caught: the work folder not held (two drivers of one campaign ran every run twice and
    # billed two pools); a claim that is let go is taken again, and a campaign name that is no file
    # name gets a folder of its own
    from thrifty.errors import ThriftyError
    from thrifty.md.campaign.work_dir import claim, default_work_dir
    db = tmp_path / "c.db"
    work = default_work_dir(db, "default")
    held = claim(work, db, "default")
    with pytest.raises(ThriftyError, match=r"is in use by another md sweep \(pid \d+\)"):
        claim(work, db, "default")
    held.close()
    claim(work, db, "default").close()
    assert default_work_dir(db, "x/../y").parent == tmp_path
    assert default_work_dir(db, "x/../y") != default_work_dir(db, "y") != work
    assert default_work_dir(db, "x") != default_work_dir(tmp_path / "c.x.db", "default")  # c.runs-x, c.x.runs


@pytest.mark.parametrize("text, extra, reason", [
    ("[h]\nvalues = [2.0]\n", [], "nanoconfinement has no parameter h: the space may name h_nm"),
    ("[h_nm]\nmin = 0.3\nmax = 3.0\n", [], "the space reaches a point the model refuses (h_nm = 0.3)"),
    ("[c_molar]\nvalues = [0.5, 2.0]\n[h_nm]\nvalues = [2.0]\n", ["--box-nm", "3.0"],
     "refuses (c_molar = 0.5, h_nm = 2): the box side 3.0 nm is too small for the cutoff 2.500 nm"),
    ("[h_nm]\nvalues = [2.0]\n", ["--cap-steps", "1000"], "--equilibrate 20000 leaves no steps to sample"),
    ("[h_nm]\nvalues = [2.0]\n", ["--tolerance", "0"], "must be positive"),
    # a fractional valency (it ran rounded to 2 while its run id hashed 1.5), listed between integers too
    ("[z_plus]\nvalues = [1, 1.5, 2]\n", [], "z_plus is a valency and must be an integer, got 1.5"),
    ("[z_plus]\nmin = 1\nmax = 3\n", [], "z_plus is a valency: give it as a list of integers"),
    # the stand-in's own names and signs (a new user's pass: [bogus] and c = -1 ran; mutation caught:
    # no check for the stand-in)
    ("[bogus]\nvalues = [1]\n", ["--simulation", "standin"],
     "the stand-in takes the parameters h, zp, zn, c, dp, dn; the space names bogus"),
    ("[c]\nvalues = [-1.0, 0.5]\n", ["--simulation", "standin"], "the stand-in's c must be positive; the space reaches -1"),
    ("[zn]\nmin = -2\nmax = 1\n", ["--simulation", "standin"], "the stand-in's zn must be negative; the space reaches 1"),
])
def test_a_nanoconfinement_space_or_run_setting_the_model_refuses_is_one_line_before_ray_starts(
        tmp_path, capsys, text, extra, reason):
    # mutations caught: check_space not called (Ray starts and the first run fails), corners not checked,
    # the settings' checks removed
    space = tmp_path / "space.toml"
    space.write_text(text)
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "2", "--db", str(tmp_path / "c.db"), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and reason in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "c.db").exists()


def test_a_sweep_runs_the_md_model_and_bills_wall_time_unless_asked_otherwise(tmp_path, capsys):
    # mutations caught: --simulation defaulting to the stand-in (a space of the stand-in's names would
    # be accepted and its runs would ignore the model); --time-scale 3600 for a real campaign (an
    # 8-run sweep of minutes billed as hundreds of node-hours)
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "2", "--db", str(tmp_path / "c.db")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "nanoconfinement has no parameter h, zp" in err, err
    assert SweepOptions(space, 2).model_seconds_per_wall_second == 1.0
    assert SweepOptions(space, 2, emulate_preemptions=True).model_seconds_per_wall_second == 3600.0
    assert SweepOptions(space, 2, time_scale=60.0, emulate_preemptions=True).model_seconds_per_wall_second == 60.0


def test_grid_covers_the_box_and_skips_completed_points():
    sampler = GridSampler(parse_space(SPACE))
    points = sampler.next_points([], 100)
    assert len(points) == 6 and {p["h"] for p in points} == {3.0, 4.0} and {p["zp"] for p in points} == {1, 2, 3}
    rest = sampler.next_points([{"params": points[0]}, {"params": points[3]}], 100)
    assert rest == [p for i, p in enumerate(points) if i not in (0, 3)]


def test_random_points_depend_on_the_seed_only():
    space = parse_space(SPACE)
    first = RandomSampler(space, seed=7).next_points([], 4)
    assert RandomSampler(space, seed=7).next_points([], 4) == first  # a restarted driver asks again
    assert RandomSampler(space, seed=8).next_points([], 4) != first
    assert all(3.0 <= p["h"] <= 4.0 and p["zp"] in (1, 2, 3) for p in first)
    assert RandomSampler(space, seed=7).next_points([{"params": first[0]}], 3) == first[1:]


def test_a_run_is_stored_once_however_often_it_completes(tmp_path):
    with CampaignStore(tmp_path / "c.db") as store:
        assert store.begin({"space": 1}) is False
        params = {"h": 3.0, "zp": 1.0}
        assert store.record_run(point_key(params), params, {"steps": 10, "converged": True}, 1, 0.0)
        assert not store.record_run(point_key(params), params, {"steps": 10, "converged": True}, 2, 0.0)
        assert len(store.completed()) == 1
    with CampaignStore(tmp_path / "c.db") as store:  # a restarted driver
        assert store.begin({"space": 1}) is True
        assert [r["params"] for r in store.completed()] == [params]
        with pytest.raises(Exception, match="another space"):
            store.begin({"space": 2})


def test_each_sweep_session_keeps_its_bill_and_serve_sums_the_ended_ones(tmp_path):
    """Mutations caught: end_session not writing the bill (the session stays open); serve billing a
    spot session at on-demand prices; an open session's (unknown) time counted as zero cost."""
    from thrifty.serve.campaigns import _bill
    with CampaignStore(tmp_path / "c.db") as store:
        store.begin({"space": 1})
        first = store.begin_session("spot:2", "n1-standard-4")
        store.end_session(first, {"node_hours_model": 2.0, "cost_at_spot_usd": 0.1, "cost_at_on_demand_usd": 0.4,
                                  "node_seconds_wall": 2.0})
        second = store.begin_session("on-demand:1", "n1-standard-4")
        store.end_session(second, {"node_hours_model": 1.0, "cost_at_spot_usd": 0.05, "cost_at_on_demand_usd": 0.2,
                                   "node_seconds_wall": 1.0})
        store.begin_session("spot:2", "n1-standard-4")  # its driver was killed
        sessions = store.sessions()
    assert [s["ended_at"] is not None for s in sessions] == [True, True, False]
    assert sessions[0]["bill"]["cost_at_spot_usd"] == 0.1 and sessions[2]["bill"] is None
    bill = _bill(sessions)
    assert bill["cost_usd"] == pytest.approx(0.1 + 0.2) and bill["cost_at_on_demand_usd"] == pytest.approx(0.6)
    assert bill["sessions"] == 3 and bill["open_sessions"] == 1 and bill["node_hours_model"] == 3.0
    assert _bill(sessions[2:])["cost_usd"] is None


def test_checkpoints_follow_the_dp_schedule_of_the_model_and_the_node_age(tmp_path):
    _, model = load_model("gcp-2019")
    plan = CheckpointPlan(model, 3 * 3600, time_scale=3600.0)
    young = young_interval_s(60.0, model.mean())
    for age_h in (0.0, 5.0):
        dp = plan_schedule(model, Job(3 * 3600, 60.0, 60.0), "dp", age_h * 3600).intervals_s
        # the DP's checkpoints, then, past the run's expected end, Young's interval
        assert plan.intervals_wall_s(age_h * 3600) == pytest.approx(
            [w / 3600 for w in [*dp[:-1], max(dp[-1], young), young]])
    assert plan.intervals_wall_s(0.0) != plan.intervals_wall_s(5 * 3600)  # young VMs checkpoint sooner
    # a run the DP plans as one interval (no checkpoint) that outlasts it is still asked for them
    # (mutation caught: the DP's intervals alone: none, however long the run went on)
    short = CheckpointPlan(model, 600, time_scale=3600.0)
    assert len(plan_schedule(model, Job(600, 60.0, 60.0), "dp").intervals_s) == 1
    assert short.intervals_wall_s(0.0) == pytest.approx([young / 3600, young / 3600])
    now = [0.0]
    checkpoints = ScheduledCheckpoints(tmp_path / "ck", [3.0, 5.0], clock=lambda: now[0])
    saved_at = []
    for chunk in range(1, 15):
        now[0] += 1.0
        if checkpoints.due():
            checkpoints.save(b"x")
            saved_at.append(chunk)
    assert saved_at == [3, 8, 13]  # the schedule's intervals, then the last one again


def test_a_stopping_drivers_notice_asks_for_one_checkpoint_off_the_schedule(tmp_path):
    # mutations caught: the notice file not read (no save until the schedule's); read on every chunk
    # (a save a chunk while the driver waits); its save moving the schedule's next one
    notice, now = tmp_path / ".stopping", [0.0]
    checkpoints = ScheduledCheckpoints(tmp_path / "ck", [5.0], notice_file=notice, clock=lambda: now[0])
    saved_at = []
    for chunk in range(1, 12):
        now[0] += 1.0
        if chunk == 2:
            notice.write_text("stopping")
        if checkpoints.due():
            checkpoints.save(b"x")
            saved_at.append(chunk)
    assert saved_at == [2, 5, 10]


class Dies(ScheduledCheckpoints):
    """Checkpoints every `every` chunks; the process 'dies' at chunk `die_at` of this attempt."""

    class Killed(Exception):
        pass

    def __init__(self, directory, every, die_at, log=None):
        super().__init__(directory, [], attempt_log=log)
        self.every, self.die_at = every, die_at

    def due(self):
        super().due()
        if self.die_at is not None and self.chunks == self.die_at:
            raise self.Killed
        return self.chunks % self.every == 0


SIM = StandIn(chunk_wall_s=0.0, tolerance=0.045)
PARAMS = {"h": 3.0, "c": 0.4}


def test_a_killed_run_resumes_from_its_checkpoint_and_ends_bit_identical(tmp_path):
    whole = SIM(PARAMS, tmp_path / "whole", Dies(tmp_path / "whole" / "ck", 1000, None))
    assert whole["converged"] and whole["steps"] < SIM.max_chunks * SIM.steps_per_chunk
    attempts, rng = [], np.random.default_rng(0)
    while len(attempts) < 100:  # a run that restarts from scratch never gets past its deaths
        ck = Dies(tmp_path / "parts" / "ck", 4, int(rng.integers(10, 30)),
                  log=tmp_path / "parts" / "attempts" / f"{len(attempts) + 1:03d}.json")
        attempts.append(ck)
        try:
            resumed = SIM(PARAMS, tmp_path / "parts", ck)
            break
        except Dies.Killed:
            continue
    else:
        pytest.fail("100 attempts did not finish the run: it does not resume")
    assert len(attempts) >= 3
    assert resumed == whole
    assert (tmp_path / "parts" / "profiles.csv").read_text() == (tmp_path / "whole" / "profiles.csv").read_text()
    # each attempt after the first started from a checkpoint, not from step 0: the chunks run
    # in all are the run's chunks plus those after each death's last checkpoint (the converged
    # chunk ends the run without asking due(), hence the 1)
    assert all(ck.resumed_from is not None for ck in attempts[1:])
    redone = lost_work(tmp_path / "parts" / "attempts")[2]
    assert sum(ck.chunks for ck in attempts) + 1 == whole["steps"] // SIM.steps_per_chunk + redone
    assert redone <= 3 * (len(attempts) - 1)


def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(tmp_path):
    whole = SIM(PARAMS, tmp_path / "whole", Dies(tmp_path / "whole" / "ck", 1000, None))
    with pytest.raises(Dies.Killed):
        SIM(PARAMS, tmp_path / "run", Dies(tmp_path / "run" / "ck", 2, 7))
    files = sorted((tmp_path / "run" / "ck").glob("ckpt-*.bin"))
    assert len(files) == 3
    files[-1].write_bytes(files[-1].read_bytes()[:-20] + b"\0" * 20)
    ck = Dies(tmp_path / "run" / "ck", 1000, None)
    assert SIM(PARAMS, tmp_path / "run", ck) == whole
    assert (tmp_path / "run" / "ck" / "fallbacks.log").read_text().split() == [files[-1].name]
    # resumed at chunk 4 (the one before the damaged 6); the converged chunk asks no due()
    assert ck.chunks == whole["steps"] // SIM.steps_per_chunk - 4 - 1


def test_lost_work_counts_what_each_dead_attempt_ran_past_its_last_save(tmp_path):
    logs = tmp_path / "attempts"
    logs.mkdir()
    for i, log in enumerate([{"last_chunk": 10.0, "last_save": 7.5, "chunks": 9, "saved_chunk": 6},
                             {"last_chunk": 20.0, "last_save": 20.0, "chunks": 4, "saved_chunk": 4}]):
        (logs / f"{i + 1:03d}.json").write_text(json.dumps(log))
    assert lost_work(logs) == (2, 2.5, 3)


def test_placement_reuses_the_safest_idle_node_and_goes_fresh_near_the_wall():
    from thrifty.md.campaign.pool import Placement
    _, model = load_model("gcp-2019")
    placement = Placement.solve(model, 3 * 3600, 60.0, 60.0, 60.0)
    young, middle, old = 0.0, 8 * 3600, 23 * 3600
    assert placement.choose({"young": young, "middle": middle}) == ("middle", None)  # past infant mortality
    assert placement.fresh_better(old) and not placement.fresh_better(middle)
    assert placement.choose({"old": old}) == (None, "old")  # retire it, a fresh VM takes the run
    assert placement.choose({}) == (None, None)


def test_a_simulation_error_without_a_message_is_named_by_its_type():
    # mutation caught: the first line of an empty message (IndexError: md sweep's driver crashed
    # on a MemoryError raised in a run)
    from thrifty.md.campaign.runner import first_line
    assert first_line(MemoryError()) == "MemoryError"
    assert first_line(ValueError("no convergence\nat step 40")) == "no convergence"


def test_ray_output_keeps_stdout_for_the_report_and_sends_the_emulated_pools_deaths_to_the_debug_log(capfd, caplog):
    # mutation caught: the emulated pool's node deaths printed (Ray's 20-line raylet dumps on stderr,
    # every preemption) or, on a real cluster, hidden
    import logging

    from thrifty.md.campaign.sweep import ray_output
    with caplog.at_level(logging.DEBUG, logger="thrifty.md.campaign.sweep"):
        with ray_output(emulated=True):
            print("\x1b[33m(raylet)\x1b[0m node 1 is dead")
            print("no newline", end="")
        with ray_output(emulated=False):
            print("(raylet) node 2 is dead")
    out, err = capfd.readouterr()
    printed = err.splitlines()  # as printed: a log handler an earlier test left may show the debug records
    assert out == "" and "(raylet) node 2 is dead" in printed
    assert not any(line.startswith(("\x1b[33m(raylet)", "(raylet) node 1", "no newline")) for line in printed), printed
    assert "ray: (raylet) node 1 is dead" in caplog.text and "ray: no newline" in caplog.text


@pytest.mark.parametrize("scale, said", [
    (3600.0, "1.16 s of work redone (wall clock; 69.6 min of model time at this session's --time-scale 3600)"),
    (1.0, "1.16 s of work redone; this session"),
])
def test_the_work_redone_is_said_on_the_node_hours_clock_too(tmp_path, capsys, monkeypatch, scale, said):
    # a new user's pass: "1.16 s of work redone (wall clock) ... 46.94 node-hours (model time)" read
    # as nothing lost, while it was 70 model minutes (mutation caught: wall clock alone)
    from thrifty.md.campaign import sweep
    summary = {"campaign": "default", "already_finished": False, "completed": 8, "stored_now": 8, "duplicates": 0,
               "converged": 8, "steps": 1000, "lost_work_s": 1.16, "preemptions": 3, "node_hours_model": 46.94,
               "time_scale": scale, "cost_at_spot_usd": 1.0, "cost_at_on_demand_usd": 3.0}
    monkeypatch.setattr(sweep, "run_sweep", lambda options: summary)
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    assert main(["md", "sweep", "--space", str(space), "--budget-runs", "2", "--db", str(tmp_path / "c.db"),
                 "--simulation", "standin"]) == 0
    assert said in " ".join(capsys.readouterr().out.split())


def test_the_sweeps_shutdown_is_shielded_from_a_second_stop():
    """A Ctrl-C or SIGTERM inside Ray's shutdown had cut it short and left Ray's agents running (a new
    user's pass): inside the shield both are ignored, and their handlers come back after, even one Ray
    replaced meanwhile. Mutation caught: the handlers not put back (SIGTERM would stay ignored)."""
    import os
    import signal

    from thrifty.md.campaign.sweep import _shielded_from_stops
    seen = []
    interrupt = signal.getsignal(signal.SIGINT)  # default_int_handler, or what a test before left
    previous = signal.signal(signal.SIGTERM, lambda *_: seen.append("term"))
    try:
        with _shielded_from_stops():
            os.kill(os.getpid(), signal.SIGINT)  # ignored: no KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGTERM)  # ignored
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as Ray's shutdown does
        assert seen == [] and signal.getsignal(signal.SIGINT) is interrupt
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == ["term"]
    finally:
        signal.signal(signal.SIGTERM, previous)
