# SPDX-License-Identifier: MIT
"""Kernels as GPUs run them (perf.roofline with the bundled calibration): a launch floor instead of
a FLOP offset, the SMs a kernel can fill, sustained clocks under the board's power limit, and the
memory traffic of embeddings and optimizer updates (train.workcount, perf.embedding_traffic).
Each test names the mutation of the model that makes it fail."""

import functools

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from thrifty.perf.roofline import compute_time_s, load_params, read_gpu_specs
from thrifty.perf.work import KIND_MATMUL, StepWork
from thrifty.workloads.workcount import count_model_step

SPECS = read_gpu_specs()
PARAMS, _ = load_params()
# The GRU language model measured 26 ms a step on this 2-vCPU machine (issue 22).
GRU_2VCPU_STEP_S = 0.026
BATCHES = np.array([16, 32, 64, 128, 256, 512, 1024], float)


def one_kernel(flops: float, outputs: float, nbytes: float = 0.0, kind: int = KIND_MATMUL) -> StepWork:
    one = np.ones(1)
    return StepWork(kind=np.array([kind]), flops_fixed=one * flops, flops_per_sample=0 * one,
                    bytes_fixed=one * nbytes, bytes_per_sample=0 * one, outputs_fixed=one * outputs,
                    outputs_per_sample=0 * one, param_count=0, gradient_bytes=0.0)


class GRULM(nn.Module):
    """A character GRU language model of ~86k parameters (the issue's user model)."""

    def __init__(self, vocab: int = 80, embed: int = 64, hidden: int = 128) -> None:
        super().__init__()
        self.embed, self.rnn, self.head = nn.Embedding(vocab, embed), nn.GRU(embed, hidden, batch_first=True), \
            nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(self.embed(tokens))[0])


class Recommender(nn.Module):
    """A user-written recommender: two embedding tables and a small MLP."""

    def __init__(self, users: int = 200_000, items: int = 50_000, dim: int = 32) -> None:
        super().__init__()
        self.users, self.items = nn.Embedding(users, dim), nn.Embedding(items, dim)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([self.users(pairs[:, 0]), self.items(pairs[:, 1])], 1)).squeeze(1)


def _lm_loss(out, target):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


@functools.cache
def gru_work() -> StepWork:
    def batch(b, d):
        tokens = torch.zeros(b, 64, dtype=torch.long, device=d)
        return tokens, tokens
    return count_model_step(GRULM, batch, _lm_loss, lambda p: torch.optim.Adam(p, lr=1e-3))


@functools.cache
def recommender_work(optimizer: bool = True) -> StepWork:
    def batch(b, d):
        return torch.zeros(b, 2, dtype=torch.long, device=d), torch.zeros(b, device=d)
    return count_model_step(Recommender, batch, F.binary_cross_entropy_with_logits,
                            (lambda p: torch.optim.Adam(p, lr=1e-3)) if optimizer else None)


def test_a_tiny_matmul_costs_a_launch_not_a_flop_offset():
    """Mutation caught: the launch floor replaced by the old FLOP offset (f + 4.03 GFLOP) / peak,
    which made any matmul cost at least 0.22 ms on an A100 and 0.53 ms on a T4."""
    tiny = one_kernel(2 * 64 * 64 * 64, 64 * 64)
    for gpu in ("a100", "t4"):
        t = float(compute_time_s(tiny, SPECS[gpu], [1], "fp32", PARAMS)[0])
        assert PARAMS.launch_s <= t < 30e-6, gpu
    assert 1e-6 <= PARAMS.launch_s <= 20e-6  # a few microseconds


def test_efficiency_follows_the_waves_of_blocks_over_the_sms():
    """A kernel with work for half a wave takes as long as a full wave; one that fills the SMs
    exactly runs at full rate. Mutation caught: utilisation independent of the SM count (the GPU
    treated as one big processor, so half the work takes half the time)."""
    spec = SPECS["a100"]
    wave = PARAMS.matrix_outputs_per_sm * spec.sm_count
    per_output = 2 * 4096.0  # FLOPs per output element (K = 4096)
    half, full = (one_kernel(per_output * n, n) for n in (wave / 2, wave))
    t_half, t_full = (float(compute_time_s(w, spec, [1], "tf32", PARAMS)[0]) for w in (half, full))
    assert t_half == pytest.approx(t_full, rel=1e-9)
    two = one_kernel(per_output * 2 * wave, 2 * wave)
    assert float(compute_time_s(two, spec, [1], "tf32", PARAMS)[0]) == pytest.approx(2 * t_full, rel=1e-9)


def test_a_convolution_runs_on_tensor_cores_at_its_own_efficiency():
    """A compute-bound convolution and a GEMM of the same FLOPs and outputs differ by the ratio of
    the two fitted tensor-core efficiencies, and the fit finds convolutions the less efficient
    (cuDNN's implicit GEMM). On FP32 units (a V100 in fp32) the two take the same time. Mutation
    caught: convolutions given the GEMMs' efficiency (one tensor-core efficiency for both)."""
    from thrifty.perf.work import KIND_CONV
    spec = SPECS["a100"]
    outputs = 64 * PARAMS.matrix_outputs_per_sm * spec.sm_count  # whole waves
    gemm, conv = (one_kernel(2 * 4096.0 * outputs, outputs, kind=k) for k in (KIND_MATMUL, KIND_CONV))
    t_gemm, t_conv = (float(compute_time_s(w, spec, [1], "amp", PARAMS)[0]) for w in (gemm, conv))
    assert t_conv / t_gemm == pytest.approx(PARAMS.tensor_efficiency / PARAMS.conv_tensor_efficiency, rel=1e-9)
    assert PARAMS.conv_tensor_efficiency < PARAMS.tensor_efficiency
    v100 = SPECS["v100"]
    t_gemm, t_conv = (float(compute_time_s(w, v100, [1], "fp32", PARAMS)[0]) for w in (gemm, conv))
    assert t_conv == pytest.approx(t_gemm, rel=1e-9)


def test_t4_tensor_cores_run_at_a_power_limited_clock():
    """The T4 (70 W, base 585 MHz, boost 1590 MHz) cannot sustain its boost-clock FP16 peak; a
    V100 or A100 nearly can. Mutation caught: the boost clock (spec peak) used instead of the
    sustained one, or the clock model ignoring the base clock."""
    t4, v100 = SPECS["t4"], SPECS["v100"]
    assert t4.sustained_clock_fraction(PARAMS.power_fraction) < 0.65
    assert v100.sustained_clock_fraction(PARAMS.power_fraction) > 0.85
    big = one_kernel(2 * 8192.0**3, 8192.0**2)  # a large FP16 GEMM, compute-bound everywhere
    t = float(compute_time_s(big, t4, [1], "amp", PARAMS)[0])
    assert t > big.flops(1) / (t4.fp16_tensor_tflops * 1e12 * 0.65)


def test_the_power_limit_holds_back_the_units_that_set_the_base_clock():
    """The base clock is what the heaviest load sustains at the TDP: tensor-core work where the GPU
    has tensor cores (T4: a large FP16 GEMM at its 37% of boost), the FP32 units on a GPU without
    them (P100). A tensor-core GPU's FP32 units draw FP32_POWER_FRACTION of that load's power: the
    T4's run at 77% of boost, a V100's, A10G's and A100's at boost. Mutation caught: one clock for
    every kernel (the T4's FP32 ResNet-18 at 37-43% of its boost clock, about half the speed issue 22
    measured), FP32 units of a tensor-core GPU always at boost (the T4's 70 W ignored), or the P100's
    FP32 never held back."""
    from dataclasses import replace
    big = one_kernel(2 * 8192.0**3, 8192.0**2)
    for name, fp32_clock in (("t4", (0.74, 0.8)), ("p100", (0.89, 0.9)), ("v100", (1.0, 1.0)),
                             ("a10g", (1.0, 1.0)), ("a100", (1.0, 1.0))):
        spec = SPECS[name]
        unlimited = replace(spec, base_mhz=spec.boost_mhz)  # boost under any load
        t, t_boost = (float(compute_time_s(big, s, [1], "fp32", PARAMS)[0]) for s in (spec, unlimited))
        assert fp32_clock[0] - 1e-9 <= t_boost / t <= fp32_clock[1] + 1e-9, name
    t4 = SPECS["t4"]
    t_amp, t_amp_boost = (float(compute_time_s(big, s, [1], "amp", PARAMS)[0])
                          for s in (t4, replace(t4, base_mhz=t4.boost_mhz)))
    assert t_amp > 1.5 * t_amp_boost


def test_the_fp32_power_fraction_is_the_v100s_energy_per_flop_at_the_t4s_power():
    """FP32_POWER_FRACTION is derived from the specs, not fitted (perf.roofline): the V100's FP32
    load at boost draws at most its TDP, so a FLOP costs at most TDP / peak; the T4 (the same 12 nm
    process) at that energy would outdraw its 70 W at boost and sustains boost x (TDP / need)^(1/3),
    which against its base clock is the fraction. Mutation caught: the constant changed without
    the derivation (or the derivation's inputs in gpus.csv)."""
    from thrifty.perf.roofline import FP32_POWER_FRACTION
    t4, v100 = SPECS["t4"], SPECS["v100"]
    joules_per_flop = v100.tdp_w / (v100.fp32_tflops * 1e12)
    need_w = t4.fp32_tflops * 1e12 * joules_per_flop
    sustained_mhz = t4.boost_mhz * (t4.tdp_w / need_w) ** (1 / 3)
    assert 1200 < sustained_mhz < 1240
    assert FP32_POWER_FRACTION == pytest.approx((t4.base_mhz / sustained_mhz) ** 3, abs=0.005)
    assert t4.sustained_clock_fraction(FP32_POWER_FRACTION) == pytest.approx(sustained_mhz / t4.boost_mhz, rel=0.02)


def test_gru_language_model_is_faster_on_datacentre_gpus_than_on_2_vcpus_and_grows_with_batch():
    """The issue's GRU LM (~86k parameters): never projected slower on a T4 or an A100 than the
    26 ms this 2-vCPU machine measured, and its T4 step time grows with the batch over 16..1024
    (it was flat at 114 ms). Mutation caught: the FLOP offset per kernel (flat and slow), or a
    launch floor of tens of microseconds, or the GRU counted op by op (~40 kernels a time step)
    instead of as cuDNN runs it."""
    work = gru_work()
    assert 80_000 <= work.param_count <= 95_000
    # cuDNN's GRU: per time step one GEMM and one fused gate kernel forward, two backward (64 steps)
    assert work.kernels < 6 * 64
    t4 = compute_time_s(work, SPECS["t4"], BATCHES, "fp32", PARAMS)
    a100 = compute_time_s(work, SPECS["a100"], BATCHES, "fp32", PARAMS)
    assert t4[0] < GRU_2VCPU_STEP_S and a100[0] < GRU_2VCPU_STEP_S
    # A 2-vCPU VM (one core, AVX2: at most 32 FP32 FLOP/cycle at 4 GHz) cannot beat this bound:
    cpu_bound_s = work.flops(BATCHES) / 128e9
    assert np.all(t4 < np.maximum(cpu_bound_s, GRU_2VCPU_STEP_S))
    assert np.all(np.diff(t4) > 0) and t4[-1] > 1.5 * t4[0]


def test_embedding_lookup_reads_rows_and_its_backward_grows_with_the_batch():
    """The forward gather reads the looked-up rows, not the whole table; the backward fills the
    gradient table once and sorts and reduces per lookup, so a recommender's T4 step time grows
    with the batch. Mutation caught: embeddings counted by their arguments' sizes (the whole table
    read by every forward lookup; the backward's per-lookup traffic only gradient + index)."""
    rows, dim = 200_000, 32
    table_bytes, row_bytes = rows * dim * 4, dim * 4
    work = count_model_step(lambda: nn.Embedding(rows, dim),
                            lambda b, d: (torch.zeros(b, dtype=torch.long, device=d), torch.zeros(b, device=d)),
                            lambda out, target: out.sum(), None)
    # fixed: the gradient table's zero fill (1x) and AccumulateGrad adding it into .grad (read two,
    # write one: 3x); a forward that read the whole table would add a fifth
    assert work.bytes(0) <= 4.01 * table_bytes
    assert work.bytes(1) - work.bytes(0) >= 5 * row_bytes  # gather, sort passes, partials, scatter
    recommender = recommender_work()
    t4 = compute_time_s(recommender, SPECS["t4"], [256, 65536], "fp32", PARAMS)
    assert t4[1] > 1.4 * t4[0]


def test_dense_optimizer_update_is_memory_traffic_per_parameter():
    """Adam reads parameter, gradient and both moments and writes three of them: at least 28 bytes
    per parameter per step, whatever the batch. Mutation caught: the optimizer's traffic dropped
    (its kernels not counted)."""
    with_adam, without = recommender_work(True), recommender_work(False)
    params = with_adam.param_count
    assert with_adam.bytes(0) - without.bytes(0) >= 28 * params
    t_with, t_without = (float(compute_time_s(w, SPECS["t4"], [256], "fp32", PARAMS)[0])
                         for w in (with_adam, without))
    assert t_with - t_without >= 28 * params / (SPECS["t4"].mem_bw_gbs * 1e9)


def _assert_counting_keeps_values(run):
    """Run `run` (returning outputs and gradients) plainly and under the counting modes, assert
    the two agree, and return the recorder of the counted run."""
    from thrifty.workloads.workcount import CudnnRNN, KernelRecorder
    plain = run()
    recorder = KernelRecorder()
    with CudnnRNN(recorder), recorder:
        counted = run()
    assert all(torch.allclose(a, b) for a, b in zip(plain, counted, strict=True))
    return recorder


@pytest.mark.parametrize("cls", [nn.GRU, nn.LSTM])
def test_counting_a_recurrent_layer_as_cudnn_keeps_its_outputs_and_gradients_exact(cls):
    """train.workcount.CudnnRNN records cuDNN's kernels but must not change what the step
    computes. Mutation caught: the counted layer's backward dropping or misordering gradients."""
    torch.manual_seed(0)
    layer = cls(4, 8, num_layers=2, batch_first=True, bidirectional=True)
    x = torch.randn(3, 5, 4, requires_grad=True)

    def run():
        layer.zero_grad()
        x.grad = None
        out = layer(x)[0]
        out.square().sum().backward()
        return [out.detach().clone(), x.grad.clone(), *(p.grad.clone() for p in layer.parameters())]

    recorder = _assert_counting_keeps_values(run)
    rnn = [op for op in recorder.ops if op[0].startswith("rnn_")]
    assert len(rnn) == 2 * 2 * ((1 + 2 * 5) + (2 * 5 + 3))  # layers x directions x (forward + backward)


@pytest.mark.parametrize("cls", [nn.GRUCell, nn.LSTMCell])
def test_a_recurrent_cell_step_is_counted_as_the_fused_cuda_cell_with_exact_gradients(cls):
    """nn.LSTMCell / nn.GRUCell on CUDA run two GEMMs and one fused gate kernel per step (ATen's
    _thnn_fused_*_cell), not the dozen elementwise ops the CPU path decomposes into. Mutations
    caught: cells counted op by op (more kernels per step), the counted backward dropping a
    gradient (values differ)."""
    torch.manual_seed(0)
    cell = cls(4, 8)
    x = torch.randn(3, 4, requires_grad=True)

    def run():
        cell.zero_grad()
        x.grad = None
        state = (torch.zeros(3, 8), torch.zeros(3, 8)) if cls is nn.LSTMCell else torch.zeros(3, 8)
        for _ in range(2):
            state = cell(x, state)
        out = state[0] if cls is nn.LSTMCell else state
        out.square().sum().backward()
        return [out.detach().clone(), x.grad.clone(), *(p.grad.clone() for p in cell.parameters())]

    recorder = _assert_counting_keeps_values(run)
    cells = [op[0] for op in recorder.ops if op[0].startswith("cell_")]
    assert len(cells) == 2 * (3 + 6)  # steps x (2 GEMMs + gates forward; gates, bias, 4 GEMMs backward)
    assert cells.count("cell_gates") == 2


def test_a_depthwise_convolution_is_counted_with_its_groups_on_the_vector_units():
    """torch 2.13's flop formula for a convolution's backward ignores the groups (a depthwise
    backward counted as dense, channels-times too much); thrifty counts each gradient as the
    forward's FLOPs, and a depthwise convolution as a vector kernel (cuDNN runs it on the CUDA
    cores, not as a tensor-core GEMM). Mutations caught: torch's formula kept (FLOPs 86x), the
    depthwise kernel labelled a convolution (kind)."""
    from thrifty.perf.work import KIND_CONV, KIND_OTHER
    channels, frames, kernel, batch = 256, 840, 33, 2
    conv = lambda: nn.Conv1d(channels, channels, kernel, padding=kernel // 2, groups=channels, bias=False)  # noqa: E731
    work = count_model_step(conv, lambda b, d: (torch.zeros(b, channels, frames, device=d), None),
                            lambda out, _: out.sum(), None, batches=(batch, 2 * batch))
    forward = 2 * channels * frames * kernel  # per sample: one multiply-add per tap and output
    # forward and weight gradient (the model's input needs no gradient: output_mask[0] is false)
    assert work.flops(1) - work.flops(0) == pytest.approx(2 * forward)
    conv_kinds = work.kind[work.flops_per_sample > 0]
    assert set(conv_kinds.tolist()) == {KIND_OTHER}
    dense = count_model_step(lambda: nn.Conv1d(channels, channels, 1, bias=False),
                             lambda b, d: (torch.zeros(b, channels, frames, device=d), None),
                             lambda out, _: out.sum(), None, batches=(batch, 2 * batch))
    assert KIND_CONV in set(dense.kind[dense.flops_per_sample > 0].tolist())


def test_merging_repeated_kernels_keeps_the_step_and_its_regimes():
    """StepWork.merged folds identical kernels (a decoder's frames, a network's repeated layers)
    into one with a launch count. Mutations caught: the roofline summing distinct kernels only
    (the merged step would be faster), totals or the kernel count ignoring the count."""
    from thrifty.perf.roofline import regime_times_s
    work = gru_work()
    a, b = one_kernel(1e6, 1e3, 4e3), one_kernel(5e9, 1e6, 1e7)
    arrays = ("kind", "flops_fixed", "flops_per_sample", "bytes_fixed", "bytes_per_sample", "outputs_fixed",
              "outputs_per_sample")
    repeated = StepWork(*(np.concatenate([getattr(k, n) for k in (a, a, b, a)]) for n in arrays),
                        param_count=0, gradient_bytes=0.0)
    merged = repeated.merged()
    assert merged.kind.size == 2 and merged.kernels == repeated.kernels == 4
    for w in (repeated, work):
        m = w.merged()
        assert m.flops(64) == pytest.approx(w.flops(64)) and m.bytes(64) == pytest.approx(w.bytes(64))
        for gpu in ("t4", "a100"):
            assert compute_time_s(m, SPECS[gpu], BATCHES, "amp", PARAMS) == pytest.approx(
                compute_time_s(w, SPECS[gpu], BATCHES, "amp", PARAMS))
            assert regime_times_s(m, SPECS[gpu], 64, "fp32", PARAMS) == pytest.approx(
                regime_times_s(w, SPECS[gpu], 64, "fp32", PARAMS))
    assert StepWork.from_dict(merged.to_dict()).kernels == 4
