"""b_max probes: the memory estimate on CPU and the throughput-drop rule."""

import torch

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


def test_throughput_rule_returns_a_measured_batch_within_the_limit():
    workload = load_workload("builtin:digits")
    torch.manual_seed(0)
    b_max = throughput_b_max(workload.make_model(), workload, limit=256)
    assert b_max in (8, 16, 32, 64, 128, 256)
