# SPDX-License-Identifier: MIT
"""Step time of counted work on a GPU: per kernel, a launch floor, the SMs it can fill, the clock the
board sustains under its power limit, and a roofline; calibrated on published training throughput
(perf.gpu_calibration; data/gpu/roofline_params.json).

One kernel i of a step at local batch b, with FLOPs f_i(b), bytes m_i(b) and output elements o_i(b)
(perf.work):
  t_i = max(launch_s,                                      host dispatch + launch of one kernel
            f_i / (peak_i * clock / boost * e_max * u_i),  compute
            m_i / (bandwidth * e_bw))                      memory  (Williams et al. 2009, roofline)
  w_i = p_i / (outputs_per_sm * SMs)  waves of thread blocks over p_i, the kernel's parallel work (its
                                      outputs; a deep matmul's multiply-adds in split-K slices);
                                      u_i = w_i / ceil(w_i) the busy fraction
                                      of the SMs (wave quantisation; a kernel smaller than one wave
                                      runs on w_i of the SMs: Volkov 2016, "Understanding Latency
                                      Hiding on GPUs"; NVIDIA, "Matrix Multiplication Background
                                      User's Guide", wave quantization)
  clock = min(boost, base * power_fraction**(-1/3))        sustained SM clock: the base clock is the
                                      one NVIDIA guarantees at the board's TDP under a heavy load;
                                      dynamic power ~ C V^2 f with V ~ f in the DVFS range (so ~f^3),
                                      and a training kernel draws `power_fraction` of that load's
                                      power at the same clock. Spec peaks are boost-clock figures.
                                      That heavy load runs on the units with the highest throughput:
                                      the tensor cores, on every GPU that has them (8-16x the FP32
                                      rate: Volta and later), so a tensor-core kernel runs at the
                                      sustained clock; on a GPU without tensor cores (K80, P100, P4)
                                      the FP32 units are that load and are held back the same way.
                                      Fitted on the published rows, the power fraction goes to 1
                                      (tensor kernels at the base clock) and the held-out
                                      compute-bound error falls 2.4 / 1.6 points against one clock
                                      for every kernel (docs/gpu-projection.md).
                                      An FP32 CUDA-core kernel of a tensor-core GPU draws
                                      FP32_POWER_FRACTION (0.11) of the base-clock load's power:
                                      at boost on every GPU with training rows, held back where the
                                      board's power is short even of that (T4 77% of boost, L4 81%,
                                      L40S 92%). Derived, not fitted (no training row on those
                                      GPUs): the V100 runs its published FP32 rows at boost, so its
                                      FP32 load draws at most its 300 W at 15.7 TFLOPS, 19.1 pJ a
                                      FLOP; the T4, made on the same process (TSMC 12 nm FFN), would
                                      draw 8.1 TFLOPS x 19.1 pJ = 155 W at boost, so at its 70 W it
                                      sustains 1590 x (70 / 155)^(1/3) = 1,220 MHz (cube law), which
                                      against its 585 MHz base is a fraction (585 / 1220)^3 = 0.11.
                                      Issue 22 found the older boost-clock model within 10% of a
                                      real T4 on ResNet-18 FP32 (1,127 img/s at batch 128); this
                                      rule gives 1,135 there, FP32 at boost 1,374.
  T_compute(b) = sum_i t_i
outputs_per_sm differs between matrix kernels (a GEMM/conv tile per SM) and the rest; peak_i is the
tensor-core rate for matrix kernels when the precision uses them (TF32 / FP16), else the FP32 vector
rate; e_max differs between the two, and on tensor cores between matrix multiplies and convolutions:
cuDNN runs a convolution as an implicit GEMM whose operand tiles are gathered from the activation
(im2col on the fly) and whose filter shapes (3x3, 7x7, strided, few input channels) fill the
tensor-core tiles less well than a plain GEMM does (NVIDIA, "Convolutional Layers User's Guide",
implicit GEMM and its channel-count and layout conditions). AMP halves the bytes of activations (the
per-sample part). BF16 autocast (`bf16`) is projected as AMP on the GPUs that have BF16 tensor cores
(Ampere and later, at the FP16 tensor rate: catalog.gpus.GPUSpec.has_bf16), with AMP's fitted
efficiencies: no published row is in BF16; the plan offers no other GPU under it.
n GPUs: ring all-reduce of the gradients over the GPU interconnect at a fitted fraction of its
bandwidth (perf.allreduce), overlapped with compute as T = (T_c^g + T_ar^g)^(1/g) (Pollux, OSDI 2021).
"""

import functools
import json
import math
from dataclasses import asdict, dataclass

import numpy as np

from thrifty.catalog.gpus import GPUSpec
from thrifty.catalog.gpus import read_gpu_specs as read_gpu_specs  # re-exported: its importers predate catalog.gpus
from thrifty.data import data_path
from thrifty.errors import ModelError
from thrifty.perf.allreduce import INTRA_NODE_LATENCY_S, ring_allreduce_time_s
from thrifty.perf.work import KIND_CONV, KIND_MATMUL, StepWork

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
HALF_PRECISIONS = ("amp", "bf16")  # 16-bit activations by autocast (float16 or bfloat16)
# Reduction depth beyond which GEMM libraries split K across thread blocks (CUTLASS "split-K
# serial/parallel" GEMMs; cuBLAS picks split-K for deep, narrow products such as weight gradients
# over a large batch). A modelling choice of the order of those libraries' slice depths.
SPLIT_K_DEPTH = 4096.0
AMP_ACTIVATION_BYTES = 0.5  # FP16 activations are half as large as FP32 ones
# Power of an FP32 CUDA-core load of a tensor-core GPU over the load that sets its base clock, at
# the same clock: derived from the V100's and the T4's specs (module docstring), not fitted.
FP32_POWER_FRACTION = 0.11


@dataclass(frozen=True)
class RooflineParams:
    """Calibrated constants of the model above (fitted by perf.gpu_calibration)."""

    launch_s: float  # per-kernel floor: eager PyTorch dispatch and launch
    vector_efficiency: float  # e_max on FP32 vector units
    tensor_efficiency: float  # e_max of matrix multiplies (cuBLAS GEMMs) on tensor cores
    conv_tensor_efficiency: float  # e_max of convolutions (cuDNN implicit GEMM) on tensor cores
    matrix_outputs_per_sm: float  # output elements one SM computes per wave of a matmul/conv
    vector_outputs_per_sm: float  # the same for every other kernel
    power_fraction: float  # power of a kernel on the held-back units / the base-clock load, same clock
    bandwidth_efficiency: float  # e_bw: fraction of peak memory bandwidth
    allreduce_efficiency: float  # fraction of interconnect bandwidth an all-reduce reaches
    overlap_g: float  # g in (T_c^g + T_ar^g)^(1/g)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RooflineParams":
        try:
            params = cls(**{k: float(data[k]) for k in cls.__dataclass_fields__})
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"roofline parameters are incomplete or malformed: {exc}") from None
        if not all(math.isfinite(v) and v > 0 for v in asdict(params).values()):
            raise ModelError("roofline parameters must be positive numbers")
        return params


@functools.cache
def load_params() -> tuple[RooflineParams, dict]:
    """The bundled calibration (parameters and its held-out error summary), read once."""
    data = json.loads(data_path("gpu", "roofline_params.json").read_text())
    return RooflineParams.from_dict(data["params"]), data


def matrix_peak_flops(spec: GPUSpec, kind: int, precision: str) -> tuple[float, bool]:
    """(peak FLOP/s, uses tensor cores) for a kernel of `kind` at `precision` on `spec`.

    fp32 is PyTorch's default: convolutions may use TF32 (torch.backends.cudnn.allow_tf32 is
    True by default), matrix multiplies do not (torch.backends.cuda.matmul.allow_tf32 False)."""
    is_matrix = kind in (KIND_MATMUL, KIND_CONV)
    if is_matrix and precision == "amp" and spec.has_tensor_cores:
        return spec.fp16_tensor_tflops * 1e12, True
    if is_matrix and precision == "bf16" and spec.has_bf16:  # at the FP16 tensor rate (catalog.gpus)
        return spec.fp16_tensor_tflops * 1e12, True
    tf32_here = precision == "tf32" or (precision == "fp32" and kind == KIND_CONV)
    if is_matrix and tf32_here and math.isfinite(spec.tf32_tflops):
        return spec.tf32_tflops * 1e12, True
    return spec.fp32_tflops * 1e12, False


def kernel_times_s(work: StepWork, spec: GPUSpec, local_batch, precision: str,
                   params: RooflineParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(launch floor, compute, memory) time of every kernel (rows) at every local batch (columns)."""
    if precision not in PRECISIONS:
        raise ModelError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    b = np.atleast_1d(np.asarray(local_batch, float))[None, :]
    peaks, tensor = zip(*(matrix_peak_flops(spec, int(k), precision) for k in (KIND_MATMUL, KIND_CONV, 2)), strict=True)
    kind = work.kind
    # the power limit holds back the units that set the base clock, and the FP32 units of a
    # tensor-core GPU where even their lighter load outdraws the board (module docstring)
    limited = np.asarray(tensor) | (not spec.has_tensor_cores)
    clock = np.where(limited, spec.sustained_clock_fraction(params.power_fraction),
                     spec.sustained_clock_fraction(FP32_POWER_FRACTION))
    peak = (np.asarray(peaks) * clock)[kind][:, None]
    on_tensor_cores = (params.tensor_efficiency, params.conv_tensor_efficiency, params.tensor_efficiency)  # by kind
    efficiency = np.where(tensor, on_tensor_cores, params.vector_efficiency)[kind][:, None]
    flops = work.flops_fixed[:, None] + work.flops_per_sample[:, None] * b
    act = AMP_ACTIVATION_BYTES if precision in HALF_PRECISIONS else 1.0
    nbytes = work.bytes_fixed[:, None] + act * work.bytes_per_sample[:, None] * b
    outputs = np.maximum(work.outputs_fixed[:, None] + work.outputs_per_sample[:, None] * b, 1.0)
    is_matrix = ((kind == KIND_MATMUL) | (kind == KIND_CONV))[:, None]
    # a matmul whose reduction is deeper than SPLIT_K_DEPTH is split along it (split-K), so its
    # parallel work is its multiply-adds in slices of that depth, not only its outputs
    parallel = np.where(is_matrix, np.maximum(outputs, flops / (2.0 * SPLIT_K_DEPTH)), outputs)
    per_sm = np.where(is_matrix, params.matrix_outputs_per_sm, params.vector_outputs_per_sm)
    waves = parallel / (per_sm * spec.sm_count)
    busy = waves / np.ceil(waves)  # wave quantisation: the last wave leaves SMs idle
    compute = np.where(flops > 0, flops / (peak * efficiency * busy), 0.0)
    memory = nbytes / (spec.mem_bw_gbs * 1e9 * params.bandwidth_efficiency)
    return np.full(compute.shape, params.launch_s), compute, memory


def compute_time_s(work: StepWork, spec: GPUSpec, local_batch, precision: str,
                   params: RooflineParams) -> np.ndarray:
    """T_compute of one step for each local batch (1-d array in, 1-d array out)."""
    launch, compute, memory = kernel_times_s(work, spec, local_batch, precision, params)
    return work.count @ np.maximum(launch, np.maximum(compute, memory))


def regime_times_s(work: StepWork, spec: GPUSpec, local_batch: float, precision: str,
                   params: RooflineParams) -> dict[str, float]:
    """T_compute at one local batch split by what bounds each kernel: launch, memory or compute."""
    launch, compute, memory = (t[:, 0] for t in kernel_times_s(work, spec, [local_batch], precision, params))
    bound = np.argmax(np.stack([launch, memory, compute]), axis=0)
    total = work.count * np.maximum(launch, np.maximum(compute, memory))
    return {name: float(total[bound == i].sum()) for i, name in enumerate(REGIMES)}


REGIMES = ("launch", "memory", "compute")


def step_time_s(work: StepWork, spec: GPUSpec, local_batch, gpus, precision: str,
                params: RooflineParams, bandwidth_gbps=None) -> np.ndarray:
    """Step time on `gpus` data-parallel GPUs (arrays broadcast), all-reduce over `bandwidth_gbps`
    (default: the GPU interconnect inside one machine)."""
    compute = compute_time_s(work, spec, local_batch, precision, params)
    link = spec.interconnect_gbps if bandwidth_gbps is None else np.asarray(bandwidth_gbps, float)
    allreduce = ring_allreduce_time_s(gpus, work.gradient_bytes, link * params.allreduce_efficiency,
                                      INTRA_NODE_LATENCY_S)
    g = params.overlap_g
    return (compute**g + allreduce**g) ** (1.0 / g)
