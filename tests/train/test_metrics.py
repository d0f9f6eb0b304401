# SPDX-License-Identifier: MIT
"""The step stream's line (`thrifty train --step-stream`): what a supervisor such as thrifty search
reads of each step."""

import json

import pytest

from thrifty.records import EvalRow, RunLog, StepRow
from thrifty.train.metrics import step_line, summarise


def _rows(noise: bool) -> list[StepRow]:
    extra = [dict(small_batch=32, small_grad_sq=3.0, big_batch=64, big_grad_sq=1.5),
             dict(small_batch=32, small_grad_sq=2.0, big_batch=64, big_grad_sq=1.5)] if noise else [{}, {}]
    return [StepRow(step=7, rank=k, num_workers=2, local_batch=32, global_batch=64, compute_time_s=0.01,
                    sync_time_s=0.002, step_time_s=0.013, **extra[k]) for k in range(2)]


def test_a_step_that_measured_the_noise_streams_the_ranks_mean_unbiased_estimates():
    # mutations caught: the estimates of one rank only; the raw squared norms instead of the
    # unbiased |G|^2 and tr(Sigma) (McCandlish et al. 2018, eqs. A.1-A.2)
    line = json.loads(step_line(_rows(noise=True)))
    # rank 0: |G|^2 = (64 1.5 - 32 3) / 32 = 0, tr = (3 - 1.5) / (1/32 - 1/64) = 96;
    # rank 1: |G|^2 = (96 - 64) / 32 = 1, tr = 0.5 / (1/64) = 32
    assert line["grad_sq"] == pytest.approx(0.5) and line["trace"] == pytest.approx(64.0)
    assert line["step"] == 7 and line["step_time_s"] == pytest.approx(0.013)


def test_a_step_without_noise_streams_no_estimates():
    line = json.loads(step_line(_rows(noise=False)))
    assert "grad_sq" not in line and "trace" not in line


def test_steps_to_target_counts_the_steps_run_until_the_eval_that_reached_it():
    # mutation caught: the eval's 0-based step taken as the count (an --until-target run that
    # stopped after 5 steps said steps 5, steps_to_target 4)
    steps = [StepRow(step=i, rank=0, num_workers=1, local_batch=8, global_batch=8, step_time_s=0.01) for i in range(5)]
    log = RunLog(steps=steps, evals=[EvalRow(1, 0.02, 0.5), EvalRow(4, 0.05, 0.95)])
    summary = summarise(log, world_size=1, global_batch=8, split=[8], adjustments=0, target=0.9, wall_time_s=0.06,
                        policy="uniform", workload="w", metric_name="accuracy", train_size=40)
    assert summary["steps"] == summary["steps_to_target"] == 5
    assert summary["time_to_target_s"] == pytest.approx(0.05)


def test_epochs_count_each_step_at_its_own_epoch_size():
    """A resume from B = 64 to B = 7 on 100 samples: 20 steps of 1/1 epoch each at B = 64 (N // B =
    1) would say 20; with the 2 steps at B = 7 (N // B = 14) the count rises by 2/14, not falls.
    Mutation caught: every step's samples over the current B's epoch (0.909 to 0.902 in a real
    resume), which made the count fall as steps were added."""
    steps = [StepRow(step=i, rank=0, num_workers=1, local_batch=b, global_batch=b, step_time_s=0.01)
             for i, b in enumerate([64] * 3 + [7] * 2)]
    summary = summarise(RunLog(steps=steps, evals=[]), world_size=1, global_batch=7, split=[7], adjustments=0,
                        target=0.9, wall_time_s=0.06, policy="uniform", workload="w", metric_name="accuracy",
                        train_size=100)
    assert summary["epochs"] == pytest.approx(3 / 1 + 2 / 14)
    assert summary["time_per_epoch_s"] == pytest.approx(0.05 / (3 + 2 / 14))
    shorter = summarise(RunLog(steps=steps[:3], evals=[]), world_size=1, global_batch=64, split=[64], adjustments=0,
                        target=0.9, wall_time_s=0.03, policy="uniform", workload="w", metric_name="accuracy",
                        train_size=100)
    assert shorter["epochs"] < summary["epochs"]


def test_a_resumed_runs_stream_drops_the_steps_it_trains_again(tmp_path):
    """A run killed past its checkpoint streamed steps it trains again once resumed: the stream keeps
    the steps before the checkpoint and drops a half-written line (a new user's pass: 1,540 lines for
    1,500 steps after a SIGKILL under `thrifty run`). Mutation caught: the stream only appended to."""
    from thrifty.train.metrics import cut_step_stream
    stream = tmp_path / "steps.jsonl"
    stream.write_text("".join(json.dumps({"step": k}) + "\n" for k in range(12)) + '{"step": 12, "ep')
    cut_step_stream(stream, 10)
    assert [json.loads(line)["step"] for line in stream.read_text().splitlines()] == list(range(10))
    before = stream.stat().st_mtime_ns
    cut_step_stream(stream, 10)  # nothing past it: left as it is (a supervisor may be reading it)
    cut_step_stream(stream, 0)  # a fresh run: not a resume, nothing cut
    assert stream.stat().st_mtime_ns == before and len(stream.read_text().splitlines()) == 10
