# SPDX-License-Identifier: MIT
"""b_max probes: the memory estimate on CPU and the throughput-drop rule."""

import pytest
import torch

from thrifty.train import probe
from thrifty.train.probe import activation_bytes_per_sample, cpu_memory_b_max, probe_b_max, throughput_b_max
from thrifty.workloads import load_workload


def test_activation_bytes_count_every_layer_output():
    workload = load_workload("builtin:digits")
    model = workload.make_model()
    # conv 32x8x8, relu, conv 64x8x8, relu, pool 64x4x4, flatten, 128, relu, 10 -- floats, x2 for grads
    outputs = 32 * 64 * 2 + 64 * 64 * 2 + 64 * 16 * 2 + 128 * 2 + 10
    assert activation_bytes_per_sample(model, workload) == 2 * 4 * outputs


def test_memory_rule_allows_large_batches_for_a_small_model():
    workload = load_workload("builtin:digits")
    assert cpu_memory_b_max(workload.make_model(), workload, ranks_on_machine=2) > 10_000
    assert probe_b_max(workload.make_model(), workload, rule="memory", limit=64, ranks_on_machine=2) == 64


class FakeClock:
    """A training step at batch b takes b / rate(b) seconds of a fake clock."""

    def __init__(self, samples_per_s: dict[int, float]) -> None:
        self.samples_per_s, self.now, self.batches = samples_per_s, 0.0, []

    def step(self, _model, _workload, batch: int, _runtime) -> None:
        self.batches.append(batch)
        self.now += batch / self.samples_per_s[batch]

    def perf_counter(self) -> float:
        return self.now


@pytest.mark.parametrize("samples_per_s, expected", [
    # 128 is 2.5% slower than 64 (inside the 5% tolerance, so the probe goes on), 256 is 10% slower
    ({8: 100, 16: 180, 32: 300, 64: 400, 128: 390, 256: 360}, 64),
    # a dip inside the tolerance does not end the search: 128 is faster than anything before it
    ({8: 100, 16: 200, 32: 300, 64: 290, 128: 450, 256: 300}, 128),
    # still rising at the limit: the limit
    ({8: 100, 16: 200, 32: 300, 64: 400, 128: 500, 256: 600}, 256),
])
def test_throughput_rule_picks_the_fastest_batch_before_a_drop(monkeypatch, samples_per_s, expected):
    clock = FakeClock(samples_per_s)
    monkeypatch.setattr(probe, "_training_step", clock.step)
    monkeypatch.setattr(probe, "time", clock)
    workload = load_workload("builtin:digits")
    assert throughput_b_max(workload.make_model(), workload, limit=256) == expected
    assert probe_b_max(workload.make_model(), workload, rule="throughput", limit=256,
                       ranks_on_machine=1) == expected


def test_throughput_rule_on_a_real_model_measures_doubling_batches_and_clears_gradients(monkeypatch):
    measured = []
    real_step = probe._training_step

    def recording_step(model, workload, batch, runtime):
        measured.append(batch)
        real_step(model, workload, batch, runtime)
    monkeypatch.setattr(probe, "_training_step", recording_step)
    workload = load_workload("builtin:digits")
    torch.manual_seed(0)
    model = workload.make_model()
    b_max = throughput_b_max(model, workload, limit=32, steps=3)
    batches = sorted(set(measured))
    assert batches == [8, 16, 32][:len(batches)] and all(measured.count(b) == 4 for b in batches)
    assert b_max in batches  # the rule itself is tested on a fake clock above
    assert all(p.grad is None for p in model.parameters())
