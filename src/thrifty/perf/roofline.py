"""Step time of counted work on a GPU: a per-kernel roofline with a launch floor, calibrated on
published training throughput (perf.gpu_calibration; data/gpu/roofline_params.json).

One kernel i of a step at local batch b, with FLOPs f_i(b) and bytes m_i(b) (perf.work):
  t_i = max(launch_s,                                            eager dispatch + launch floor
            (f_i + f_half) / (peak_i * e_max),                   compute: efficiency e_max f/(f + f_half)
            m_i / (bandwidth * e_bw))                            memory   (Williams et al. 2009, roofline)
  T_compute(b) = sum_i t_i
The compute term is a roofline whose efficiency falls for small kernels: f / (peak e(f)) with
e(f) = e_max f / (f + f_half), so a half-full GPU runs at half its best rate (small batches leave a
GPU under-used). peak_i is the tensor-core rate for matrix kernels when the precision uses them
(TF32 / FP16), else the FP32 vector rate; e_max differs between the two. AMP halves the bytes of
activations (the per-sample part).
n GPUs: ring all-reduce of the gradients over the GPU interconnect at a fitted fraction of its
bandwidth (perf.network), overlapped with compute as T = (T_c^g + T_ar^g)^(1/g) (Pollux, OSDI 2021).
"""

import functools
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from thrifty.data import data_path
from thrifty.errors import CatalogError, ModelError
from thrifty.io import read_csv
from thrifty.perf.network import INTRA_NODE_LATENCY_S, ring_allreduce_time_s
from thrifty.perf.work import KIND_CONV, KIND_MATMUL, StepWork

PRECISIONS = ("fp32", "tf32", "amp")
AMP_ACTIVATION_BYTES = 0.5  # FP16 activations are half as large as FP32 ones


@dataclass(frozen=True)
class GPUSpec:
    """Peak rates of one GPU (dense, no sparsity); NaN where the GPU has no such unit."""

    name: str
    fp32_tflops: float
    tf32_tflops: float
    fp16_tensor_tflops: float
    mem_bw_gbs: float
    memory_gib: float
    interconnect_gbps: float  # GPU-to-GPU inside one machine (NVLink or PCIe), Gbit/s

    def matrix_peak_flops(self, kind: int, precision: str) -> tuple[float, bool]:
        """(peak FLOP/s, uses tensor cores) for a kernel of `kind` at `precision`.

        fp32 is PyTorch's default: convolutions may use TF32 (torch.backends.cudnn.allow_tf32 is
        True by default), matrix multiplies do not (torch.backends.cuda.matmul.allow_tf32 False)."""
        is_matrix = kind in (KIND_MATMUL, KIND_CONV)
        if is_matrix and precision == "amp" and math.isfinite(self.fp16_tensor_tflops):
            return self.fp16_tensor_tflops * 1e12, True
        tf32_here = precision == "tf32" or (precision == "fp32" and kind == KIND_CONV)
        if is_matrix and tf32_here and math.isfinite(self.tf32_tflops):
            return self.tf32_tflops * 1e12, True
        return self.fp32_tflops * 1e12, False


@dataclass(frozen=True)
class RooflineParams:
    """Calibrated constants of the model above (fitted by perf.gpu_calibration)."""

    launch_s: float  # per-kernel floor: eager PyTorch dispatch and launch
    vector_efficiency: float  # e_max on FP32 vector units
    tensor_efficiency: float  # e_max on tensor cores
    half_efficiency_flops: float  # f_half: kernel FLOPs at which efficiency is half of e_max
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


def _float(text: str) -> float:
    return float(text) if text.strip() else math.nan


GPU_SPEC_COLUMNS = ("name", "fp32_tflops", "tf32_tflops", "fp16_tensor_tflops", "mem_bw_gbs", "memory_gib",
                    "interconnect_gbps")


def read_gpu_specs(path: Path | None = None) -> dict[str, GPUSpec]:
    """GPU specs by the catalog's accelerator name (data/gpus.csv)."""
    path = Path(path) if path else data_path("gpus.csv")
    rows = read_csv(path, CatalogError, "GPU specs", required=GPU_SPEC_COLUMNS)
    try:
        return {r["name"].lower(): GPUSpec(r["name"], _float(r["fp32_tflops"]), _float(r["tf32_tflops"]),
                                           _float(r["fp16_tensor_tflops"]), _float(r["mem_bw_gbs"]),
                                           _float(r["memory_gib"]), _float(r["interconnect_gbps"]))
                for r in rows}
    except ValueError as exc:
        raise CatalogError(f"cannot read GPU specs {path}: {exc}") from None


def compute_time_s(work: StepWork, spec: GPUSpec, local_batch, precision: str,
                   params: RooflineParams) -> np.ndarray:
    """T_compute of one step for each local batch (1-d array in, 1-d array out)."""
    if precision not in PRECISIONS:
        raise ModelError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    b = np.atleast_1d(np.asarray(local_batch, float))[None, :]
    peaks, tensor = zip(*(spec.matrix_peak_flops(int(k), precision) for k in (KIND_MATMUL, KIND_CONV, 2)))
    kind = work.kind
    peak = np.asarray(peaks)[kind][:, None]
    efficiency = np.where(np.asarray(tensor)[kind], params.tensor_efficiency, params.vector_efficiency)[:, None]
    flops = work.flops_fixed[:, None] + work.flops_per_sample[:, None] * b
    act = AMP_ACTIVATION_BYTES if precision == "amp" else 1.0
    nbytes = work.bytes_fixed[:, None] + act * work.bytes_per_sample[:, None] * b
    compute = np.where(flops > 0, (flops + params.half_efficiency_flops) / (peak * efficiency), 0.0)
    memory = nbytes / (spec.mem_bw_gbs * 1e9 * params.bandwidth_efficiency)
    return np.maximum(params.launch_s, np.maximum(compute, memory)).sum(axis=0)


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
