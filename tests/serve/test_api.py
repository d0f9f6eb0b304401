# SPDX-License-Identifier: MIT
"""The JSON API through the ASGI test client, against stores made by real commands (conftest)."""

import json
import logging
import sqlite3

import numpy as np
import pytest
from serve_support import TOKEN, copy_db, run_main

from thrifty.md.campaign.store import CampaignStore
from thrifty.serve.security import Access
from thrifty.serve.settings import ServeSettings
from thrifty.store import PROBE_COLUMNS, Store

HOST = "http://127.0.0.1:8477"
# the first test builds the session's stores with real commands: minutes on a loaded machine
pytestmark = pytest.mark.timeout(3600)


def client(**settings):
    from fastapi.testclient import TestClient

    from thrifty.serve.app import create_app
    return TestClient(create_app(ServeSettings(**settings)), base_url=HOST)


@pytest.fixture(scope="module")
def api(stores, campaign, surrogate):
    return client(dbs=(stores["db"],), campaign_dbs=(campaign,), watch=(stores["runs"],), surrogate=surrogate)


def test_health_and_the_openapi_schema_name_every_route(api):
    """Mutation caught: a route left out of the app (its path missing from the schema)."""
    assert api.get("/api/health").json()["status"] == "ok"
    paths = set(api.get("/openapi.json").json()["paths"])
    assert {"/api/plans", "/api/plans/{plan_id}", "/api/profiles", "/api/searches", "/api/searches/{search_id}",
            "/api/runs", "/api/runs/{run_id}", "/api/campaigns", "/api/campaigns/{campaign_id}", "/api/health",
            "/api/events", "/api/jobs", "/api/jobs/{job_id}/stop", "/api/surrogate/profile"} <= paths


def test_a_plan_shows_its_pareto_front_and_the_stored_recommendation(api, stores):
    """The plane `thrifty plan` stored has the front and the recommendation `thrifty plan --json`
    printed. Mutations caught: the plane not stored (plane_source "recomputed"); another decision's
    plane; the front from other candidates than the plan's."""
    plans = api.get("/api/plans").json()  # newest first; the copied profile's database may hold older plans
    assert plans == sorted(plans, key=lambda p: p["created_at"], reverse=True)
    newest_cost = next(p for p in plans if p["request"]["objective"] == "cost")  # the steering test adds a time plan
    plan = api.get(f"/api/plans/{newest_cost['id']}").json()
    assert plan["plane_source"] == "stored" and plan["matches_stored"] is True
    printed = stores["plan"]
    keys = ("cloud", "region", "instance_type", "nodes", "workers", "global_batch", "spot")
    assert [{k: d[k] for k in keys} for d in plan["pareto"]] == [{k: d[k] for k in keys} for d in printed["pareto"]]
    assert [d["predicted_cost_usd"] for d in plan["pareto"]] == pytest.approx(
        [d["predicted_cost_usd"] for d in printed["pareto"]], rel=1e-9)
    again = plan["plane_recommendation"]
    assert again["predicted_cost_usd"] == pytest.approx(printed["recommended"]["predicted_cost_usd"], rel=1e-9)
    plane = plan["plane"]
    assert plane["candidates"] == printed["candidates_evaluated"] and plane["feasible"] == printed["candidates_feasible"]
    assert plane["shown"] == len(plane["time_s"]) == len(plane["cost_usd"]) == len(plane["label"])
    drawn = set(zip(plane["time_s"], plane["cost_usd"], strict=True))  # the front and the choice are among the points drawn
    assert all((d["predicted_time_s"], d["predicted_cost_usd"]) in drawn for d in [*plan["pareto"], again])


def test_a_search_shows_every_window_its_moves_and_spend(api, stores):
    """Mutations caught: a window dropped, spend not cumulative, a move missed or invented."""
    searches = api.get("/api/searches").json()
    assert len(searches) == 1 and searches[0]["finished"]
    found = api.get(f"/api/searches/{searches[0]['id']}").json()
    with Store(stores["db"]) as store:
        probes = store.search_probes(int(searches[0]["id"].split("-")[1]))
    assert [w["instance_type"] for w in found["windows"]] == [p["instance_type"] for p in probes]
    assert found["spend_usd"] == pytest.approx(sum(p["cost_usd"] for p in probes))
    assert found["windows"][-1]["spend_usd"] == pytest.approx(found["spend_usd"])
    keys = ("instance_type", "num_nodes", "num_workers", "global_batch")
    changes = [i for i in range(1, len(probes)) if any(probes[i][k] != probes[i - 1][k] for k in keys)]
    assert [m["window"] for m in found["moves"]] == changes and changes
    # the whole search, settled segments included (a new user's pass: the page showed the windows'
    # $0.17 of a $12.93 search, and 4 moves of 6); mutation caught: the windows' sums shown
    result = found["result"]
    assert (found["search_time_s"], found["search_cost_usd"], found["search_moves"]) == \
        (result["time_s"], result["cost_usd"], result["moves"])
    assert found["search_cost_usd"] > found["spend_usd"]
    # typed as `thrifty search --json` types them (a new user's pass: `"cut_short": 0`); mutation
    # caught: the stored 0/1 passed through
    assert [w["cut_short"] for w in found["windows"]] == [p["cut_short"] for p in result["probes"]]
    assert all(type(w["cut_short"]) is bool and type(w["spot"]) is bool for w in found["windows"])


def test_a_training_run_shows_the_batch_split_and_step_times_per_rank(api, stores):
    """From the database and, the same rows, from its run folder (steps.csv). Mutations caught:
    a rank's rows mixed with another's; the step time not the slowest rank's; the folder run
    read from another file than steps.csv."""
    runs = api.get("/api/runs").json()
    stored = next(r for r in runs if r["source"] == "database")
    folder = next(r for r in runs if r["source"] == "folder")
    a = api.get(f"/api/runs/{stored['id']}").json()
    b = api.get(f"/api/runs/{folder['id']}").json()
    assert a["series"] == b["series"]
    series = a["series"]
    assert set(series["ranks"]) == {"0", "1"} and series["steps"] == list(range(12))
    zero, one = series["ranks"]["0"], series["ranks"]["1"]
    assert all(x + y == stored["global_batch"] for x, y in zip(zero["local_batch"], one["local_batch"], strict=True))
    assert any(y < x for x, y in zip(zero["local_batch"], one["local_batch"], strict=True))  # the 3x slower rank got less
    rows = {(r["step"], r["rank"]): r for r in a["steps"]}
    assert series["step_time_s"] == [max(rows[(s, 0)]["step_time_s"], rows[(s, 1)]["step_time_s"]) for s in range(12)]


def test_a_campaign_shows_progress_preemptions_and_surrogate_accuracy(api, campaign, surrogate):
    """Accuracy as md.surrogate.metrics computes it on the campaign's run folders. Mutations
    caught: progress not cumulative; accuracy over other runs than the campaign's."""
    from thrifty.md.runs import grid_arrays, read_run
    from thrifty.md.surrogate import Ensemble
    from thrifty.md.surrogate.metrics import accuracy
    listed = api.get("/api/campaigns").json()
    assert [c["runs"] for c in listed] == [4]
    found = api.get(f"/api/campaigns/{listed[0]['id']}").json()
    assert [p["completed"] for p in found["progress"]] == [1, 2, 3, 4]
    assert found["preemptions"] == 0
    # the session's bill as stored (a spot pool: at spot prices); mutation caught: the bill not read
    # from the sessions (None), or at on-demand prices for a spot pool
    with CampaignStore(campaign) as store:
        [session] = store.sessions()
    bill = found["bill"]
    assert bill["sessions"] == 1 and bill["open_sessions"] == 0 and bill["cost_usd"] > 0
    assert bill["cost_usd"] == pytest.approx(session["bill"]["cost_at_spot_usd"])
    assert bill["cost_usd"] < bill["cost_at_on_demand_usd"]
    runs = [read_run(campaign.with_suffix(".runs") / p["run_id"]) for p in found["progress"]]
    model = Ensemble.load(surrogate)
    points, density, error = grid_arrays(runs, model.config.bins)
    expected = accuracy(points, model.predict(points).mean, density, error)
    assert found["surrogate_accuracy"]["runs"] == 4
    assert found["surrogate_accuracy"]["within_error"] == pytest.approx(expected.within_error)
    assert found["surrogate_accuracy"]["run_names"] == [p["run_id"] for p in found["progress"]]


def test_a_campaign_with_its_own_work_dir_is_measured_on_its_runs(campaign, surrogate, tmp_path):
    """md sweep --work-dir elsewhere: the session stores the folder and serve reads the runs there.
    Mutation caught: only the default beside the database looked in (0 runs, "no run folder of
    this campaign holds params.json")."""
    import shutil
    db = copy_db(campaign, tmp_path / "moved.db")
    elsewhere = tmp_path / "elsewhere" / "work"
    shutil.copytree(campaign.with_suffix(".runs"), elsewhere)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE md_campaign_sessions SET work_dir = ?", (str(elsewhere),))
    app = client(campaign_dbs=(db,), surrogate=surrogate)
    found = app.get(f"/api/campaigns/{app.get('/api/campaigns').json()[0]['id']}").json()
    assert found["surrogate_accuracy"]["runs"] == 4, found["surrogate_accuracy"]


def test_the_surrogate_profile_is_what_md_predict_gives(api, surrogate):
    """Mutation caught: parameters passed in another order than md.params.PARAMETERS."""
    point = {"h_nm": 3.5, "z_plus": 2, "c_molar": 0.5, "d_plus_nm": 0.474, "d_minus_nm": 0.627}
    got = api.get("/api/surrogate/profile", params=point).json()
    want = json.loads(run_main("md", "predict", "--h", "3.5", "--zp", "2", "--c", "0.5", "--d-plus", "0.474",
                          "--d-minus", "0.627", "--surrogate", surrogate, "--json"))
    assert np.allclose(got["z_nm"], want["z_nm"])
    for ion in ("cation", "anion"):
        assert np.allclose(got[ion]["mean_molar"], want[ion]["mean_molar"], rtol=1e-6)
        for side in ("low_molar", "high_molar"):
            assert np.allclose(got[ion][side], want[ion][side], rtol=1e-6, atol=1e-9)
    outside = api.get("/api/surrogate/profile", params={**point, "h_nm": 9})
    assert outside.status_code == 400 and "outside what the surrogate was trained on" in outside.json()["error"]


def test_a_surrogate_alone_is_served(surrogate):
    """`thrifty serve --surrogate DIR` alone serves the page and the profiles (a new user's pass: it was
    refused as "nothing to serve"). Mutation caught: the API needing a database for the surrogate."""
    alone = client(surrogate=surrogate)
    assert "surrogate-form" in alone.get("/").text
    point = {"h_nm": 3.5, "z_plus": 2, "c_molar": 0.5, "d_plus_nm": 0.474, "d_minus_nm": 0.627}
    assert alone.get("/api/surrogate/profile", params=point).json()["band"] == "90% (calibrated)"
    assert alone.get("/api/searches").json() == [] and alone.get("/api/campaigns").json() == []


@pytest.mark.parametrize("url", ["/api/plans/0-999", "/api/plans/7-1", "/api/plans/..%2F..%2Fetc%2Fpasswd",
                                 "/api/searches/abc", "/api/searches/0-999", "/api/runs/db0-999",
                                 "/api/runs/w0-999", "/api/runs/..", "/api/campaigns/0-nosuch",
                                 "/api/campaigns/5-default", "/api/nosuch"])
def test_bad_ids_are_404_with_a_json_error(api, url):
    """Mutation caught: an unknown id answered 500 (a KeyError) or with HTML."""
    response = api.get(url)
    assert response.status_code == 404 and response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]


def test_writes_need_allow_writes_and_the_token(stores, caplog):
    """Mutations caught: a write served without the token, or with a wrong one; a write served
    when --allow-writes was not given; a refused or stored write not logged (serve.app, serve.steering)."""
    caplog.set_level(logging.INFO, logger="thrifty.serve")
    profile = client(dbs=(stores["db"],)).get("/api/profiles").json()[0]["id"]
    ask = {"profile": profile, "objective": "time"}
    assert client(dbs=(stores["db"],)).post("/api/plans", json=ask).status_code == 403
    open_app = client(dbs=(stores["db"],), access=Access.decide("127.0.0.1", True, {"THRIFTY_SERVE_TOKEN": TOKEN}))
    assert open_app.post("/api/plans", json=ask).status_code == 401
    wrong = open_app.post("/api/plans", json=ask, headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"})
    assert wrong.status_code == 401 and wrong.json()["error"]
    with Store(stores["db"]) as store:
        before = store.count("decisions")
    done = open_app.post("/api/plans", json=ask, headers={"Authorization": f"Bearer {TOKEN}"})
    assert done.status_code == 201, done.text
    assert done.json()["constraints_at_risk"] == []  # no deadline nor budget asked
    with Store(stores["db"]) as store:
        assert store.count("decisions") == before + 1
    listed = open_app.get("/api/plans").json()
    assert listed[0]["id"] == done.json()["id"] and listed[0]["request"]["objective"] == "time"
    assert open_app.post("/api/plans", json={"profile": "0-999"},
                         headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
    # a new user's pass: an infinite deadline was stored as none, a misspelt field ignored.
    # Mutations caught: infinities allowed; extra fields ignored
    for bad in ({"deadline_s": float("inf")}, {"budget_usd": float("inf")}, {"deadline": 3600}):
        refused = open_app.post("/api/plans", content=json.dumps({**ask, **bad}),  # Infinity as Python writes it
                                headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        assert refused.status_code == 422, bad
    with Store(stores["db"]) as store:
        assert store.count("decisions") == before + 1
    said = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("thrifty.serve")]
    assert ("thrifty.serve.app", "WARNING", "a write without the right token was refused (no Authorization header)") \
        in said
    assert ("thrifty.serve.app", "WARNING", "a write without the right token was refused (wrong token)") in said
    assert [m for _, _, m in said if m.startswith("serving ")][-1].endswith("writes on (with the token)")
    stored = [m for name, _, m in said if name == "thrifty.serve.steering"]
    assert len(stored) == 1 and stored[0].startswith(f"plan {done.json()['id']} stored for profile {profile} ")


def test_a_plan_through_the_api_takes_the_epochs_to_the_target(stores, tmp_path, monkeypatch):
    """A profile made without its calibration run (`model project`, `profile --no-calibrate`) needs
    the epochs to the target, as `thrifty plan --epochs`; the API takes them as "epochs" and its
    refusal names it. Mutation caught: the field not passed on to the job model."""
    from thrifty.serve import steering
    seen = []

    def job_model_of(record, epochs=None):
        seen.append(epochs)
        return real(record, epochs)

    real = steering.job_model_of
    monkeypatch.setattr(steering, "job_model_of", job_model_of)
    db = copy_db(stores["db"], tmp_path / "thrifty.db")
    open_app = client(dbs=(db,), access=Access.decide("127.0.0.1", True, {"THRIFTY_SERVE_TOKEN": TOKEN}))
    profile = open_app.get("/api/profiles").json()[0]["id"]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert open_app.post("/api/plans", json={"profile": profile, "epochs": 0}, headers=auth).status_code == 422
    done = open_app.post("/api/plans", json={"profile": profile, "epochs": 20}, headers=auth)
    assert done.status_code == 201 and seen == [20], done.text
    with sqlite3.connect(db) as conn:  # no calibration run, no epochs: the refusal names the field
        conn.execute("DELETE FROM calibrations WHERE profile_id = ?", (int(profile.split("-")[1]),))
    without = open_app.post("/api/plans", json={"profile": profile}, headers=auth)
    assert without.status_code == 400 and 'serve\'s "epochs"' in without.json()["error"], without.text


def test_off_loopback_writes_stay_off_without_a_token_from_the_environment():
    """Mutation caught: --host 0.0.0.0 --allow-writes serving writes with a printed token."""
    assert not Access.decide("0.0.0.0", True, {}).writes
    assert Access.decide("0.0.0.0", True, {"THRIFTY_SERVE_TOKEN": TOKEN}).writes
    assert Access.decide("127.0.0.1", True, {}).token_printed


def test_reads_go_through_read_only_connections(stores):
    """Mutation caught: read_transaction opening the database writable (mode=ro dropped)."""
    from thrifty.serve.readonly import read_transaction
    with pytest.raises(sqlite3.OperationalError, match="readonly"), read_transaction(stores["db"]) as conn:
        conn.execute("CREATE TABLE serve_probe (x)")


def test_a_request_from_another_host_name_is_refused(stores):
    """Mutation caught: the Host check left out (a rebound DNS name would reach the API)."""
    assert client(dbs=(stores["db"],)).get("/api/health", headers={"host": "evil.example:8477"}).status_code == 400


def test_an_open_read_does_not_hold_up_a_write(stores, tmp_path):
    """In WAL (as thrifty serve sets it at start) a search window commits while a read
    transaction of the server is still open. Mutation caught: enable_wal not switching the
    journal (in the rollback journal the commit waits for the reader: Store gives up after 5 s
    with 'database is locked')."""
    import threading

    from thrifty.serve.readonly import enable_wal, read_transaction
    db = copy_db(stores["db"], tmp_path / "wal.db")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"  # as thrifty's Store makes it
    assert enable_wal(db)
    with Store(db) as store:
        search = store.start_search("w", "k", 0, {})
    committed = threading.Event()

    def write() -> None:
        with Store(db) as store:
            store.save_search_window(search, 0, {c: 1 for c in PROBE_COLUMNS}, {"state": 1})
        committed.set()

    with read_transaction(db) as conn:
        conn.execute("SELECT COUNT(*) FROM search_probes").fetchone()  # the snapshot is taken: a SHARED lock
        writer = threading.Thread(target=write)
        writer.start()
        assert committed.wait(60), "the write waited for the reader"
        # the reader still sees its snapshot, without the new row
        assert conn.execute("SELECT COUNT(*) FROM search_probes WHERE search_id = ?", (search,)).fetchone()[0] == 0
    writer.join()


def test_no_page_of_the_server_refers_to_another_site(api):
    """The page and its assets name no external URL; FastAPI's CDN-loaded /docs is off.
    Mutations caught: a CDN script in the page; docs_url left at its default."""
    import re
    page = api.get("/").text
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    for asset in re.findall(r"(?:src|href)=\"(/assets/[^\"]+)\"", page):
        body = api.get(asset)
        assert body.status_code == 200
        if asset.endswith((".js", ".css")) and "plotly" not in asset:
            assert not re.search(r"https?://", body.text), asset
    assert api.get("/docs").status_code == 404 and api.get("/openapi.json").status_code == 200


def test_a_plan_stored_without_its_plane_is_computed_again_and_says_so(stores, tmp_path):
    """A decision from before planes were stored (its decision_planes row removed): the plane is
    computed again from the profile and the page is told. Mutations caught: a missing plane read
    as an empty one; the recomputed plane from another profile (another front)."""
    from thrifty.serve import plans
    from thrifty.serve.stores import ThriftyDb
    db = copy_db(stores["db"], tmp_path / "old.db")
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM decision_planes")
    old = ThriftyDb(0, db)
    newest_cost = next(p for p in old.plans() if p["request"]["objective"] == "cost")
    again = plans.plane(old, newest_cost)
    assert again["plane_source"] == "recomputed" and again["matches_stored"] is True
    keys = ("instance_type", "nodes", "workers", "global_batch", "spot")
    assert [{k: d[k] for k in keys} for d in again["pareto"]] == [
        {k: d[k] for k in keys} for d in stores["plan"]["pareto"]]
    assert "mismatch_reason" not in again
    # a stored recommendation of a V100, which no plan makes any more (catalog.torch_cuda), says why
    # it is not made again (mutation caught: no reason given)
    v100 = {**newest_cost, "recommended": {**newest_cost["recommended"], "cloud": "aws", "instance_type": "p3.2xlarge",
                                             "accelerator": "V100"}}
    moved = plans.plane(old, v100)
    assert moved["matches_stored"] is False and moved["mismatch_reason"].startswith("its V100 is no longer offered")


def test_a_watched_jobs_id_stays_when_another_folder_appears(tmp_path):
    """A stop names a job by id: the id must not move to another job when a folder appears before
    it in the listing (a new user's stop of j0-3 stopped the job in ckA, listed there once ckA
    appeared). Mutation caught: ids by position in the listing."""
    from thrifty.serve.watched import EVENTS, scan
    (tmp_path / "ckB").mkdir()
    (tmp_path / "ckB" / EVENTS).write_text("")
    (_, before) = scan([tmp_path])
    (tmp_path / "ckA").mkdir()
    (tmp_path / "ckA" / EVENTS).write_text("")
    (_, after) = scan([tmp_path])
    (b_id,) = before
    assert after[b_id].folder.name == "ckB" and len(after) == 2


def test_a_jobs_checkpoints_are_those_taken_not_the_files_kept(tmp_path):
    """The runner keeps two checkpoint files of the 51 it took: the Jobs panel said 2. Mutation
    caught: the count of files on disk."""
    import json

    from thrifty.serve.watched import EVENTS, Job
    lines = [{"event": "start", "attempt": 1, "pid": 999999999}] + [{"event": "checkpoint", "file": f"ckpt-{i:06d}.bin"}
                                                                      for i in range(5)]
    (tmp_path / EVENTS).write_text("".join(json.dumps(e) + "\n" for e in lines))
    (tmp_path / "ckpt-000004.bin").write_bytes(b"THRIFTY1")
    state = Job("j0-x", tmp_path, "x").state()
    assert state["checkpoints"] == 5 and state["checkpoints_kept"] == 1


def test_a_database_gone_while_serving_is_a_json_503_and_health_says_so(stores, tmp_path, caplog):
    """A new user's pass: a served database deleted (or replaced by something else) while serve
    ran gave a bare 500 with a traceback, and health still read "ok". Mutations caught: no
    sqlite3.Error handler (the test client raises); health not looking at the databases."""
    db = copy_db(stores["db"], tmp_path / "served.db")
    api = client(dbs=(db,))
    assert api.get("/api/plans").status_code == 200
    for replace_with in (None, b"not a database at all, " * 100):
        for path in db.parent.glob(db.name + "*"):
            path.unlink()
        if replace_with is not None:
            db.write_bytes(replace_with)
        with caplog.at_level(logging.WARNING, logger="thrifty.serve.app"):
            response = api.get("/api/plans")
        assert response.status_code == 503 and f"served database {db} cannot be read" in response.json()["error"]
        health = api.get("/api/health").json()
        assert health["status"] == "degraded" and health["unreadable_databases"] == [str(db)]


def test_watched_folders_are_named_by_their_path_below_the_watched_root(tmp_path):
    """A new user's pass: four search work folders' training runs were all listed as "run".
    Mutation caught: the folder's own name."""
    from thrifty.serve.watched import scan
    for search in ("sl1", "sl2"):
        run = tmp_path / search / "run"
        run.mkdir(parents=True)
        (run / "steps.csv").write_text("step\n")
    runs, _ = scan([tmp_path])
    assert sorted(r.summary()["name"] for r in runs.values()) == ["sl1/run", "sl2/run"]
    only, _ = scan([tmp_path / "sl1" / "run"])
    assert [r.summary()["name"] for r in only.values()] == ["run"]  # the watched folder itself
