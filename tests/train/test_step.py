# SPDX-License-Identifier: MIT
"""The train step stops a run at the first non-finite loss: every rank at once, naming the rank and
the step."""

import pytest

from thrifty.train.sampler import GlobalBatchSampler
from thrifty.workloads import load_workload

NAN_WORKLOAD = """
from thrifty.workloads import load_workload


def make_workload():
    workload = load_workload("builtin:digits")
    workload.train_data.tensors[0][{index}] = float("nan")  # one poisoned training image
    workload.name = "digits with a NaN"
    return workload
"""


@pytest.mark.timeout(240)
def test_a_nan_loss_stops_every_rank_at_its_step_with_one_line(run_cli, tmp_path):
    # the poisoned sample is the 41st of global batch 3 in the first epoch: rank 1's (split 32, 32)
    order = GlobalBatchSampler(load_workload("builtin:digits").train_size, [32, 32], seed=0).epoch_order(0)
    path = tmp_path / "nan_workload.py"
    path.write_text(NAN_WORKLOAD.format(index=int(order[3 * 64 + 40])))
    code, out, err = run_cli("train", "--workload", path, "--nproc", "2", "--policy", "uniform", "--b-max", "64",
                             "--steps", "50", "--run-dir", tmp_path / "run", "--db", tmp_path / "db")
    assert code == 2, out
    assert "the loss is nan on rank 1 at step 3" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
