# SPDX-License-Identifier: MIT
"""`thrifty md sweep --engine torch --replicas R`: R points run as one batched torch job (one Ray task)
and are stored as R ordinary runs, each once, with the batched engine's profiles; a batch task killed
after a checkpoint resumes bit-identically on its retry; the CLI runs such a sweep; bad --engine/--replicas
are one line, exit 2. On the session's Ray cluster (tests/md/conftest.py)."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch_reference_sampling import sample_profiles

from thrifty.cli.app import main
from thrifty.md import profiles as prof
from thrifty.md.campaign import checkpoint_schedule as sim
from thrifty.md.campaign.checkpoint_schedule import CheckpointPlan
from thrifty.md.campaign.nanoconfinement_runs import NanoconfinementRuns, model_at
from thrifty.md.campaign.point_samplers import GridSampler, point_key
from thrifty.md.campaign.runner import CampaignConfig, batch_dir, run_batch, run_campaign
from thrifty.md.campaign.store import CampaignStore
from thrifty.md.sampling_settings import SamplingSettings
from thrifty.md.space import parse_space
from thrifty.transient.registry import load_model

torch.set_num_threads(1)
SRC = str(Path(__file__).resolve().parents[2] / "src")

BOX, CUTOFF = 2.4, 1.0  # 10 to 20 ions a replica
SAMPLING = SamplingSettings(chunk=20, equilibration_steps=40, samples_per_block=3, tolerance_molar=1e-9, cap_steps=200)
SMALL = NanoconfinementRuns(engine="torch", sampling=SAMPLING, box_nm=BOX, cutoff_nm=CUTOFF)
SPACE = parse_space("[h_nm]\nvalues = [2.0, 2.4]\n[c_molar]\nvalues = [0.8]\n[z_plus]\nvalues = [1, 2]\n")
OUTPUTS = ("profiles.csv", "thermo.csv", "summary.json", "params.json", "density_profile.csv")


@pytest.fixture()
def ray_here(ray_pool):
    """The session's Ray (tests/md/conftest.py: 2 one-CPU nodes, 127.0.0.1 only)."""
    return ray_pool


def _plan(time_scale: float = 3600.0) -> CheckpointPlan:
    return CheckpointPlan(load_model("gcp-2019")[1], 3 * 3600, time_scale=time_scale)


def _batched_csv(points: list[dict], path) -> list[str]:
    """profiles.csv of each point from torch_reference_sampling.sample_profiles (the plain reference loop) on the same batch."""
    found = sample_profiles([model_at(p, BOX, CUTOFF) for p in points], SAMPLING.cap_steps,
                            SAMPLING.equilibration_steps, SAMPLING.chunk, SAMPLING.samples_per_block, SMALL.seed)
    texts = []
    for i, p in enumerate(found):
        prof.write_csv(path / f"ref-{i}.csv", p, ("cation", "anion"))
        texts.append((path / f"ref-{i}.csv").read_text())
    return texts


@pytest.mark.timeout(300)
def test_a_torch_sweep_stores_each_point_once_with_the_batched_engines_profiles(ray_here, tmp_path):
    # mutations caught: the driver storing one batch result for every point (outs[0] for all: profiles
    # and counts differ), a replica sampling another replica's ions (z[0] for all), a partly stored
    # batch's stored point run or stored again (stored_now, the kept dummy result)
    points = GridSampler(SPACE).next_points([], 4)
    work = tmp_path / "runs"
    with CampaignStore(tmp_path / "c.db") as store:
        store.begin({"test": "torch"})
        # a driver died after storing the first point of its batch: the rest form new batches
        store.record_run(point_key(points[0]), points[0], {"steps": 0, "converged": False}, 1, 0.0)
        report = run_campaign(CampaignConfig(4, work, _plan(), concurrency=1, replicas=2), GridSampler(SPACE),
                              SMALL, store)
    assert report.completed == 4 and report.stored_now == 3 and report.duplicates == 0, report.summary()
    rows = list(sqlite3.connect(tmp_path / "c.db").execute("SELECT run_id, result_json FROM md_campaign_runs"))
    assert sorted(r[0] for r in rows) == sorted(point_key(p) for p in points)
    assert json.loads(dict(rows)[point_key(points[0])]) == {"steps": 0, "converged": False}
    expected = _batched_csv(points[1:3], tmp_path) + _batched_csv(points[3:], tmp_path)
    for point, text in zip(points[1:], expected, strict=True):
        run = work / point_key(point)
        assert all((run / name).exists() for name in OUTPUTS)
        assert (run / "profiles.csv").read_text() == text
        summary = json.loads((run / "summary.json").read_text())
        assert summary["steps"] == 200 and summary["engine"] == "torch" and summary["stopped"] == "cap"
        stored = json.loads(dict(rows)[point_key(point)])  # the store holds this point's own result
        assert stored == summary | {"converged": False, "settings": stored["settings"]}
    assert not (work / point_key(points[0])).exists()


@pytest.mark.timeout(240)
def test_a_batch_task_killed_after_a_checkpoint_resumes_bit_identically_on_its_retry(ray_here, tmp_path,
                                                                                      monkeypatch):
    # mutation caught: the generator's state not restored on resume (thermo, profiles and final
    # state differ from the straight run); the retry not finding its batch's checkpoints (resumed False)
    points = GridSampler(SPACE).next_points([], 2)
    plan = _plan(time_scale=1e9)  # the DP schedule's intervals in microseconds: a checkpoint every chunk
    straight = run_batch(SMALL, points, str(tmp_path / "straight"), plan, None)
    due, calls = sim.ScheduledCheckpoints.due, []

    class Killed(Exception):
        """The node dies: nothing after it reaches the disk."""

    def dying_due(self) -> bool:
        calls.append(1)
        if len(calls) == 5:
            raise Killed
        return due(self)

    monkeypatch.setattr(sim.ScheduledCheckpoints, "due", dying_due)
    with pytest.raises(Killed):
        run_batch(SMALL, points, str(tmp_path / "killed"), plan, None)
    retried = run_batch(SMALL, points, str(tmp_path / "killed"), plan, None)
    assert all(out["attempts"] == 2 and out["resumed"] for out in retried)
    assert [o["result"] for o in retried] == [o["result"] for o in straight]
    logs = sorted((batch_dir(tmp_path / "killed", [point_key(p) for p in points]) / "attempts").glob("*.json"))
    assert json.loads(logs[0].read_text())["saves"] >= 3  # it had checkpointed before it died
    # the batch redid its work once: its points' shares add up to it (mutation caught: each point
    # reporting the batch's whole lost work, which the campaign sums R times)
    _, batch_lost_s, _ = sim.lost_work(logs[0].parent)
    assert sum(o["lost_work_s"] for o in retried) == pytest.approx(batch_lost_s)
    for point in points:
        for name in OUTPUTS:
            a, b = (tmp_path / w / point_key(point) / name for w in ("straight", "killed"))
            assert a.read_text() == b.read_text(), name


@pytest.mark.parametrize("extra, reason", [
    (["--replicas", "2"], "add --engine torch"),
    (["--engine", "torch", "--replicas", "0"], "--replicas must be a positive integer"),
    (["--engine", "torch", "--replicas", "2", "--simulation", "standin"],
     "--engine torch runs --simulation nanoconfinement only"),
    (["--engine", "jax", "--simulation", "nanoconfinement"], "unknown --engine"),
    (["--dtype", "float32", "--simulation", "nanoconfinement"], "--dtype and --device apply to --engine torch"),
    (["--engine", "torch", "--simulation", "nanoconfinement", "--dtype", "float16"], "unknown --dtype"),
    (["--engine", "torch", "--simulation", "nanoconfinement", "--device", "tpu"], "unknown --device"),
    pytest.param(["--engine", "torch", "--simulation", "nanoconfinement", "--device", "cuda"], "no CUDA device here",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
])
@pytest.mark.timeout(180)
def test_bad_engine_or_replicas_are_one_line_and_exit_2(tmp_path, capsys, extra, reason):
    # mutations caught (each checked by hand): each refusal removed (the sweep goes on: Ray starts, openmm runs
    # its points unbatched, or the torch engine runs at the model's full length)
    space = tmp_path / "space.toml"
    space.write_text("[h_nm]\nvalues = [2.0]\n")
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "1", "--db", str(tmp_path / "c.db"), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and reason in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "c.db").exists()


@pytest.mark.timeout(180)
def test_a_ray_client_address_without_ray_client_is_one_line_and_leaves_no_database(tmp_path, capsys, monkeypatch):
    # mutation caught: check_address not called (ray.init's ValueError traceback, after the store was written)
    monkeypatch.setitem(sys.modules, "grpc", None)  # Ray Client's package missing, as in a fresh install
    space = tmp_path / "space.toml"
    space.write_text("[h_nm]\nvalues = [2.0]\n")
    code = main(["md", "sweep", "--space", str(space), "--budget-runs", "1", "--db", str(tmp_path / "c.db"),
                 "--address", "ray://127.0.0.1:10001"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "needs pip install 'ray[client]'" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "c.db").exists() and not (tmp_path / "c.runs").exists()


CLI_SWEEP = """
import sys
from thrifty.cli.app import main
from thrifty.md.sampling_settings import SamplingSettings
# chunk and block size at test size (no CLI options): the defaults of the settings the CLI makes (test-only)
SamplingSettings.__init__.__defaults__ = (None, 20, 20_000, 3, 0.002, 200_000, 0.1)
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.timeout(300)
def test_the_cli_runs_a_torch_sweep_as_batches_of_replicas(ray_here, tmp_path):
    # mutations caught: --replicas not passed to the campaign (two tasks of one point: two batch folders);
    # --dtype not passed to the batch (float64 runs); the run settings not passed (a 200,000-step cap).
    # The CLI joins the session's cluster (--address): no Ray start of its own (the embedded one:
    # tests/serve/conftest.py's sweep)
    pool, tmp = ray_here
    space = tmp_path / "space.toml"
    space.write_text("[h_nm]\nvalues = [2.0, 2.4]\n[c_molar]\nvalues = [0.8]\n")
    done = subprocess.run([sys.executable, "-c", CLI_SWEEP, "md", "sweep", "--space", str(space), "--budget-runs", "2",
                           "--db", str(tmp_path / "c.db"), "--work-dir", str(tmp_path / "runs"), "--pool", "spot:1",
                           "--address", pool.cluster.address,
                           "--simulation", "nanoconfinement", "--engine", "torch", "--replicas", "2", "--dtype", "float32", "--equilibrate", "40",
                           "--tolerance", "1e-9", "--cap-steps", "200", "--box-nm", "2.4", "--cutoff-nm", "1.0", "--json"],
                          capture_output=True, text=True, timeout=280,
                          env={**os.environ, "PYTHONPATH": SRC, "RAY_TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)  # one JSON document on stdout (Ray's own lines go to stderr)
    assert report["completed"] == 2 and report["stored_now"] == 2 and report["duplicates"] == 0
    assert report["time_scale"] == 1.0  # not emulated: billed in wall time
    assert len(list((tmp_path / "runs").glob("batch-*"))) == 1
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/summary.json")]
    assert len(summaries) == 2 and all(s["replicas"] == 2 and s["dtype"] == "float32" and s["steps"] == 200
                                       for s in summaries)
