# SPDX-License-Identifier: MIT
"""`thrifty train` with real processes: adaptation, resume equivalence, a dying worker, ASP."""

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from processes import local_ranks

from thrifty.checkpoint_file import CheckpointError, load_state
from thrifty.records import RunLog
from thrifty.train.hetero import SlowdownSchedule, parse_slowdown
from thrifty.train.policies import ControllerSettings
from thrifty.train.trainer import TrainConfig, run_training
from thrifty.transient.protocol import checkpoint_files

BASE = TrainConfig(workers=2, global_batch=64, progress=False, b_max=64, timeout_s=600)  # a hang guard, not a speed


def _newest(run_dir: Path) -> dict:
    return load_state(checkpoint_files(run_dir)[-1])


def _final_params(run_dir: Path) -> dict:
    return _newest(run_dir)["model"]


@pytest.mark.timeout(300)
def test_dynamic_policy_follows_a_speed_change(tmp_path):
    """Rank 0 is 4x slower for 30 steps, then rank 1: rank 1's share swings from towards 4/5 of 64 to
    towards 1/5. Each phase holds a 4x difference rather than equal speeds, whose even split timing
    noise alone moved to 15 of 32 on a loaded machine (README, limitations).
    Mutations caught (tried): the schedule's change ignored (SlowdownSchedule.at keeps the first
    segment: rank 1 keeps its large share); the controller's speed estimate inverted (1 / r_k)."""
    schedule = SlowdownSchedule(((0, (4.0, 1.0)), (30, (1.0, 4.0))))
    summary = run_training(replace(BASE, policy="dynamic", steps=90, slowdown=schedule, run_dir=tmp_path))
    log = RunLog.read(tmp_path)
    before = [r.local_batch for r in log.steps if r.rank == 1 and r.step == 29]
    after = [r.local_batch for r in log.steps if r.rank == 1 and r.step == 89]
    assert before[0] >= 38  # the faster rank's share rose from an even 32 towards 64 * 4/5 = 51
    # ... and fell, once it was 4x slower, towards 64/5 = 13, below an even 32 by a margin timing noise does not
    # reach (19 in a quiet run, 23 once in CI on a loaded machine: the bound leaves room for that, not for 32)
    assert after[0] <= 26
    assert summary["final_batch_sizes"][0] + summary["final_batch_sizes"][1] == 64
    assert summary["adjustments"] >= 1
    assert 0.0 <= summary["wait_fraction"] < 1.0
    for key in ("wall_time_s", "samples_per_s", "final_metric", "final_batch_sizes", "adjustments",
                "wait_fraction"):
        assert key in summary
    assert (tmp_path / "training.png").stat().st_size > 10_000
    assert len(log.steps) == 90 * 2


@pytest.mark.timeout(600)  # 110 s in a loaded suite
def test_resume_continues_from_the_checkpoint_with_the_controller_state(tmp_path):
    config = replace(BASE, policy="dynamic", steps=40, checkpoint_every=10, slowdown=parse_slowdown("1,4"),
                     controller=ControllerSettings(every=2), run_dir=tmp_path)
    run_training(replace(config, steps=20))
    first_part = RunLog.read(tmp_path).steps
    saved = _newest(tmp_path)
    assert saved["step"] == 20 and saved["policy"]["split"] != [32, 32]  # the controller had moved
    run_training(replace(config, resume=True))
    log = RunLog.read(tmp_path).steps
    # steps before the checkpoint were not computed again: their measured rows are unchanged
    assert [repr(r) for r in log if r.step < 20] == list(map(repr, first_part))  # repr: NaN == NaN
    assert [r.step for r in log if r.rank == 0] == list(range(40))
    # the controller continued from its saved split, not from B / n
    assert [r.local_batch for r in log if r.step == 20] == saved["policy"]["split"]
    assert _newest(tmp_path)["policy"]["adjustments"] >= saved["policy"]["adjustments"]


def _wait_for_checkpoint(run_dir: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not checkpoint_files(run_dir):
        assert time.monotonic() < deadline, f"no checkpoint appeared in {run_dir}"
        time.sleep(0.05)


def _cli(args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "thrifty.cli", *map(str, args)], **kwargs)


STEPS = 60
TRAIN_ARGS = ["train", "--nproc", "2", "--policy", "uniform", "--steps", str(STEPS), "--slowdown", "3,3",
              "--checkpoint-every", "10", "--b-max", "64", "--json"]


@pytest.mark.timeout(900)  # 194 s in a loaded suite
def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path, short_tmp):
    """The killed and the resumed run are `thrifty train` processes (kill -9 of the launcher's
    process group); the uninterrupted run they must match is TRAIN_ARGS in-process.
    Mutation caught (tried): a restore that drops the sampler's position (train.checkpoint.restore
    setting sample_offset to 0: the parameters differ)."""
    # the killed run's temporary folders (the forkserver's, the ranks') in short_tmp: it cannot remove them
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(short_tmp)}
    run_training(replace(BASE, policy="uniform", steps=STEPS, slowdown=parse_slowdown("3,3"), checkpoint_every=10,
                         run_dir=tmp_path / "whole"))
    killed = _cli([*TRAIN_ARGS, "--run-dir", tmp_path / "killed", "--db", tmp_path / "db"], env=env,
                  stdout=subprocess.DEVNULL, start_new_session=True)
    _wait_for_checkpoint(tmp_path / "killed", 120)
    time.sleep(0.5)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(30)
    step = _newest(tmp_path / "killed")["step"]
    assert 0 < step < STEPS
    # the log is written just before the checkpoint, so it may hold a few steps more
    checkpointed = [r for r in RunLog.read(tmp_path / "killed").steps if r.step < step]
    assert {r.step for r in checkpointed} == set(range(step))
    resumed = _cli([*TRAIN_ARGS, "--resume", "--run-dir", tmp_path / "killed", "--db", tmp_path / "db"],
                   env=env, stdout=subprocess.PIPE)
    out, _ = resumed.communicate(timeout=400)
    assert resumed.returncode == 0
    assert json.loads(out)["steps"] == STEPS
    a, b = _final_params(tmp_path / "whole"), _final_params(tmp_path / "killed")
    assert all(torch.equal(a[k], b[k]) for k in a)  # bit-identical to the uninterrupted run
    # ... and by continuing: the resumed process did not recompute the checkpointed steps
    assert [repr(r) for r in RunLog.read(tmp_path / "killed").steps if r.step < step] == list(map(repr, checkpointed))


@pytest.mark.timeout(300)
def test_a_dying_worker_stops_the_run_and_leaves_the_last_checkpoint(tmp_path):
    """In a run directory the run made itself: a failed run that wrote a checkpoint keeps it to
    resume from (mutation caught: the run directory removed on every failure)."""
    run_dir = tmp_path / "run"
    run = _cli([*TRAIN_ARGS, "--steps", "100000", "--run-dir", run_dir, "--db", tmp_path / "db"],
               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for_checkpoint(run_dir, 120)
    ranks = local_ranks(run.pid)
    deadline = time.monotonic() + 30
    while len(ranks) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        ranks = local_ranks(run.pid)
    os.kill(max(ranks), signal.SIGKILL)  # the second forked rank
    _, err = run.communicate(timeout=120)
    assert run.returncode == 2
    assert "died (killed by SIGKILL)" in err and "Traceback" not in err
    assert f"last checkpoint stays in {run_dir}: add --resume" in " ".join(err.split())
    assert _newest(run_dir)["step"] % 10 == 0  # intact and loadable


def test_corrupt_checkpoints_are_detected(tmp_path):
    from thrifty.checkpoint_file import dumps, encode
    path = tmp_path / "c.pt"
    path.write_bytes(encode(dumps({"x": torch.arange(5)})))
    assert torch.equal(load_state(path)["x"], torch.arange(5))
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum"):
        load_state(path)
    path.write_bytes(b"THRIFTY1")
    with pytest.raises(CheckpointError, match="truncated"):
        load_state(path)


@pytest.mark.timeout(900)  # 245 s in a loaded suite
def test_asp_runs_learns_and_records_staleness(tmp_path, capfd):
    from thrifty.train.asp import run_asp
    plain = run_asp(replace(BASE, policy="uniform", epochs=6, run_dir=tmp_path / "plain", slowdown=parse_slowdown("1,3")))
    # torch's rpc agent warns about its own gloo Backend: not on the user's stderr (mutation caught:
    # the filter removed, three warning blocks a run)
    assert "You are using a Backend" not in capfd.readouterr().err
    balanced = run_asp(replace(BASE, policy="dynamic", epochs=6, run_dir=tmp_path / "dyn", slowdown=parse_slowdown("1,3")))
    for summary in (plain, balanced):  # 6 epochs: 0.70-0.75 after 3, 0.8 is between
        assert summary["final_metric"] > 0.8
        assert sum(summary["staleness_histogram"]) == summary["updates"]
        assert (tmp_path / ("plain" if summary is plain else "dyn") / "updates.csv").exists()
    assert plain["final_batch_sizes"] == [32, 32]
    # the slow worker's batch is smaller, towards the floor of 16 (B / 2n): over the second half of
    # the updates, not at the last decision alone (16 in three quiet and three loaded runs here)
    with open(tmp_path / "dyn" / "updates.csv") as f:
        rows = list(csv.DictReader(f))
    slow = [int(r["local_batch"]) for r in rows[len(rows) // 2:] if r["worker"] == "1"]
    assert slow and statistics.median(slow) <= 24


def test_a_run_needs_a_checkpoint_to_resume(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        run_training(replace(BASE, steps=5, resume=True, run_dir=tmp_path))
