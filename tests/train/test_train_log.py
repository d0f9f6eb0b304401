# SPDX-License-Identifier: MIT
"""`thrifty train`'s CSV log across a lost checkpoint: appended at each checkpoint, cut back to the
checkpoint a resumed run continues from (records.RunLog; the file mechanics in tests/test_records.py)."""

from dataclasses import asdict, replace

import pytest

from thrifty.checkpoint_file import load_state
from thrifty.io import write_csv
from thrifty.records import STEP_FIELDS, RunLog
from thrifty.train.trainer import TrainConfig, run_training
from thrifty.transient.protocol import checkpoint_files

BASE = TrainConfig(workers=2, global_batch=64, policy="uniform", b_max=64, progress=False, timeout_s=240)


@pytest.mark.timeout(300)
def test_a_run_resumed_from_an_older_checkpoint_logs_every_step_once(tmp_path):
    """Mutations caught: the resume keeps the rows logged after its checkpoint (steps 10-19 twice);
    the checkpoint does not record the log's lengths."""
    config = replace(BASE, steps=20, checkpoint_every=10, eval_every=5, run_dir=tmp_path)
    run_training(config)
    # killed after the log reached step 19 and before the step-20 checkpoint was renamed into place
    checkpoint_files(tmp_path)[-1].unlink()
    resumed = run_training(replace(config, steps=30, resume=True))
    assert resumed["resumed_at_step"] == 10
    log = RunLog.read(tmp_path)
    assert [(r.step, r.rank) for r in log.steps] == [(s, k) for s in range(30) for k in range(2)]
    assert [e.step for e in log.evals] == [4, 9, 14, 19, 24, 29]
    write_csv(tmp_path / "rewritten.csv", STEP_FIELDS, [asdict(r) for r in log.steps])
    assert (tmp_path / "steps.csv").read_bytes() == (tmp_path / "rewritten.csv").read_bytes()
    sizes = {name: (tmp_path / name).stat().st_size for name in ("steps.csv", "evals.csv")}
    assert load_state(checkpoint_files(tmp_path)[-1])["log_bytes"] == sizes
