# SPDX-License-Identifier: MIT
"""Stores made by real commands, shared by the serve tests (session fixtures): a thrifty database
with a profile, a plan, a sim search and a short training run; a campaign database of a stand-in
`md sweep` on Ray; a surrogate of `md train-surrogate`. The training run is a `thrifty train` process of its
own, as is the sweep; the other commands run in this process (`run_main`, as the CLI tests' run_cli does): what a
store holds does not depend on the process that wrote it, and test_live.py runs `thrifty serve`,
`search`, `run` and `train` in their own processes. And a live
`thrifty serve` on a free loopback port."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from serve_support import MD_TESTS, PYTHON, SEARCH, env, run_main

from built_once import built_once

sys.path.insert(0, str(MD_TESTS))  # standin_profiles: the surrogate's test fixture

pytest.importorskip("fastapi")
pytest.importorskip("plotly")


RAY_START_FAILED = "timed out during startup"  # Ray waits 30 s for its raylet, fixed (ray._private.node)


def cli(*args, timeout: float = 600) -> str:
    """A real thrifty command in its own process; its stdout."""
    done = subprocess.run([PYTHON, "-m", "thrifty.cli", *map(str, args)], env=env(), capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="session")
def trace_csv(tmp_path_factory) -> Path:
    from thrifty.search.synthetic import VMSpec, synthetic_trace
    from thrifty.search.trace import write_trace
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    write_trace(path, synthetic_trace([VMSpec("small", 0.2, 1.0), VMSpec("mid", 0.4, 2.2), VMSpec("big", 0.8, 3.0)],
                                      [1, 2, 4, 8], [64, 128, 256, 512, 1024]))
    return path




@pytest.fixture(scope="session")
def stores(profiled_db, trace_csv, tmp_path_factory) -> dict:
    """thrifty.db: a profile (conftest's profiled_db), a plan from it, a sim search, a training
    run of 12 steps on two ranks, one three times slower (sleep emulation). Built once per test run
    (tests/built_once.py); the database is this worker's copy, the run folders shared (read only)."""
    import shutil

    def build(folder: Path) -> None:
        db = folder / "thrifty.db"
        shutil.copy(profiled_db, db)
        plan = run_main("plan", "--db", db, "--plot", folder / "plan.png", "--json")
        (folder / "plan.json").write_text(plan)
        run_main("search", "--backend", "sim", "--trace", trace_csv, *SEARCH, "--db", db, "--json")
        cli("train", "--db", db, "--steps", "12", "--nproc", "2", "--slowdown", "1,3", "--adjust-every", "2",
            "--checkpoint-every", "4", "--run-dir", folder / "runs" / "train1", "--json")

    folder = built_once(tmp_path_factory, "serve-stores", build)
    db = tmp_path_factory.mktemp("stores") / "thrifty.db"
    shutil.copy(folder / "thrifty.db", db)
    return {"db": db, "folder": folder, "runs": folder / "runs", "plan": json.loads((folder / "plan.json").read_text())}


SPACE = """[h_nm]
min = 3.0
max = 4.0
points = 2
[z_plus]
values = [1, 2]
[z_minus]
values = [-1]
[c_molar]
values = [0.5]
[d_plus_nm]
values = [0.474]
[d_minus_nm]
values = [0.627]
"""


@pytest.fixture(scope="session")
def campaign(tmp_path_factory) -> Path:
    """A campaign of 4 runs of the test simulation above, by `md sweep --pool spot:2` on Ray (its
    own local cluster, 127.0.0.1), which stores the runs and its session's bill. Built once per
    test run (tests/built_once.py); each worker reads its own copy.

    Ray waits a fixed 30 s for its raylet to register (ray._private.node); on a machine loaded far
    beyond its cores it does not start at all. Then, with a warning, the same 4 runs and a session
    are stored as md sweep stores them (md.campaign.store.CampaignStore), each run simulated in this
    process instead of a Ray task."""
    import shutil
    import warnings

    def build(folder: Path) -> None:
        (folder / "space.toml").write_text(SPACE)
        db = folder / "campaign.db"
        try:
            cli("md", "sweep", "--space", folder / "space.toml", "--budget-runs", "4", "--db", db, "--pool",
                "spot:2", "--simulation", "profile_campaign_sim:run", "--json")
        except AssertionError as exc:
            if RAY_START_FAILED not in str(exc):
                raise
            warnings.warn("Ray did not start on this loaded machine: the campaign is stored without it", stacklevel=1)
            _store_without_ray(db, folder / "space.toml", 4)

    copy = tmp_path_factory.mktemp("campaign")  # this worker's: the database and its run folders
    shutil.copytree(built_once(tmp_path_factory, "serve-campaign", build), copy, dirs_exist_ok=True)
    return copy / "campaign.db"


def _store_without_ray(db: Path, space_file: Path, runs: int) -> None:
    from profile_campaign_sim import run

    from thrifty.md.campaign.point_samplers import make_sampler, point_key
    from thrifty.md.campaign.store import CampaignStore
    from thrifty.md.space import load_space
    from thrifty.transient.protocol import JobCheckpoints
    space = load_space(space_file)
    with CampaignStore(db, "default") as store:  # the request md sweep stores for these options
        store.begin({"space": space.to_dict(), "sampler": "grid", "seed": 0, "simulation": "profile_campaign_sim:run"})
        session, began = store.begin_session("spot:2", SWEEP_INSTANCE_TYPE), time.time()
        for params in make_sampler("grid", space, 0).next_points([], runs):
            work = db.with_suffix(".runs") / point_key(params)
            result = run(params, work, JobCheckpoints(work / "checkpoints", handle_signals=False))
            store.record_run(point_key(params), params, result, attempts=1, lost_work_s=0.0)
        store.end_session(session, campaign_bill(began))


SWEEP_INSTANCE_TYPE = "n1-standard-4"  # md sweep's default --instance-type


def campaign_bill(began: float) -> dict:
    """md sweep's bill for two spot nodes that lived from `began` to now (md.campaign.pool.bill)."""
    from thrifty.catalog import load_catalog
    from thrifty.catalog.names import find_type
    from thrifty.md.campaign.pool import NodeLife, bill
    now = time.time()
    return bill([NodeLife(str(i), began, now) for i in range(2)], find_type(load_catalog(), SWEEP_INSTANCE_TYPE, "gcp")[0],
                1.0, now)


@pytest.fixture(scope="session")
def surrogate(tmp_path_factory) -> Path:
    """`md train-surrogate` on stand-in runs spanning the campaign's box (2 networks, 10 epochs, the
    band calibrated over 2 folds: the serve tests compare the API with the model, not its accuracy)."""
    from standin_profiles import standin_runs, write_run

    from thrifty.md.params import ParameterBox
    root = tmp_path_factory.mktemp("surrogate")
    box = ParameterBox(low=(3.0, 1, -1, 0.3, 0.2, 0.2), high=(4.0, 3, -1, 0.9, 0.63, 0.63))
    points = np.vstack([box.low, box.high, box.sample(10, np.random.default_rng(0))])
    for run in standin_runs(points, 1):
        write_run(root / "runs" / run.name, run)
    run_main("md", "train-surrogate", "--runs", root / "runs", "--out", root / "model", "--members", "2",
        "--max-epochs", "10", "--folds", "2", "--json")
    return root / "model"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, args: list, env_extra: dict | None = None) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([PYTHON, "-m", "thrifty.cli", "serve", "--port", str(self.port), *map(str, args)],
                                     env=env(**(env_extra or {})), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self.wait_ready()

    def wait_ready(self, timeout_s: float = 120) -> None:
        import urllib.request
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"thrifty serve exited: {self.proc.stderr.read()}")
            try:
                urllib.request.urlopen(self.url + "/api/health", timeout=2).read()
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("thrifty serve did not answer")

    def close(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@pytest.fixture()
def serve_process():
    started = []

    def start(*args, env_extra=None) -> Served:
        served = Served(list(args), env_extra)
        started.append(served)
        return served
    yield start
    for served in started:
        served.close()


