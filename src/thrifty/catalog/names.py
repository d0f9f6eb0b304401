# SPDX-License-Identifier: MIT
"""VM type names as the plan prints them: `cloud:instance_type` (`aws:p5.48xlarge`), or the bare
instance type. Every command that takes an instance type reads it here."""

from collections.abc import Sequence

from thrifty.catalog.vmtype import VMType
from thrifty.errors import CatalogError


def split_type_name(name: str) -> tuple[str | None, str]:
    """'aws:p3.2xlarge' -> ('aws', 'p3.2xlarge'); 'p3.2xlarge' -> (None, 'p3.2xlarge')."""
    cloud, sep, instance_type = name.strip().partition(":")
    if not sep:
        return None, cloud
    if not cloud or not instance_type:
        raise CatalogError(f"instance type {name!r}: give TYPE or CLOUD:TYPE, e.g. aws:p3.2xlarge")
    return cloud.lower(), instance_type


def find_type(vms: Sequence[VMType], name: str, cloud: str | None = None) -> list[VMType]:
    """The catalog rows (every region) of the type `name` names, in catalog order; `cloud` (e.g.
    --cloud) must agree with a `cloud:` prefix. Empty if none."""
    prefix, instance_type = split_type_name(name)
    if prefix and cloud and prefix != cloud.lower():
        raise CatalogError(f"instance type {name!r} is on {prefix}, not on {cloud}")
    wanted = prefix or (cloud.lower() if cloud else None)
    return [vm for vm in vms if vm.instance_type == instance_type and (wanted is None or vm.cloud == wanted)]


def accelerator_label(vm: VMType) -> str:
    """A VM's GPUs as SkyPilot writes them (`T4:4`, the plan's SkyPilot task), `none` without."""
    return f"{vm.accelerator}:{vm.accelerator_count}" if vm.accelerator else "none"


def one_hardware(vms: Sequence[VMType], name: str, accelerator: str | None = None) -> VMType:
    """Of one type's catalog rows (find_type), the one with the GPUs asked for: `accelerator` as
    accelerator_label writes it (T4:4, or none). Without it the type must come with one kind of
    hardware: a GCP N1 host comes bare and with T4, P4, V100 or P100 attached, and taking its first
    row projected the CPU VM for a plan printed with four T4s."""
    variants: dict[str, VMType] = {}
    for vm in vms:
        variants.setdefault(accelerator_label(vm), vm)
    choices = ", ".join(sorted(variants))
    if accelerator is None:
        if len(variants) > 1:
            raise CatalogError(f"{name} comes with several accelerators: pass --accelerator with one of {choices}")
        return vms[0]
    for label, vm in variants.items():
        if label.lower() == accelerator.strip().lower():
            return vm
    raise CatalogError(f"--accelerator {accelerator!r}: {name} comes with {choices}")
