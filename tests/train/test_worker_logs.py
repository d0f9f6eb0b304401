# SPDX-License-Identifier: MIT
"""What local worker processes log reaches the launcher's loggers (train.worker_logs): the CLI's
`-v`, caplog, a library user's handlers; and `thrifty train` logs its start, evaluations and end."""

import logging
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from thrifty.train import worker_logs
from thrifty.train.launcher import run_local_workers
from thrifty.train.trainer import TrainConfig, run_training

SCALED_MLP = str(Path(__file__).with_name("scaled_mlp_workload.py"))


def _logging_rank(rank: int, world_size: int) -> int:
    logger = logging.getLogger("thrifty.train.example")
    logger.info("hello %s", "there")
    logger.debug("details")
    return rank


@pytest.mark.timeout(120)
def test_a_ranks_records_reach_the_launchers_loggers_at_its_level_with_the_rank(caplog):
    """Mutations: the rank not sending its records (nothing arrives), the launcher's level not
    passed on (the debug record arrives too), no rank prefix."""
    caplog.set_level(logging.INFO, logger="thrifty")
    assert run_local_workers(_logging_rank, 2, timeout_s=90, process_group=False) == [0, 1]
    relayed = sorted(r.getMessage() for r in caplog.records if r.name == "thrifty.train.example")
    assert relayed == ["rank 0: hello there", "rank 1: hello there"]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "thrifty.train.example")


@pytest.mark.timeout(300)
def test_training_logs_its_start_each_evaluation_the_checkpoint_and_its_end(caplog, tmp_path):
    """Under `thrifty -v train` (local workers) these are what a user sees. Mutations: the trainer's
    records dropped, or its workers' records not relayed (the evaluations and the end are rank 0's)."""
    caplog.set_level(logging.INFO, logger="thrifty")
    run_training(TrainConfig(workload=SCALED_MLP, workers=2, global_batch=32, policy="uniform", b_max=32,
                             progress=False, timeout_s=240, eval_every=4, steps=8, run_dir=tmp_path / "run"))
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("thrifty.train")]
    starts = [m for m in messages if "training " in m]
    assert len(starts) == 1 and starts[0].startswith("rank 0: training ") and "on 2 worker(s)" in starts[0]
    evaluations = [m for m in messages if m.startswith("rank 0: step ")]
    assert [m.split(":")[1].strip() for m in evaluations] == ["step 4", "step 8"]
    assert any("checkpoint of step 8" in m for m in messages)
    assert messages[-1].startswith("rank 0: finished at step 8")


def _die_holding_the_write_lock(queue) -> None:
    queue._wlock.acquire()  # as a rank killed while its feeder thread writes a record
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.timeout(120)
def test_a_rank_killed_holding_its_log_queues_lock_does_not_hold_the_launcher(monkeypatch, caplog):
    """The listener's end-of-records marker needs the queue's write lock, which the killed rank never
    gives back. Mutation caught: a plain `listener.stop()` (waits forever; the timeout fails it)."""
    monkeypatch.setattr(worker_logs, "STOP_WAIT_S", 1.0)
    context = multiprocessing.get_context("forkserver")
    caplog.set_level(logging.INFO, logger="thrifty")
    with worker_logs.relayed_worker_logs(context, 1) as (queues, _):
        queues[0].put(logging.LogRecord("thrifty.train.example", logging.INFO, __file__, 1, "before", None, None))
        deadline = time.monotonic() + 60
        while not any(r.name == "thrifty.train.example" for r in caplog.records):  # relayed before the lock goes
            assert time.monotonic() < deadline, "the record before was not relayed"
            time.sleep(0.01)
        rank = context.Process(target=_die_holding_the_write_lock, args=(queues[0],))
        rank.start()
        rank.join(60)
        assert rank.exitcode == -signal.SIGKILL
    assert [r.getMessage() for r in caplog.records if r.name == "thrifty.train.example"] == ["before"]
