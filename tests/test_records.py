# SPDX-License-Identifier: MIT
"""A run's CSV log is appended at each checkpoint and cut back to the checkpoint on resume, and it
ends as the file a whole rewrite of its rows would have written."""

from dataclasses import asdict

import pytest

from thrifty.errors import ThriftyError
from thrifty.io import write_csv
from thrifty.records import EVAL_FIELDS, STEP_FIELDS, EvalRow, RunLog, StepRow


def _steps(first: int, last: int) -> list[StepRow]:
    return [StepRow(step=s, rank=k, num_workers=2, local_batch=32, global_batch=64, step_time_s=0.01 + s / 7)
            for s in range(first, last) for k in range(2)]


def _rewritten(tmp_path, log: RunLog) -> tuple[bytes, bytes]:
    """What rewriting the whole log (the former RunLog.write) puts in steps.csv and evals.csv."""
    write_csv(tmp_path / "steps-whole.csv", STEP_FIELDS, [asdict(r) for r in log.steps])
    write_csv(tmp_path / "evals-whole.csv", EVAL_FIELDS, [asdict(r) for r in log.evals])
    return (tmp_path / "steps-whole.csv").read_bytes(), (tmp_path / "evals-whole.csv").read_bytes()


def test_an_appended_log_resumed_after_a_kill_is_the_log_a_rewrite_writes(tmp_path):
    """Mutations caught: resume without cutting the files back (rows 10-14 twice, and the half
    line); append writing every row again, or the header again; a fresh log appending to the
    files a previous run left instead of replacing them."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "steps.csv").write_text("left,by,another,run\r\n1,2,3,4\r\n")
    log = RunLog(steps=_steps(0, 5), evals=[EvalRow(4, 0.5, 0.25)])
    log.append(run)
    log.steps += _steps(5, 10)
    at_checkpoint = log.append(run)  # the checkpoint at step 9 records these lengths
    log.steps += _steps(10, 15)
    log.evals.append(EvalRow(14, 1.5, 0.5))
    log.append(run)  # appended, then killed before its checkpoint was renamed into place
    with (run / "steps.csv").open("a") as handle:
        handle.write("15,0,2,3")  # and a row half-written by a kill
    resumed = RunLog.resume(run, at_checkpoint)
    assert [(r.step, r.rank) for r in resumed.steps] == [(s, k) for s in range(10) for k in range(2)]
    assert resumed.evals == [EvalRow(4, 0.5, 0.25)]
    resumed.steps += _steps(10, 20)
    resumed.evals.append(EvalRow(19, 2.0, 0.75))
    resumed.append(run)
    whole = RunLog(steps=_steps(0, 20), evals=[EvalRow(4, 0.5, 0.25), EvalRow(19, 2.0, 0.75)])
    assert repr(RunLog.read(run)) == repr(whole)  # NaN fields: compare the rows' reprs
    assert ((run / "steps.csv").read_bytes(), (run / "evals.csv").read_bytes()) == _rewritten(tmp_path, whole)


def test_a_log_shorter_than_its_checkpoint_recorded_is_refused(tmp_path):
    """Mutation caught: a resume that accepts a log missing rows the checkpoint covers (it would go
    on appending after a gap, or to a file without a header)."""
    log = RunLog(steps=_steps(0, 3))
    lengths = log.append(tmp_path)
    (tmp_path / "steps.csv").write_bytes((tmp_path / "steps.csv").read_bytes()[:-5])
    with pytest.raises(ThriftyError, match="fewer than the .* its checkpoint recorded: resume with the --run-dir"):
        RunLog.resume(tmp_path, lengths)
    (tmp_path / "evals.csv").unlink()
    with pytest.raises(ThriftyError, match="evals.csv holds 0 bytes"):
        RunLog.resume(tmp_path, {"evals.csv": lengths["evals.csv"]})


def test_a_run_directory_without_any_log_resumes_with_a_fresh_one(tmp_path):
    """A spot job recovered on a new VM: the checkpoint comes from the bucket, the run directory
    is new. Mutation caught: refusing it (the recovered job would never start)."""
    lengths = RunLog(steps=_steps(0, 3)).append(tmp_path / "old")
    resumed = RunLog.resume(tmp_path / "new", lengths)
    assert resumed.steps == [] and resumed.written is None
    resumed.steps = _steps(3, 5)
    resumed.append(tmp_path / "new")
    assert sorted({r.step for r in RunLog.read(tmp_path / "new").steps}) == [3, 4]


def test_a_failed_block_in_a_folder_of_other_files_takes_only_its_own_names_away(tmp_path):
    """A run directory holding the user's notes: the failed run's lock file goes, and so does
    nothing else, not even what another process wrote there while the run went on (a review's
    draft.md and figures/ were deleted). Mutation caught: every entry the block added removed."""
    from thrifty.io import removed_on_failure
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RuntimeError), removed_on_failure(tmp_path, own_names=(".lock",)):
        (tmp_path / ".lock").write_text("123")
        (tmp_path / "draft.md").write_text("someone else's")
        (tmp_path / "figures").mkdir()
        raise RuntimeError("the loss is nan")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draft.md", "figures", "notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RuntimeError), removed_on_failure(empty):
        (empty / "log.txt").write_text("the run's")
        raise RuntimeError("forward broke")
    assert empty.is_dir() and not any(empty.iterdir())  # an empty folder is emptied again


def test_a_failed_run_removes_the_parents_it_made_only_while_they_are_empty(tmp_path):
    """Two plan lines under one .thrifty/runs/ that neither found: the first fails, and the second's
    run folder, made meanwhile beside it, stays (a review: it went too, checkpoints and all).
    Mutation caught: the highest parent the block made removed whole."""
    from thrifty.io import removed_on_failure
    first, second = tmp_path / ".thrifty" / "runs" / "a", tmp_path / ".thrifty" / "runs" / "b"
    with pytest.raises(RuntimeError), removed_on_failure(first):
        first.mkdir(parents=True)
        second.mkdir()
        (second / "ckpt-000001.bin").write_bytes(b"the other run's")
        raise RuntimeError("interrupted")
    assert not first.exists() and (second / "ckpt-000001.bin").exists()
    with pytest.raises(RuntimeError), removed_on_failure(second / "deeper" / "run"):
        (second / "deeper" / "run").mkdir(parents=True)
        raise RuntimeError("alone")
    assert not (second / "deeper").exists() and second.exists()  # its own parents go, empty


def test_a_row_being_written_is_left_out_of_a_live_read_and_a_bad_whole_row_is_not(tmp_path):
    """`thrifty serve` reads a run's log while the run appends to it (a new user's pass: a half-written
    last line made the whole run view an error). Mutation caught: read_csv without `appended`."""
    run = tmp_path / "run"
    run.mkdir()
    RunLog(steps=_steps(0, 3)).append(run)
    with (run / "steps.csv").open("a") as handle:
        handle.write("3,0,2,3")  # the next row, its newline not written yet
    assert [(r.step, r.rank) for r in RunLog.read(run).steps] == [(s, k) for s in range(3) for k in range(2)]
    with (run / "steps.csv").open("a") as handle:
        handle.write("\r\n")  # now a whole row, and a bad one
    with pytest.raises(ThriftyError, match="fields, the header has"):
        RunLog.read(run)
