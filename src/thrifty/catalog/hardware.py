# SPDX-License-Identifier: MIT
"""What thrifty assumes about a VM type's hardware (see data/HARDWARE.md): the per-vCPU speed of
its CPU family relative to the profiling machine, its GPUs' peak rates (data/gpus.csv), and its
network bandwidth."""

import fnmatch
import math
from dataclasses import dataclass
from pathlib import Path

from thrifty.catalog.gpus import GPUSpec, read_gpu_specs
from thrifty.catalog.vmtype import VMType
from thrifty.data import data_path
from thrifty.errors import CatalogError
from thrifty.io import read_csv

HARDWARE_COLUMNS = ("name", "speed_per_vcpu")
NETWORK_COLUMNS = ("cloud", "instance_pattern", "per_vcpu_gbps", "cap_gbps")


def _read_csv(path: Path, columns: tuple[str, ...], what: str) -> list[dict[str, str]]:
    return read_csv(path, CatalogError, what, required=columns, allow_empty=True)


def _positive(text: str, where: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise CatalogError(f"{where}: {text!r} is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise CatalogError(f"{where}: {text!r} must be a finite positive number")
    return value


@dataclass(frozen=True)
class Hardware:
    """Lookup tables for CPU speed factors, GPU specs (perf.roofline) and per-VM network bandwidth."""

    cpu_factors: tuple[tuple[str, float], ...]  # (CLOUD:PATTERN, per-vCPU factor), first match wins
    gpus: dict[str, GPUSpec]
    network: tuple[tuple[str, str, float | None, float], ...]

    @classmethod
    def load(cls, hardware_path: Path | None = None, network_path: Path | None = None,
             gpus_path: Path | None = None) -> "Hardware":
        hw_path = Path(hardware_path) if hardware_path else data_path("hardware.csv")
        net_path = Path(network_path) if network_path else data_path("network.csv")
        cpu: list[tuple[str, float]] = []
        seen: dict[str, int] = {}
        for line, row in enumerate(_read_csv(hw_path, HARDWARE_COLUMNS, "--hardware file"), start=2):
            speed = _positive(row["speed_per_vcpu"], f"{hw_path}:{line}")
            if speed is None:
                raise CatalogError(f"{hw_path}:{line}: speed_per_vcpu is empty")
            if row["name"] in seen:  # the first would win in silence
                raise CatalogError(f"{hw_path}:{line}: {row['name']} is on line {seen[row['name']]} already")
            seen[row["name"]] = line
            cpu.append((row["name"], speed))
        net = []
        for line, row in enumerate(_read_csv(net_path, NETWORK_COLUMNS, "--network file"), start=2):
            cap = _positive(row["cap_gbps"], f"{net_path}:{line}")
            if cap is None:
                raise CatalogError(f"{net_path}:{line}: cap_gbps is empty")
            net.append((row["cloud"], row["instance_pattern"],
                        _positive(row["per_vcpu_gbps"], f"{net_path}:{line}"), cap))
        return cls(tuple(cpu), read_gpu_specs(gpus_path), tuple(net))

    def cpu_factor(self, vm: VMType) -> float:
        key = vm.qualified_type
        for pattern, factor in self.cpu_factors:
            if fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(key, pattern + "*"):
                return factor
        return 1.0

    def gpu(self, vm: VMType) -> GPUSpec:
        spec = self.gpus.get((vm.accelerator or "").lower())
        if spec is None:
            raise CatalogError(
                f"no specs for accelerator {vm.accelerator!r} of {vm.label}: add a row to a GPU "
                f"specs file (columns of data/gpus.csv) and pass it with --gpus")
        return spec

    def rank_memory_gib(self, vm: VMType) -> float:
        return self.gpu(vm).memory_gib if vm.is_gpu else vm.memory_gib

    def network_gbps(self, vm: VMType) -> float:
        """Bandwidth between VMs (data/network.csv: first matching rule)."""
        for cloud, pattern, per_vcpu, cap in self.network:
            if cloud in (vm.cloud, "*") and fnmatch.fnmatchcase(vm.instance_type, pattern):
                return cap if per_vcpu is None else min(per_vcpu * vm.vcpus, cap)
        return 10.0

    def intra_node_gbps(self, vm: VMType) -> float:
        """Bandwidth between ranks inside one VM (GPU interconnect; unused for CPU VMs)."""
        return self.gpu(vm).interconnect_gbps if vm.is_gpu else self.network_gbps(vm)
