# SPDX-License-Identifier: MIT
"""Select VM types by cloud, region, accelerator, size and price."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from thrifty.catalog.vmtype import VMType
from thrifty.errors import CatalogError


def _is_variant(accelerator: str, asked: str) -> bool:
    """A100 asks for the A100 and its variants (A100-80GB), not for another GPU whose name it begins
    (A10 is not A100 nor A10G)."""
    return accelerator == asked or accelerator.startswith(asked + "-")


@dataclass(frozen=True)
class CatalogFilter:
    """Each field left as None accepts everything. `gpu` True keeps GPU VMs, False CPU-only ones.
    `accelerator` is a GPU name (A100 takes its variants) or NAME:COUNT as the plan's SkyPilot task
    and `model project --accelerator` write it (T4:4: VMs with four)."""

    clouds: Sequence[str] | None = None
    regions: Sequence[str] | None = None
    accelerator: str | None = None
    gpu: bool | None = None
    min_vcpus: float | None = None
    min_memory_gib: float | None = None
    max_price_per_hour: float | None = None
    instance_types: Sequence[str] | None = None
    # `accelerator` read once: (name in lower case, count or None)
    _wanted_gpus: tuple[str, int | None] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Cloud and region names compare in lower case (AWS is aws, US-EAST-1 us-east-1), once."""
        for name in ("clouds", "regions"):
            names = getattr(self, name)
            if names is not None:
                object.__setattr__(self, name, frozenset(n.strip().lower() for n in names))
        if self.accelerator is not None:
            name, colon, count = self.accelerator.lower().partition(":")
            if colon and not (count.strip().isascii() and count.strip().isdecimal() and int(count) > 0):
                raise CatalogError(f"--accelerator {self.accelerator!r}: give NAME or NAME:COUNT, e.g. A100 or T4:4")
            object.__setattr__(self, "_wanted_gpus", (name.strip(), int(count) if colon else None))

    def _accelerator_matches(self, vm: VMType) -> bool:
        if self._wanted_gpus is None:
            return True
        name, count = self._wanted_gpus
        return _is_variant((vm.accelerator or "").lower(), name) and (count is None or vm.accelerator_count == count)

    def accepts(self, vm: VMType) -> bool:
        checks = (
            self.clouds is None or vm.cloud.lower() in self.clouds,
            self.regions is None or vm.region.lower() in self.regions,
            self._accelerator_matches(vm),
            self.gpu is None or vm.is_gpu == self.gpu,
            self.min_vcpus is None or vm.vcpus >= self.min_vcpus,
            self.min_memory_gib is None or vm.memory_gib >= self.min_memory_gib,
            self.max_price_per_hour is None or vm.price_per_hour <= self.max_price_per_hour,
            self.instance_types is None or vm.instance_type in self.instance_types,
        )
        return all(checks)

    def apply(self, vms: Sequence[VMType]) -> list[VMType]:
        return [vm for vm in vms if self.accepts(vm)]
