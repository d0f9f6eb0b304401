# SPDX-License-Identifier: MIT
"""Read VM catalogs: thrifty's own CSV schema or SkyPilot's `vms.csv` columns (detected by header).

Rows with an empty instance type are GPU attachments (GCP's layout, see data/catalog/SOURCE.md);
`pair_gcp_gpus` turns them into priced GPU VMs (host row + GPU row). On GCP a host of a GPU-only
family (g2, a2, a3: `host_gpu_only` in data/gcp_gpu_pairing.csv) exists only with its GPUs, so its
host-only row never becomes a CPU VM; N1 hosts are CPU VMs as well as GPU hosts.

A file may hold many regions (SkyPilot's files do): each (type, region) is one VM type, and of a
type's zones in a region the row with the cheapest spot price is kept (the on-demand price is the
same in every zone), as the bundled extract was made. Prices must be finite (and at most
MAX_PRICE_PER_HOUR), a VM has vCPUs, memory and a region, and an accelerator a whole count. A spot price above
on-demand is refused in a user's file in thrifty's columns; in SkyPilot's published files (and the
bundled extract of them, data/catalog/SOURCE.md) such rows exist and lose their spot offer.
"""

import dataclasses
import fnmatch
import functools
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from thrifty.catalog.vmtype import VMType
from thrifty.data import data_path
from thrifty.errors import CatalogError
from thrifty.io import read_csv

log = logging.getLogger(__name__)

NATIVE_COLUMNS = ("cloud", "instance_type", "vcpus", "memory_gib", "accelerator",
                  "accelerator_count", "price_per_hour", "spot_price_per_hour", "region", "zone")
# SkyPilot catalog columns (skypilot-org/skypilot-catalog, catalogs/v*/CLOUD/vms.csv) -> ours.
SKYPILOT_COLUMNS = {"InstanceType": "instance_type", "AcceleratorName": "accelerator",
                    "AcceleratorCount": "accelerator_count", "vCPUs": "vcpus",
                    "MemoryGiB": "memory_gib", "Price": "price_per_hour",
                    "SpotPrice": "spot_price_per_hour", "Region": "region",
                    "AvailabilityZone": "zone"}
SKYPILOT_REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB",
                     "Price", "SpotPrice", "Region")
BUNDLED_CLOUDS = ("aws", "gcp", "azure")
PRICE_DECIMALS = 10  # a paired price is rounded here: catalogs quote at most 6 decimals
# every cloud whose catalog SkyPilot publishes as CLOUD/vms.csv (its catalog repository's folders)
KNOWN_CLOUDS = BUNDLED_CLOUDS + ("lambda", "oci", "ibm", "kubernetes", "runpod", "fluidstack", "paperspace", "cudo",
                                 "vast", "do", "nebius", "scp", "vsphere", "hyperbolic")


@dataclass(frozen=True)
class _Row:
    """A parsed catalog row before GPU pairing; an empty instance type marks a GPU attachment."""

    vm: VMType
    line: int


def _cloud_from_path(path: Path) -> str:
    """The cloud of a file in SkyPilot's columns, which name none: the nearest part of its path that
    names a cloud SkyPilot catalogs (it keeps `paperspace/vms.csv`), else the file's own name
    (`mycloud.csv`); SkyPilot's own file name there would become a cloud no launcher knows."""
    for part in reversed(path.with_suffix("").parts):
        if part.lower() in KNOWN_CLOUDS:
            return part.lower()
    if path.stem.lower() != "vms":  # said, since `--catalog prices.csv` then prices a cloud named 'prices'
        log.warning("%s: SkyPilot's columns name no cloud and its path names none it knows: cloud %r "
                    "(keep it as CLOUD/vms.csv, e.g. aws/vms.csv, for one)", path, path.stem.lower())
        return path.stem.lower()
    raise CatalogError(f"{path}: cannot tell its cloud: SkyPilot's columns name none; keep it in a folder named "
                       f"after its cloud, as SkyPilot does (e.g. aws/vms.csv), or name the file CLOUD.csv")


# Ten times the dearest VM the clouds list (AWS p5.48xlarge, $98/h on demand): a larger price is a
# typo or another unit, and 1e308 overflowed the costs.
MAX_PRICE_PER_HOUR = 1000.0
# Twice the largest VMs the clouds list (1,920 vCPUs and 32 TiB: AWS u7inh-32tb.480xlarge, GCP
# x4-megamem-1920-metal; Azure's M1792ixds_32_v3 has 1,792): a larger value is a typo or another unit.
MAX_VCPUS, MAX_MEMORY_GIB = 4096, 65536.0


def _number(text: str, column: str, where: str, *, optional: bool = False, positive: bool = False) -> float | None:
    text = (text or "").strip()
    if text == "":
        if optional:
            return None
        raise CatalogError(f"{where}: column '{column}' is empty")
    try:
        value = float(text)
    except ValueError:
        raise CatalogError(f"{where}: column '{column}' is not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        kind = "positive" if positive else "non-negative"
        raise CatalogError(f"{where}: column '{column}' must be a finite {kind} number, got {text}")
    return value


def _parse_row(record: dict[str, str], cloud: str, where: str, names: dict[str, str]) -> VMType:
    """One row in thrifty's column names; `names` maps each to the file's own, for the messages (a
    SkyPilot file says SpotPrice where thrifty says spot_price_per_hour)."""
    instance_type = (record.get("instance_type") or "").strip()
    accelerator = (record.get("accelerator") or "").strip() or None
    count = _number(record.get("accelerator_count", ""), names["accelerator_count"], where, optional=True)
    # a price of 0 is no price: every cost would be $0 and every ratio of costs undefined
    price = _number(record.get("price_per_hour", ""), names["price_per_hour"], where, positive=True)
    spot = _number(record.get("spot_price_per_hour", ""), names["spot_price_per_hour"], where, optional=True, positive=True)
    is_attachment = instance_type == ""
    if is_attachment and accelerator is None:
        raise CatalogError(f"{where}: a row needs an {names['instance_type']} or an {names['accelerator']}")
    if count is not None and (count != int(count) or (count == 0) != (accelerator is None)):
        raise CatalogError(f"{where}: {names['accelerator_count']} {count:g} with {names['accelerator']} {accelerator or '(none)'}: a whole "
                           "number, 0 or empty without an accelerator, at least 1 with one")
    for name, value in (("price_per_hour", price), ("spot_price_per_hour", spot)):
        if value is not None and value > MAX_PRICE_PER_HOUR:
            raise CatalogError(f"{where}: column '{names[name]}' is {value:g} $/h, above {MAX_PRICE_PER_HOUR:g}: "
                               "a price per hour in dollars?")
    vcpus = _number(record.get("vcpus", ""), names["vcpus"], where, optional=is_attachment) or 0.0
    memory = _number(record.get("memory_gib", ""), names["memory_gib"], where, optional=is_attachment) or 0.0
    if not is_attachment and (vcpus <= 0 or memory <= 0):
        raise CatalogError(f"{where}: columns '{names['vcpus']}' and '{names['memory_gib']}' must be positive "
                           f"for {instance_type}")
    # a typo or another unit (1e9 vCPUs became OMP_NUM_THREADS=1000000000 in a plan's launch line)
    if vcpus > MAX_VCPUS:  # fractions are real: GCP's shared-core e2-micro has 0.25
        raise CatalogError(f"{where}: column '{names['vcpus']}' is {vcpus:g}, above {MAX_VCPUS}: a number of vCPUs?")
    if memory > MAX_MEMORY_GIB:
        raise CatalogError(f"{where}: column '{names['memory_gib']}' is {memory:g} GiB, above {MAX_MEMORY_GIB:g}: "
                           "memory in GiB?")
    region = (record.get("region") or "").strip().lower()  # in lower case, as every catalog writes them
    if not region:
        raise CatalogError(f"{where}: column '{names['region']}' is empty (plans name where to launch)")
    return VMType(cloud=cloud, instance_type=instance_type,
                  region=region, zone=(record.get("zone") or "").strip(),
                  vcpus=vcpus, memory_gib=memory, accelerator=accelerator,
                  accelerator_count=int(count or (1 if accelerator else 0)),
                  price_per_hour=float(price or 0.0), spot_price_per_hour=spot)


def _read_rows(path: Path, strict_spot: bool) -> list[_Row]:
    records = [{(k or "").strip(): v for k, v in raw.items()} for raw in read_csv(path, CatalogError, "catalog file")]
    header = set(records[0])
    if set(SKYPILOT_REQUIRED) <= header:
        rename, cloud_default = SKYPILOT_COLUMNS, _cloud_from_path(path)
    else:
        missing = [c for c in NATIVE_COLUMNS if c not in header and c != "zone"]
        if missing:
            raise CatalogError(
                f"{path}: missing columns {', '.join(missing)} (expected thrifty's "
                f"{','.join(NATIVE_COLUMNS)} or SkyPilot's vms.csv columns)")
        rename, cloud_default = {c: c for c in NATIVE_COLUMNS}, None
    theirs = {ours: name for name, ours in rename.items()} | {"cloud": "cloud"}
    rows, unpriced = [], []
    for line, raw in enumerate(records, start=2):
        record = {rename[k]: v for k, v in raw.items() if k in rename}
        if rename is SKYPILOT_COLUMNS and _unpriced(record.get("price_per_hour")):
            unpriced.append(f"{record.get('instance_type') or record.get('accelerator')} (line {line})")
            continue
        cloud = cloud_default or (record.get("cloud") or "").strip().lower()
        if not cloud:
            raise CatalogError(f"{path}:{line}: column 'cloud' is empty")
        vm = _parse_row(record, cloud, f"{path}:{line}", theirs)
        if strict_spot and rename is not SKYPILOT_COLUMNS and _dear_spot(vm):
            raise CatalogError(f"{path}:{line}: spot price {vm.spot_price_per_hour:g} $/h is above the on-demand "
                               f"price {vm.price_per_hour:g} $/h; leave spot_price_per_hour empty if there is no offer")
        rows.append(_Row(vm, line))
    if unpriced:  # SkyPilot's own files hold such rows (data/catalog/SOURCE.md, "Left out")
        log.warning("%s: %d row(s) without an on-demand price left out: %s", path, len(unpriced),
                    ", ".join(unpriced[:3]) + (", ..." if len(unpriced) > 3 else ""))
    return rows


def _unpriced(text: str | None) -> bool:
    """A SkyPilot row that offers no price: an empty Price, or 0 (SkyPilot's files hold both: AWS
    p5e.48xlarge, GCP's a4-highgpu-8g host). In thrifty's own columns such a row is refused."""
    text = (text or "").strip()
    try:
        return text == "" or float(text) == 0.0
    except ValueError:
        return False  # not a number: _parse_row says so


@dataclass(frozen=True)
class GpuPairing:
    """One row of data/gcp_gpu_pairing.csv: a GCP host pattern that takes `count` x `accelerator`."""

    host_pattern: str
    accelerator: str
    accelerator_count: int
    max_host_vcpus: float | None
    host_gpu_only: bool  # the host family exists only with GPUs attached (not a CPU VM)

    @property
    def family(self) -> str:
        return gcp_family(self.host_pattern)


def gcp_family(instance_type: str) -> str:
    """GCP machine family: the text before the first '-' (`g2-standard-24` -> `g2`)."""
    return instance_type.split("-", 1)[0]


@functools.cache
def gpu_pairings() -> tuple[GpuPairing, ...]:
    """The bundled GCP pairing table; a family must be GPU-only in all of its rows or in none."""
    path = data_path("gcp_gpu_pairing.csv")
    records = read_csv(path, CatalogError, "GPU pairing table")
    pairings: list[GpuPairing] = []
    flags: dict[str, bool] = {}
    for line, r in enumerate(records, start=2):
        flag = r.get("host_gpu_only")
        if flag not in ("yes", "no"):
            raise CatalogError(f"{path}:{line}: host_gpu_only must be yes or no, got {flag!r}")
        row = GpuPairing(r["host_pattern"], r["accelerator"], int(r["accelerator_count"]),
                         float(r["max_host_vcpus"]) if r["max_host_vcpus"] else None,
                         flag == "yes")
        if flags.setdefault(row.family, row.host_gpu_only) != row.host_gpu_only:
            raise CatalogError(f"{path}:{line}: family {row.family} is GPU-only in some rows only")
        pairings.append(row)
    return tuple(pairings)


def gcp_gpu_only_families() -> frozenset[str]:
    """GCP families whose hosts are launchable only with their GPUs (g2, a2, a3)."""
    return frozenset(p.family for p in gpu_pairings() if p.host_gpu_only)


def is_gpu_only_host(vm: VMType) -> bool:
    """A GCP CPU-only row of a GPU-only family: a host price, not a VM anyone can launch."""
    return (vm.cloud == "gcp" and not vm.is_gpu
            and gcp_family(vm.instance_type) in gcp_gpu_only_families())


def pair_gcp_gpus(hosts: Iterable[VMType], attachments: Iterable[VMType]) -> list[VMType]:
    """GCP GPU VMs: host price + attachment price for each allowed (host, GPU, count) pairing."""
    by_key = {(a.region, a.accelerator, a.accelerator_count): a for a in attachments}
    paired = []
    for host in hosts:
        for rule in gpu_pairings():
            accelerator, count = rule.accelerator, rule.accelerator_count
            if not fnmatch.fnmatchcase(host.instance_type, rule.host_pattern):
                continue
            if rule.max_host_vcpus is not None and host.vcpus > rule.max_host_vcpus:
                continue
            gpu = by_key.get((host.region, accelerator, count))
            if gpu is None:
                continue
            # a sum of two decimal prices, without the binary residue (0.31915000000000004)
            spot = (None if host.spot_price_per_hour is None or gpu.spot_price_per_hour is None
                    else round(host.spot_price_per_hour + gpu.spot_price_per_hour, PRICE_DECIMALS))
            paired.append(VMType(
                cloud=host.cloud, instance_type=host.instance_type, region=host.region,
                zone=host.zone, vcpus=host.vcpus, memory_gib=host.memory_gib,
                accelerator=accelerator, accelerator_count=count,
                price_per_hour=round(host.price_per_hour + gpu.price_per_hour, PRICE_DECIMALS),  # SOURCE.md: host + GPU
                spot_price_per_hour=spot))
    return paired


def load_catalog_file(path: Path, *, strict_spot: bool = True) -> list[VMType]:
    """All VM types of one catalog file; GPU attachment rows are paired with their hosts, and the
    host-only rows of GCP's GPU-only families are dropped (paired or not). `strict_spot`: a spot
    price above on-demand in thrifty's columns is an error (False for the bundled files)."""
    rows = [r.vm for r in _read_rows(Path(path), strict_spot)]
    attachments = [vm for vm in rows if vm.instance_type == ""]
    vms = [vm for vm in rows if vm.instance_type != ""]
    gpu_vms = pair_gcp_gpus([vm for vm in vms if not vm.is_gpu], attachments) if attachments else []
    vms = [vm for vm in vms if not is_gpu_only_host(vm)]
    unique: dict[tuple, VMType] = {}
    for vm in map(_without_dear_spot, vms + gpu_vms):  # SkyPilot files repeat a type per zone
        key = _key(vm)
        if strict_spot and key in unique and _hardware_and_price(vm) != _hardware_and_price(unique[key]):
            raise CatalogError(f"{path}: {vm.label} in {vm.region or 'no region'} appears twice with other specs "
                               f"or on-demand prices ({_hardware_and_price(unique[key])} and "
                               f"{_hardware_and_price(vm)}): one row per type and region, zones may repeat it "
                               "with their own spot prices")
        if key not in unique or _spot_key(vm) < _spot_key(unique[key]):
            unique[key] = vm
    dear = sum(map(_dear_spot, vms + gpu_vms))
    log.debug("%s: %d VM types from %d rows%s", path, len(unique), len(rows),
              f"; {dear} spot price(s) above on-demand ignored" if dear else "")
    return list(unique.values())


def _key(vm: VMType) -> tuple:
    """What makes a VM type one: where it is and what it has (its zones share it)."""
    return vm.cloud, vm.instance_type, vm.region, vm.accelerator, vm.accelerator_count


def _hardware_and_price(vm: VMType) -> tuple[float, float, float]:
    """(vCPUs, memory GiB, on-demand $/h): what a type's rows in one region must agree on."""
    return vm.vcpus, vm.memory_gib, vm.price_per_hour


def _spot_key(vm: VMType) -> float:
    return math.inf if vm.spot_price_per_hour is None else vm.spot_price_per_hour


def _dear_spot(vm: VMType) -> bool:
    return vm.spot_price_per_hour is not None and vm.spot_price_per_hour > vm.price_per_hour


def _without_dear_spot(vm: VMType) -> VMType:
    """A spot price above on-demand is a catalog error (spot never costs more): no spot offer."""
    return dataclasses.replace(vm, spot_price_per_hour=None) if _dear_spot(vm) else vm


def bundled_catalog_paths() -> list[Path]:
    return [data_path("catalog", f"{cloud}.csv") for cloud in BUNDLED_CLOUDS]


def load_catalog(extra_paths: Iterable[Path | str] = (), *, bundled: bool = True) -> list[VMType]:
    """The bundled AWS/GCP/Azure catalog plus any user CSVs, in that order; a user's row replaces
    the bundled (or an earlier file's) row of the same type, region and accelerators (a negotiated
    price, a private offer), instead of standing beside it as a second candidate."""
    own = bundled_catalog_paths() if bundled else []
    merged: dict[tuple, VMType] = {}
    for vm in [vm for path in own for vm in load_catalog_file(path, strict_spot=False)]:
        merged[_key(vm)] = vm
    users: dict[tuple, Path] = {}  # which user file gave a type its row
    for path in map(Path, extra_paths):
        for vm in load_catalog_file(path):
            key, earlier = _key(vm), merged.get(_key(vm))
            if key in users and earlier is not None:  # two of the user's files: they must agree on the hardware
                if (vm.vcpus, vm.memory_gib) != (earlier.vcpus, earlier.memory_gib):
                    raise CatalogError(f"{path}: {vm.label} in {vm.region or 'no region'} has {vm.vcpus:g} vCPUs and "
                                       f"{vm.memory_gib:g} GiB, and {users[key]} gives it {earlier.vcpus:g} and "
                                       f"{earlier.memory_gib:g}: one type, one machine")
                if (vm.price_per_hour, vm.spot_price_per_hour) != (earlier.price_per_hour,
                                                                   earlier.spot_price_per_hour):  # a pass: silent
                    log.warning("%s in %s: %s's prices replace %s's", vm.label, vm.region, path, users[key])
            elif earlier is not None:
                log.debug("%s in %s: a --catalog row replaces the bundled one", vm.label, vm.region)
            merged[key], users[key] = vm, path
    return list(merged.values())


def bundled_regions() -> dict[str, list[str]]:
    """The regions the bundled catalog holds, per cloud."""
    regions: dict[str, list[str]] = {}
    for vm in load_catalog():
        if vm.region not in regions.setdefault(vm.cloud, []):
            regions[vm.cloud].append(vm.region)
    return regions
