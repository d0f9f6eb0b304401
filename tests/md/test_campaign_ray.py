# SPDX-License-Identifier: MIT
"""Campaigns on Ray's multi-node test cluster (the session's, 2 one-CPU nodes, all on 127.0.0.1):
a killed node loses nothing, a killed driver loses nothing, nothing listens beyond loopback."""

import contextlib
import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_tree import descendants

from thrifty.md.campaign.checkpoint_schedule import CheckpointPlan, ScheduledCheckpoints
from thrifty.md.campaign.point_samplers import GridSampler
from thrifty.md.campaign.runner import CampaignConfig, run_campaign
from thrifty.md.campaign.standin import StandIn
from thrifty.md.campaign.store import CampaignStore
from thrifty.md.space import parse_space
from thrifty.transient.registry import load_model

pytestmark = pytest.mark.timeout(400)  # a hang guard: Ray under a loaded suite takes minutes
SRC = str(Path(__file__).resolve().parents[2] / "src")




def _ours_listening(root: int) -> list[str]:
    """Local addresses of the listening TCP sockets of `root` and its descendants (ss -tlnp)."""
    ours = descendants(root)
    lines = subprocess.run(["ss", "-tlnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    return [line.split()[3] for line in lines
            if any(int(pid) in ours for pid in re.findall(r"pid=(\d+)", line))]


@pytest.fixture()
def cluster(ray_pool):
    """The session's emulated pool (tests/md/conftest.py): 2 one-CPU nodes on 127.0.0.1."""
    return ray_pool


def _uninterrupted(params: dict, where: Path) -> dict:
    return StandIn(chunk_wall_s=0.0)(params, where, ScheduledCheckpoints(where / "ck", []))


def _resumed_attempts(run_dir: Path) -> int:
    return sum(json.loads(p.read_text())["resumed"] for p in (run_dir / "attempts").glob("*.json"))


def _resumed_whenever_saved(run_dir: Path) -> bool:
    """Every attempt after one that had saved a checkpoint resumed (only a run killed before its
    first checkpoint may start again from step 0)."""
    logs = [json.loads(p.read_text()) for p in sorted((run_dir / "attempts").glob("*.json"))]
    return all(after["resumed"] for i, after in enumerate(logs[1:]) if any(log["saves"] for log in logs[:i + 1]))


def test_nothing_of_the_cluster_listens_beyond_loopback(cluster):
    addresses = _ours_listening(os.getpid())
    assert len(addresses) >= 5  # GCS, raylets, object managers...: the check is not vacuous
    assert all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for a in addresses), addresses


def test_a_killed_node_loses_nothing(cluster, tmp_path, caplog):
    # mutations caught: a retry that does not resume from its run's checkpoint (checked: the runner
    # removing a run's checkpoints before a later attempt; an attempt after a save not resumed); a
    # node's death failing the campaign (max_retries=0); a retried run stored twice (the counts below);
    # a stored run not logged, or logged with other attempts than the store's
    pool, _ = cluster
    _, model = load_model("gcp-2019")
    # a checkpoint after every chunk at any node age (the DP's intervals in microseconds), so the
    # kill lands early in the runs whatever the age of the session's nodes
    plan = CheckpointPlan(model, 3 * 3600, time_scale=1e9)
    space = parse_space("[h]\nvalues = [3.2, 3.5]\n[c]\nvalues = [0.5, 0.35]\n")  # 72 to 116 chunks a run
    work, killed = tmp_path / "runs", []
    ticks = pool.tick

    def tick():  # once a run has checkpointed, every node is preempted (SIGKILL) and replaced
        if not killed and any(work.glob("*/checkpoints/ckpt-*.bin")):
            for node in list(pool.ages_model_s()):
                killed.append(pool.preempt(node))
        ticks()

    pool.tick = tick
    try:
        with CampaignStore(tmp_path / "c.db") as store:
            store.begin({"test": "node"})
            # Ray places the runs (this pool's nodes outlive the model's 24 h, so SciSpot placement
            # would retire them all: tests/md/test_campaign_parts.py checks placement)
            # 0.03 s a chunk: a run lasts 2-3.5 s, so a driver starved on a loaded machine still kills
            # the checkpointed run before it ends (at 0.01 s it can finish first: the likely cause of one
            # failure in a loaded full suite)
            with (caplog.at_level(logging.INFO, logger="thrifty.md.campaign.runner"),
                  caplog.at_level(logging.INFO, logger="thrifty.md.campaign.pool")):
                report = run_campaign(CampaignConfig(3, work, plan, 2), GridSampler(space),
                                      StandIn(chunk_wall_s=0.03), store, pool)
    finally:
        pool.tick = ticks
    assert killed and report.preemptions >= 2, report.summary()
    assert report.completed == 3 and report.duplicates == 0, report.summary()
    rows = sqlite3.connect(tmp_path / "c.db").execute("SELECT run_id, COUNT(*) FROM md_campaign_runs GROUP BY run_id")
    assert [n for _, n in rows] == [1, 1, 1]
    for run in report.runs:  # bit-identical to a run nobody interrupted
        assert run["result"] == _uninterrupted(run["params"], tmp_path / "ref" / run["run_id"])
    interrupted = [r for r in report.runs if r["attempts"] > 1]
    assert interrupted, ("the kill hit no run", report.runs)
    assert all(_resumed_whenever_saved(work / r["run_id"]) for r in interrupted)  # resumed, not restarted
    assert any(_resumed_attempts(work / r["run_id"]) for r in interrupted)  # the checkpointed run, at least
    said = sorted(r.getMessage().split(",")[0] for r in caplog.records if r.getMessage().startswith("stored run"))
    assert said == sorted(f"stored run {r['run_id']} after {r['attempts']} attempt(s)" for r in report.runs)
    preempted = [r.getMessage() for r in caplog.records if r.name == "thrifty.md.campaign.pool"]
    assert len(preempted) == len(killed) and all(" preempted (SIGKILL) after " in m for m in preempted)


def test_a_killed_driver_loses_nothing(cluster, tmp_path):
    # mutations caught: a restarted driver that recomputes a checkpointed run from step 0 (checked: the
    # runner removing a run's checkpoints before a later attempt; no resumed attempt), or stores again
    # what the first driver stored (stored_now, duplicates); a result that differs from an
    # uninterrupted run's
    pool, tmp = cluster
    space = tmp_path / "space.toml"
    space.write_text("[h]\nvalues = [3.2, 3.5]\n[c]\nvalues = [0.5, 0.35]\n")  # 72 to 116 chunks: 2 to 3 s a run
    db, work = tmp_path / "c.db", tmp_path / "runs"
    # --time-scale 1e9: the DP's intervals in microseconds, a checkpoint after every chunk
    command = [sys.executable, "-m", "thrifty.cli", "md", "sweep", "--space", str(space), "--budget-runs", "4",
               "--db", str(db), "--work-dir", str(work), "--pool", "spot:2", "--address", pool.cluster.address,
               "--simulation", "standin", "--time-scale", "1e9", "--json"]
    env = {**os.environ, "PYTHONPATH": SRC, "RAY_TMPDIR": str(tmp)}
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def stored() -> set[str]:
        try:
            # read-only: a plain connect creates the file, empty, before the driver does, and the
            # driver refuses an empty file as a database that is not one
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
                return {r[0] for r in conn.execute("SELECT run_id FROM md_campaign_runs")}
        except sqlite3.OperationalError:
            return set()

    def checkpointed() -> set[str]:
        return {p.parts[-3] for p in work.glob("*/checkpoints/ckpt-*.bin")}

    # kill the driver once it has stored a run while another has checkpointed: the driver is frozen
    # (SIGSTOP) while the two are read, so that what it stored at the kill is exactly what was read
    # (its runs go on on the cluster; only the driver stores)
    deadline, at_kill = time.monotonic() + 100, set()
    try:
        while time.monotonic() < deadline and first.poll() is None:
            if stored() and checkpointed() - stored():
                first.send_signal(signal.SIGSTOP)
                before = stored()
                at_kill = checkpointed() - before
                if before and at_kill:
                    break
                first.send_signal(signal.SIGCONT)
            time.sleep(0.02)
        assert first.poll() is None and at_kill, "the first driver finished before it could be killed"
    finally:
        first.send_signal(signal.SIGKILL)  # the driver's machine is gone; the cluster lives on
        first.wait()
    assert stored() == before
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    report = json.loads(second.stdout[second.stdout.rindex("\n{") if "\n{" in second.stdout else 0:])
    assert report["completed"] == 4 and report["resumed"] is True
    assert report["stored_now"] == 4 - len(before) and report["duplicates"] == 0
    rows = list(sqlite3.connect(db).execute("SELECT run_id, params_json, result_json FROM md_campaign_runs"))
    assert len(rows) == len({r[0] for r in rows}) == 4
    # every run that had a checkpoint and was not stored when the driver died resumed from it
    assert all(_resumed_attempts(work / run_id) >= 1 for run_id in at_kill), at_kill
    assert all(_resumed_whenever_saved(work / r[0]) for r in rows)
    for run_id, params, result in rows:
        assert json.loads(result) == _uninterrupted(json.loads(params), tmp_path / "ref" / run_id)
    # the killed driver's session has no end and no bill; the second's bill is the one it printed
    # (mutations caught: md sweep not ending its session; a bill stored other than the report's)
    with CampaignStore(db) as store:
        killed, finished = store.sessions()
    assert killed["ended_at"] is None and killed["bill"] is None
    assert finished["bill"] == {k: report[k] for k in finished["bill"]} and finished["bill"]["node_hours_model"] > 0


def test_a_terminated_driver_has_its_runs_in_flight_checkpoint_says_why_and_bills_its_session(cluster, tmp_path):
    """SIGTERM stops md sweep as Ctrl-C does, after its runs in flight checkpoint: at a time scale of 1
    the schedule would save none for half an hour, yet every run it leaves unstored has a checkpoint,
    and the same command resumes them. Ray shut down, the session ended with its bill, exit code 143.
    Mutations caught: the notice file not written, or not read by the tasks' schedules (no checkpoint:
    the next driver starts them over); Ray's own SIGTERM handler left in place (a C++ crash dump, an
    abort, a session with no end); the session ended after the shutdown only."""
    pool, tmp = cluster
    space = tmp_path / "space.toml"
    space.write_text("[h]\nvalues = [3.2, 3.5, 3.8]\n[c]\nvalues = [0.5, 0.35]\n")
    db, runs = tmp_path / "c.db", tmp_path / "runs"
    command = [sys.executable, "-m", "thrifty.cli", "md", "sweep", "--space", str(space), "--budget-runs", "6",
               "--db", str(db), "--work-dir", str(runs), "--pool", "spot:2", "--address",
               pool.cluster.address, "--simulation", "standin", "--time-scale", "1", "--json"]
    env = {**os.environ, "PYTHONPATH": SRC, "RAY_TMPDIR": str(tmp)}
    driver = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and driver.poll() is None and not list(runs.glob("*/attempts/*")):
            time.sleep(0.05)  # its runs started: Ray is up in the driver
        assert driver.poll() is None, "the driver ended before it could be stopped"
        driver.send_signal(signal.SIGTERM)
        _, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 128 + signal.SIGTERM, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == "error: terminated" and "in flight checkpoint first" in lines[0], err[-2000:]
    with CampaignStore(db) as store:
        (session,) = store.sessions()
        stored = {r["run_id"] for r in store.completed()}
    assert session["ended_at"] is not None and session["bill"]["node_hours_model"] > 0
    started = {d.name for d in runs.iterdir() if (d / "attempts").is_dir()}
    left = started - stored
    # a stand-in run here takes 72-116 chunks of at least 0.02 s; a stop that waits its grace (25 s) out instead of
    # seeing checkpoints (the mutations above) lets every run finish and be stored
    assert left, "every started run finished before the stop: the runs in flight did not checkpoint"
    assert all(list((runs / r / "checkpoints").glob("ckpt-*.bin")) for r in left), left
    assert not (runs / ".stopping").exists()  # the notice is gone: the next driver's runs follow their schedule
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert all(_resumed_attempts(runs / r) >= 1 for r in left), left


LOOPBACK_CHECK = """
import json, subprocess, sys, types
sys.path[:0] = sys.argv[1:3]
import ray  # imported first, as md sweep did before the embedded start
from process_tree import descendants
from thrifty.md.campaign.sweep import init_ray
from ray._private import ray_constants, services
init_ray(types.SimpleNamespace(address=None, pool="spot:1"), None, 1)  # md sweep's embedded Ray
ours = descendants(__import__("os").getpid())
lines = subprocess.run(["ss", "-tlnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
listening = [l.split()[3] for l in lines if any(f"pid={p}," in l for p in ours)]
print(json.dumps({"listening": listening, "cluster_flag": ray_constants.ENABLE_RAY_CLUSTER,
                  "node_ip": services.get_node_ip_address()}))
ray.shutdown()
"""


@pytest.mark.timeout(200)
def test_md_sweeps_embedded_ray_listens_on_loopback_only_though_ray_was_imported_first():
    # mutation caught: loopback_ray setting the environment variable alone (Ray, imported before,
    # had read it: every server listened on 0.0.0.0 or the outward address)
    import shutil
    import tempfile
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    try:
        done = subprocess.run([sys.executable, "-c", LOOPBACK_CHECK, SRC, str(Path(__file__).parent)],
                              capture_output=True, text=True, timeout=180, env={**os.environ, "RAY_TMPDIR": ray_tmp})
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["cluster_flag"] is False and found["node_ip"] == "127.0.0.1"
    assert len(found["listening"]) >= 3  # GCS, raylet, object manager...: the check is not vacuous
    assert all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for a in found["listening"]), found["listening"]
