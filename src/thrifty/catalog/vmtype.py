# SPDX-License-Identifier: MIT
"""One rentable VM type with its prices: the unit every candidate configuration is built from."""

from dataclasses import dataclass

MINIMUM_BILLED_S = 60.0  # AWS, GCP and Azure bill Linux VMs per second after a one-minute minimum


@dataclass(frozen=True)
class VMType:
    """A VM type in one region. GPU VMs on GCP are host + attachment, already summed."""

    cloud: str
    instance_type: str
    region: str
    zone: str
    vcpus: float
    memory_gib: float
    accelerator: str | None
    accelerator_count: int
    price_per_hour: float
    spot_price_per_hour: float | None

    @property
    def is_gpu(self) -> bool:
        return self.accelerator is not None and self.accelerator_count > 0

    @property
    def ranks_per_node(self) -> int:
        """Data-parallel ranks one VM runs: one per GPU, or one using all vCPUs on a CPU VM."""
        return self.accelerator_count if self.is_gpu else 1

    @property
    def qualified_type(self) -> str:
        """`cloud:type`, as the plan prints a VM type."""
        return f"{self.cloud}:{self.instance_type}"

    @property
    def type_names(self) -> tuple[str, str]:
        """The names that denote this type in a probe or a trace: the bare type and `cloud:type`."""
        return self.instance_type, self.qualified_type

    @property
    def label(self) -> str:
        gpu = f" ({self.accelerator_count}x {self.accelerator})" if self.is_gpu else ""
        return f"{self.qualified_type}{gpu}"
