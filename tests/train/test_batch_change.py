# SPDX-License-Identifier: MIT
"""Changing the global batch of a running `thrifty train` in place (train.batch_requests,
train.batch_change): the request rides the gradient all-reduce once, a rank takes it or refuses it
from its state alone, and a taken change continues the epoch's permutation at the new batch with
the new batch's learning rate. The two-rank run through the search's local backend is in
tests/search/test_local_backend.py."""

import math
from dataclasses import replace

import pytest
import torch

from thrifty.train.batch_change import change_in_place, refusal
from thrifty.train.batch_requests import BatchRequest, read_reply, read_request, write_reply, write_request
from thrifty.train.loop import fresh_state, run_steps
from thrifty.train.policies import make_policy
from thrifty.train.preemption import BATCH_REQUESTS, AgreedSignals, shared_signals
from thrifty.train.split import even_split
from thrifty.workloads import load_workload


def _state(batch: int = 64, workers: int = 2, b_max: int = 64):
    workload = load_workload("builtin:digits")
    policy = make_policy("uniform", batch, workers, b_max=[b_max] * workers)
    state = fresh_state(workload, even_split(batch, workers), policy=policy, total_samples=100 * batch)
    return workload, state


def test_a_request_rides_the_all_reduce_once_and_only_after_its_signal(tmp_path):
    # mutations caught: the request read without a signal (an old file taken again), or kept after
    # it was taken (applied twice), or rank 1 adding its own copy (the sum doubles the batch)
    flags = shared_signals()
    model = torch.nn.Linear(2, 1)
    model(torch.ones(1, 2)).sum().backward()
    write_request(tmp_path, BatchRequest(1, 32, 50))
    ranks = [AgreedSignals(flags, 0, tmp_path), AgreedSignals(flags, 1, tmp_path)]
    ranks[0].exchange(model, torch.zeros(0))
    assert ranks[0].take_batch_request() is None  # no signal yet
    flags[BATCH_REQUESTS] += 1
    ranks[0].exchange(model, torch.zeros(0))
    assert ranks[0].take_batch_request() == BatchRequest(1, 32, 50)
    assert ranks[0].take_batch_request() is None
    ranks[0].exchange(model, torch.zeros(0))  # the same signal count: nothing new
    assert ranks[0].take_batch_request() is None
    ranks[1].exchange(model, torch.zeros(0))  # rank 1 never reads the file (one process: no peers to hear from)
    assert ranks[1].take_batch_request() is None


def test_a_request_file_that_is_not_one_is_ignored_and_replies_round_trip(tmp_path, caplog):
    (tmp_path / ".batch-request.json").write_text("{not json")
    assert read_request(tmp_path) is None and "not one" in caplog.text
    assert read_reply(tmp_path) is None
    write_reply(tmp_path, {"id": 3, "applied": False, "reason": "why"})
    assert read_reply(tmp_path) == {"id": 3, "applied": False, "reason": "why"}
    assert BatchRequest.from_extras(BatchRequest(2, 48, None).as_extras()) == BatchRequest(2, 48, None)
    assert BatchRequest.from_extras([0.0, 0.0, 0.0, 0.0]) is None


@pytest.mark.parametrize(("request_", "last_step", "says"), [
    (BatchRequest(1, 256), 100, "does not fit"),  # 2 workers of b_max 64
    (BatchRequest(1, 1), 100, "smaller than the 2 workers"),
    (BatchRequest(1, 4096), 100, "exceeds the training set"),
    (BatchRequest(1, 32, 5), 100, "not beyond the current step 10"),
    (BatchRequest(1, 32), 10, "at its last step"),
])
def test_a_request_the_run_cannot_take_is_refused_in_one_line(request_, last_step, says):
    # mutation caught: any of the checks removed (the change would fail inside make_policy, on
    # every rank, mid-run, or train past the run's end)
    _, state = _state()
    state.step = 10
    why = refusal(state, request_, last_step)
    assert why is not None and says in why and "\n" not in why


def test_a_change_continues_the_epoch_at_the_new_batch_with_its_learning_rate():
    # mutations caught: the sampler restarted at the epoch's start (samples repeated), the base
    # learning rate left at the old batch's, the schedule's horizon or the last step not moved
    workload, state = _state(64)
    run_steps(state, workload, steps=5)
    offset, seen = state.sample_offset, state.samples_seen
    order = state.batch_sampler().epoch_order(state.epoch)
    steps = change_in_place(state, workload, BatchRequest(1, 32), capacities=None)
    assert state.policy.global_batch == 32 and state.policy.split == [16, 16]
    assert torch.equal(torch.cat([state.indices(0), state.indices(1)]), order[offset:offset + 32])
    assert state.base_lrs == [pytest.approx(0.05)]  # digits: 0.1 x sqrt(B / 128)
    # the samples still to train (95 steps of 64) in steps of 32
    assert steps == 5 + math.ceil(95 * 64 / 32) and state.total_samples == seen + 190 * 32
    run_steps(state, workload, steps=8)
    assert state.optimizer.param_groups[0]["lr"] == pytest.approx(0.05)
    # the same batch with a last step: the horizon alone moves, the policy (its statistics) stays
    policy = state.policy
    assert change_in_place(state, workload, BatchRequest(2, 32, 40), capacities=None) == 40
    assert state.policy is policy and state.total_samples == state.samples_seen + 32 * 32


def test_rank_0_answers_and_a_run_that_stops_here_refuses(tmp_path):
    # mutations caught: no reply written (the supervisor would wait for ever), or a request taken
    # on the step the run stops at (a notice's checkpoint holds the old batch, the reply says the new)
    from thrifty.train.trainer import TrainConfig, _batch_request
    workload, state = _state(64)
    config = TrainConfig(workers=2, global_batch=64, run_dir=tmp_path / "run", checkpoint_dir=tmp_path)
    assert _batch_request(state, workload, BatchRequest(1, 32), config, 0, 100, "the run stops after this step") == 100
    assert state.policy.global_batch == 64
    reply = read_reply(tmp_path)
    assert reply.pop("change_s") >= 0
    assert reply == {"id": 1, "applied": False, "step": 0, "global_batch": 64, "steps": 100,
                     "reason": "the run stops after this step"}
    assert _batch_request(state, workload, BatchRequest(2, 32, 50), config, 0, 100, None) == 50
    assert state.policy.global_batch == 32 and read_reply(tmp_path)["applied"] is True


def test_a_change_near_the_epoch_end_starts_the_next_epoch_and_takes_the_new_batchs_momentum():
    # mutations caught: the epoch's end not checked after the change (the next step asks for 128
    # samples where 62 are left: "offset ... leaves no global batch"), the optimizer's other
    # hyperparameters left at the old batch's (momentum 0.9, the old B's)
    workload, state = _state(32, b_max=128)
    workload = replace(workload, make_optimizer=lambda params, batch: torch.optim.SGD(
        params, lr=0.05, momentum=0.9 if batch < 64 else 0.5))
    state.optimizer = workload.make_optimizer(state.model.parameters(), 32)
    steps_left_in_epoch = (workload.train_size - 62) // 32  # 1438 samples: 62 left unused after these
    run_steps(state, workload, steps=steps_left_in_epoch)
    assert (state.epoch, workload.train_size - state.sample_offset) == (0, 62)
    change_in_place(state, workload, BatchRequest(1, 128), capacities=None)
    assert (state.epoch, state.sample_offset) == (1, 0)
    assert state.optimizer.param_groups[0]["momentum"] == 0.5
    run_steps(state, workload, steps=state.step + 2)
    assert state.sample_offset == 256


def test_rank_0_refuses_a_request_its_all_reduce_would_round(tmp_path):
    # mutations caught: the request sent whatever the gradients' dtype (bfloat16 carries batch 257
    # as 256: every rank would apply the rounded numbers), or the last step in one float (a job of
    # 3.6e10 steps, as the local benchmark's never-ending one, rounded in float32)
    assert BatchRequest(1, 256, 36_250_000_001).exact_in(torch.float32)
    assert BatchRequest.from_extras(BatchRequest(1, 256, 36_250_000_001).as_extras()).steps == 36_250_000_001
    assert not BatchRequest(1, 2**24 + 1, 10).exact_in(torch.float32)
    assert not BatchRequest(1, 257, 70_000).exact_in(torch.bfloat16)
    flags = shared_signals()
    model = torch.nn.Linear(2, 1).to(torch.bfloat16)
    model(torch.ones(1, 2, dtype=torch.bfloat16)).sum().backward()
    write_request(tmp_path, BatchRequest(4, 257, 70_001))
    flags[BATCH_REQUESTS] += 1
    rank0 = AgreedSignals(flags, 0, tmp_path)
    rank0.exchange(model, torch.zeros(0, dtype=torch.bfloat16))
    assert rank0.take_batch_request() is None
    reply = read_reply(tmp_path)
    assert reply["id"] == 4 and reply["applied"] is False and "bfloat16" in reply["reason"]
