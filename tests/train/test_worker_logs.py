# SPDX-License-Identifier: MIT
"""What local worker processes log reaches the launcher's loggers (train.worker_logs): the CLI's
`-v`, caplog, a library user's handlers; and `thrifty train` logs its start, evaluations and end."""

import logging
from pathlib import Path

import pytest

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
