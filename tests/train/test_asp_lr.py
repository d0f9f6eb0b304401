# SPDX-License-Identifier: MIT
"""The parameter server's learning rate per update (no processes: the server object alone)."""

import pytest
import torch
from torch.nn.utils import parameters_to_vector

from thrifty.train.asp import ParameterServer
from thrifty.train.policies import ControllerSettings
from thrifty.train.trainer import TrainConfig


def test_each_sample_moves_the_model_equally_whatever_the_split():
    # mutation caught: the workload's rate for the local batch (square-root rule for digits),
    # which weighed the slow worker's 3-sample batches 4.5x per sample (issue 9, item 8)
    server = ParameterServer(TrainConfig(workers=2, global_batch=64, policy="dynamic"), workers=2)
    assert server.lr == pytest.approx(server.workload.make_optimizer([torch.zeros(1)], 32).param_groups[0]["lr"])
    assert server.update_weight(32) == 1.0  # plain ASP keeps the workload's rate
    assert server.update_weight(61) / 61 == pytest.approx(server.update_weight(3) / 3) == pytest.approx(1 / 32)


def test_momentum_carries_each_gradient_at_its_share_of_the_samples():
    # heavy ball on the weighted gradients: buf = mu buf + (b_k / (B/n)) g_k, w -= lr(B/n) buf.
    # Mutation caught: scaling the learning rate instead (buf = mu buf + g_k, w -= lr_k buf), which
    # carries a 4-sample gradient into the next 60-sample update at full weight
    server = ParameterServer(TrainConfig(workers=2, global_batch=64, policy="dynamic"), workers=2)
    mu, lr = server.optimizer.param_groups[0]["momentum"], server.lr
    assert mu == pytest.approx(0.4)  # the workload's 0.9 less the 1 - 1/n that asynchrony adds
    start = parameters_to_vector(server.model.parameters()).detach().clone()
    small, large = torch.randn(start.numel()), torch.randn(start.numel())
    server.exchange(1, small, 0, 4, 0.01)
    server.exchange(0, large, 0, 60, 0.01)
    first = small * 4 / 32
    expected = start - lr * first - lr * (mu * first + large * 60 / 32)
    assert torch.allclose(parameters_to_vector(server.model.parameters()).detach(), expected, atol=1e-6)


def test_the_controller_keeps_every_asp_update_at_half_an_even_share_or_more():
    # mutation caught: no floor (b_min = 1), which at HL8 pinned the slow workers at 1-4 of 64
    # samples and lowered accuracy at equal time (benchmarks/bench_asp.py, dynamic_no_floor)
    server = ParameterServer(TrainConfig(workers=4, global_batch=64, policy="dynamic"), workers=4)
    slowdowns = (16 / 3, 16 / 3, 8.0, 1.0)  # HL8
    for step in range(1, 60):
        server.policy.observe(step, [f * (2e-3 + 1e-4 * b) for f, b in zip(slowdowns, server.policy.split, strict=True)])
    assert server.policy.adjustments >= 1
    assert server.policy.split == [8, 8, 8, 40]
    unfloored = ParameterServer(TrainConfig(workers=4, global_batch=64, policy="dynamic",
                                            controller=ControllerSettings(asp_min_share=0.0)), workers=4)
    assert unfloored.policy.b_min == 1


def test_a_report_timed_at_an_older_split_is_not_fed_to_the_controller():
    # a worker's first update after a change of split carries the old batch and its time; taken
    # for the new split, it set the fixed-cost fit's history wrong. Mutation caught: every report kept.
    server = ParameterServer(TrainConfig(workers=2, global_batch=64, policy="dynamic"), workers=2)
    grad = torch.zeros(parameters_to_vector(server.model.parameters()).numel())
    server.policy.split = [48, 16]  # the controller moved; the workers still compute at 32 each
    server.exchange(0, grad, 0, 32, 0.010)
    server.exchange(1, grad, 0, 32, 0.030)
    assert server.rounds == 0 and not server.policy.history
    server.exchange(0, grad, 0, 48, 0.015)
    server.exchange(1, grad, 0, 16, 0.015)
    assert server.rounds == 1 and server.policy.history == [([48, 16], [0.015, 0.015])]
