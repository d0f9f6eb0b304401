"""The parameter server's learning rate per update (no processes: the server object alone)."""

import pytest

from thrifty.train.asp import ParameterServer
from thrifty.train.policies import ControllerSettings
from thrifty.train.trainer import TrainConfig


def test_each_sample_moves_the_model_equally_whatever_the_split():
    # mutation caught: the workload's rate for the local batch (square-root rule for digits),
    # which weighed the slow worker's 3-sample batches 4.5x per sample (issue 9, item 8)
    server = ParameterServer(TrainConfig(workers=2, global_batch=64, policy="dynamic"), workers=2)
    even = server.update_lr(32)
    assert even == pytest.approx(server.lr_for(32))  # plain ASP keeps the workload's rate
    assert server.update_lr(61) / 61 == pytest.approx(server.update_lr(3) / 3) == pytest.approx(even / 32)


def test_the_controller_keeps_every_asp_update_at_half_an_even_share_or_more():
    # mutation caught: no floor (b_min = 1), which at HL8 pinned the slow workers at 1-4 of 64
    # samples and lowered accuracy at equal time (benchmarks/bench_asp.py, dynamic_no_floor)
    server = ParameterServer(TrainConfig(workers=4, global_batch=64, policy="dynamic"), workers=4)
    slowdowns = (16 / 3, 16 / 3, 8.0, 1.0)  # HL8
    for step in range(1, 60):
        server.policy.observe(step, [f * (2e-3 + 1e-4 * b) for f, b in zip(slowdowns, server.policy.split)])
    assert server.policy.adjustments >= 1
    assert server.policy.split == [8, 8, 8, 40]
    unfloored = ParameterServer(TrainConfig(workers=4, global_batch=64, policy="dynamic",
                                            controller=ControllerSettings(asp_min_share=0.0)), workers=4)
    assert unfloored.policy.b_min == 1
