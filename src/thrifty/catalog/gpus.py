# SPDX-License-Identifier: MIT
"""GPU specs by the catalog's accelerator name (data/gpus.csv; data/gpu/gpu_specs.csv for the
calibration's GPUs): peak rates, memory, SMs, clocks and board power, as the vendors publish them.
The step-time model that uses them is perf.roofline."""

import math
from dataclasses import dataclass
from pathlib import Path

from thrifty.data import data_path
from thrifty.errors import CatalogError
from thrifty.io import read_csv


@dataclass(frozen=True)
class GPUSpec:
    """Peak rates of one GPU (dense, no sparsity, at the boost clock); NaN where the GPU has no
    such unit."""

    name: str
    fp32_tflops: float
    tf32_tflops: float
    fp16_tensor_tflops: float
    mem_bw_gbs: float
    memory_gib: float
    interconnect_gbps: float  # GPU-to-GPU inside one machine (NVLink or PCIe), Gbit/s
    sm_count: int
    base_mhz: float  # guaranteed at the TDP under a heavy load
    boost_mhz: float  # the clock the peak rates are quoted at
    tdp_w: float  # board power limit
    compute_capability: tuple[int, int] | None = None  # (major, minor); None where the specs file gives none

    @property
    def has_bf16(self) -> bool:
        """Whether the GPU has BF16 tensor cores: Ampere and later, which brought TF32 with them
        (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020). Each runs BF16 at its FP16
        tensor rate: the A10, L4, A100 and H100 rows of data/gpu/gpu_specs.csv give both rates,
        equal; PyTorch's bfloat16 autocast needs compute capability 8.0 or more."""
        return math.isfinite(self.tf32_tflops)

    @property
    def has_tensor_cores(self) -> bool:
        """Whether the GPU has tensor cores (an FP16 tensor rate): Volta and later."""
        return math.isfinite(self.fp16_tensor_tflops)

    @property
    def die(self) -> tuple[float | None, ...]:
        """The chip at its peak rates: FP32, TF32 and FP16 tensor rates, SMs and boost clock (None
        where the GPU has no such unit). GPUs of one die (A100 PCIe and SXM4, 40 and 80 GB) differ
        in memory, base clock and power limit only."""
        rates = (self.fp32_tflops, self.tf32_tflops, self.fp16_tensor_tflops, float(self.sm_count), self.boost_mhz)
        return tuple(None if math.isnan(rate) else rate for rate in rates)

    def sustained_clock_fraction(self, power_fraction: float) -> float:
        """Sustained SM clock / boost clock under a load drawing `power_fraction` of the power of
        the load that defines the base clock (cube law of dynamic power: perf.roofline)."""
        return min(1.0, self.base_mhz * power_fraction ** (-1.0 / 3.0) / self.boost_mhz)


def _rate(row: dict[str, str], column: str, name: str, *, optional: bool = False) -> float:
    """A finite positive number from `column`; with `optional`, a blank cell is NaN (the GPU has
    no such unit). A written NaN, an infinity, zero or a negative value is refused: a nonsense spec
    would otherwise come out as a GPU faster than any real one, or drop out of every plan."""
    text = (row.get(column) or "").strip()
    if optional and not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: {column} must be a finite positive number"
                         f"{' or blank' if optional else ''}, got {text!r}")
    return value


GPU_SPEC_COLUMNS = ("name", "fp32_tflops", "tf32_tflops", "fp16_tensor_tflops", "mem_bw_gbs", "memory_gib",
                    "interconnect_gbps", "sm_count", "base_mhz", "boost_mhz", "tdp_w")


def parse_capability(text: str) -> tuple[int, int] | None:
    """A compute capability "7.5" as (7, 5); None where `text` does not read MAJOR.MINOR."""
    major, dot, minor = text.partition(".")
    return (int(major), int(minor)) if dot and major.isdigit() and minor.isdigit() and len(minor) == 1 else None


def _capability(row: dict[str, str], name: str) -> tuple[int, int] | None:
    """`compute_capability` as (major, minor) from "7.5"; None where the column is blank or absent
    (a user's specs file from before the column: nothing is then known of the GPU's kernels)."""
    text = (row.get("compute_capability") or "").strip()
    if not text:
        return None
    capability = parse_capability(text)
    if capability is None:
        raise ValueError(f"{name}: compute_capability must read MAJOR.MINOR, such as 7.5, got {text!r}")
    return capability


def gpu_spec(row: dict[str, str], name: str, interconnect_gbps: float) -> GPUSpec:
    """A GPUSpec from a CSV row with the columns of data/gpus.csv (or data/gpu/gpu_specs.csv);
    ValueError naming the GPU and the column where a value is not a finite positive number."""
    sm_count = _rate(row, "sm_count", name)
    if sm_count != int(sm_count):
        raise ValueError(f"{name}: sm_count must be a whole number, got {row['sm_count'].strip()!r}")
    spec = GPUSpec(name, _rate(row, "fp32_tflops", name), _rate(row, "tf32_tflops", name, optional=True),
                   _rate(row, "fp16_tensor_tflops", name, optional=True), _rate(row, "mem_bw_gbs", name),
                   _rate(row, "memory_gib", name), interconnect_gbps, int(sm_count), _rate(row, "base_mhz", name),
                   _rate(row, "boost_mhz", name), _rate(row, "tdp_w", name), _capability(row, name))
    if spec.base_mhz > spec.boost_mhz:
        raise ValueError(f"{name}: base_mhz must be at most boost_mhz")
    return spec


def read_gpu_specs(path: Path | None = None) -> dict[str, GPUSpec]:
    """GPU specs by the catalog's accelerator name (data/gpus.csv)."""
    path = Path(path) if path else data_path("gpus.csv")
    rows = read_csv(path, CatalogError, "GPU specs", required=GPU_SPEC_COLUMNS)
    try:
        return {r["name"].lower(): gpu_spec(r, r["name"], _rate(r, "interconnect_gbps", r["name"], optional=True))
                for r in rows}
    except ValueError as exc:
        raise CatalogError(f"cannot read GPU specs {path}: {exc}") from None
