# SPDX-License-Identifier: MIT
"""Select VM types by cloud, region, accelerator, size and price."""

from collections.abc import Sequence
from dataclasses import dataclass

from thrifty.catalog.vmtype import VMType


@dataclass(frozen=True)
class CatalogFilter:
    """Each field left as None accepts everything. `gpu` True keeps GPU VMs, False CPU-only ones."""

    clouds: Sequence[str] | None = None
    regions: Sequence[str] | None = None
    accelerator: str | None = None
    gpu: bool | None = None
    min_vcpus: float | None = None
    min_memory_gib: float | None = None
    max_price_per_hour: float | None = None
    instance_types: Sequence[str] | None = None

    def accepts(self, vm: VMType) -> bool:
        checks = (
            self.clouds is None or vm.cloud in {c.lower() for c in self.clouds},
            self.regions is None or vm.region.lower() in {r.lower() for r in self.regions},
            self.accelerator is None
            or (vm.accelerator or "").lower() == self.accelerator.lower(),
            self.gpu is None or vm.is_gpu == self.gpu,
            self.min_vcpus is None or vm.vcpus >= self.min_vcpus,
            self.min_memory_gib is None or vm.memory_gib >= self.min_memory_gib,
            self.max_price_per_hour is None or vm.price_per_hour <= self.max_price_per_hour,
            self.instance_types is None or vm.instance_type in self.instance_types,
        )
        return all(checks)

    def apply(self, vms: Sequence[VMType]) -> list[VMType]:
        return [vm for vm in vms if self.accepts(vm)]
