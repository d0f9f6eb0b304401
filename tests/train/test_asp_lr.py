"""The parameter server's learning rate per update (no processes: the server object alone)."""

import pytest

from thrifty.train.asp import ParameterServer
from thrifty.train.trainer import TrainConfig


def test_each_sample_moves_the_model_equally_whatever_the_split():
    # mutation caught: the workload's rate for the local batch (square-root rule for digits),
    # which weighed the slow worker's 3-sample batches 4.5x per sample (issue 9, item 8)
    server = ParameterServer(TrainConfig(workers=2, global_batch=64, policy="dynamic"), workers=2)
    even = server.update_lr(32)
    assert even == pytest.approx(server.lr_for(32))  # plain ASP keeps the workload's rate
    assert server.update_lr(61) / 61 == pytest.approx(server.update_lr(3) / 3) == pytest.approx(even / 32)
