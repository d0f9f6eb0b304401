# SPDX-License-Identifier: MIT
"""What a cloud bills a job that moves between configurations: per second, with a one-minute
minimum per VM lifetime (catalog.vmtype.MINIMUM_BILLED_S, as AWS, GCP and Azure bill Linux VMs).

A launch on new VMs (search.config.needs_new_vms: another type, or more nodes) ends the running
VMs' lifetime, billed at least MINIMUM_BILLED_S, and starts a new one. A launch on the VMs already
running (another batch or fewer workers on the same machines) continues their lifetime: what
is left of their minimum still counts from when they started."""

from thrifty.catalog.vmtype import MINIMUM_BILLED_S


class Billing:
    """The bill of one job: closed parts in dollars, and the part running now."""

    def __init__(self) -> None:
        self.closed_usd = 0.0
        self.price_per_hour: float | None = None  # of the running configuration, all its nodes
        self.part_s = 0.0  # seconds billed at that price so far
        self.floor_s = 0.0  # the least those seconds will be billed (the minimum left)

    def launch(self, price_per_hour: float, new_vms: bool) -> None:
        """A launch at `price_per_hour` (whole configuration), on new VMs or the running ones."""
        floor = MINIMUM_BILLED_S
        if self.price_per_hour is not None:
            if new_vms:
                self.closed_usd += self._part_usd()
            else:
                self.closed_usd += self.price_per_hour * self.part_s / 3600
                floor = max(self.floor_s - self.part_s, 0.0)
        self.price_per_hour, self.part_s, self.floor_s = price_per_hour, 0.0, floor

    def run(self, seconds: float) -> None:
        self.part_s += seconds

    @property
    def cost_usd(self) -> float:
        return self.closed_usd + self._part_usd()

    def _part_usd(self) -> float:
        if self.price_per_hour is None:
            return 0.0
        return self.price_per_hour * max(self.part_s, self.floor_s) / 3600

    def state(self) -> dict:
        return {"closed_usd": self.closed_usd, "price_per_hour": self.price_per_hour, "part_s": self.part_s,
                "floor_s": self.floor_s}

    def restore(self, state: dict) -> None:
        self.closed_usd, self.price_per_hour = state["closed_usd"], state["price_per_hour"]
        self.part_s, self.floor_s = state["part_s"], state["floor_s"]
