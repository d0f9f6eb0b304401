# SPDX-License-Identifier: MIT
"""One configuration the online search can run: what a job is launched on and with which batch."""

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Config:
    """VM type x nodes x data-parallel workers x global batch (x spot, when the backend prices it).

    Frozen and ordered, so configurations key dicts and sort deterministically (seeded searches
    must probe in the same order on every machine)."""

    instance_type: str
    num_nodes: int
    num_workers: int
    global_batch: int
    spot: bool = False

    @property
    def local_batch(self) -> float:
        """Samples per worker per step: the step-time model's batch variable."""
        return self.global_batch / self.num_workers

    def to_dict(self) -> dict:
        return {"instance_type": self.instance_type, "num_nodes": self.num_nodes,
                "num_workers": self.num_workers, "global_batch": self.global_batch, "spot": self.spot}

    def label(self) -> str:
        """`t4 2x4 B=256`: 2 nodes of 4 workers; an uneven placement as `t4 2n/3w B=96`."""
        spot = " spot" if self.spot else ""
        per_node, uneven = divmod(self.num_workers, self.num_nodes)
        shape = f"{self.num_nodes}n/{self.num_workers}w" if uneven else f"{self.num_nodes}x{per_node}"
        return f"{self.instance_type} {shape} B={self.global_batch}{spot}"


def batch_change_only(old: Config | None, new: Config) -> bool:
    """The move changes the global batch alone, on the VMs and workers that run: the trainer takes
    it in place at a step boundary (thrifty train's batch requests), with no restart."""
    return (old is not None and old.global_batch != new.global_batch
            and (old.instance_type, old.num_nodes, old.num_workers, old.spot)
            == (new.instance_type, new.num_nodes, new.num_workers, new.spot))


def needs_new_vms(old: Config | None, new: Config) -> bool:
    """A move needs new VMs when nothing runs yet, the type changes or it needs more nodes (with
    fewer nodes of the same type it keeps some of the VMs it has)."""
    return old is None or old.instance_type != new.instance_type or new.num_nodes > old.num_nodes
