# SPDX-License-Identifier: MIT
"""`thrifty catalog`: VM types with prices, and what thrifty assumes about each one's hardware."""

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from thrifty.cli.common import (
    CatalogOpt,
    CloudOpt,
    CpuOpt,
    GpuOpt,
    GpusOpt,
    HardwareOpt,
    JsonOpt,
    NetworkOpt,
    RegionOpt,
    gpu_filter,
    non_negative,
    positive,
    print_json,
    stdout,
)
from thrifty.errors import ThriftyError

app = typer.Typer(help="Browse VM types and prices.", no_args_is_help=True)


def filtered_vms(catalogs, clouds, regions, gpu, accelerator=None, max_price=None, min_vcpus=None,
                 min_memory=None) -> list:
    """The catalog (bundled plus --catalog files) after the command-line filters; an error if empty."""
    from thrifty.catalog import CatalogFilter, load_catalog
    vms = load_catalog(catalogs or [])
    if clouds:  # cloud and region names are lower case in every catalog: AWS is aws, US-EAST-1 us-east-1
        clouds = [c.strip().lower() for c in clouds]
        known_clouds = sorted({vm.cloud for vm in vms})
        unknown = [c for c in clouds if c not in known_clouds]
        if unknown:
            raise ThriftyError(f"--cloud {unknown[0]} is not in the catalog, which has {', '.join(known_clouds)}; "
                               "add another cloud's types with --catalog FILE")
    if regions:
        regions = [r.strip().lower() for r in regions]
        known = sorted({vm.region for vm in vms})  # the loader reads regions in lower case
        unknown = [r for r in regions if r not in known]
        if unknown:
            from thrifty.catalog.loader import bundled_regions
            bundled = "; ".join(f"{c} {', '.join(r)}" for c, r in bundled_regions().items())
            raise ThriftyError(f"--region {unknown[0]} is not in the catalog, which has {', '.join(known)} "
                               f"(bundled: {bundled}); add other regions with --catalog vms.csv")
        if clouds:  # each region given must be one of the clouds given: eastus is Azure's, not AWS's
            on_clouds = sorted({vm.region for vm in vms if vm.cloud in clouds})
            elsewhere = [r for r in regions if r not in on_clouds]
            if elsewhere:
                raise ThriftyError(f"--region {elsewhere[0]} is not a region of {'/'.join(clouds)} in the catalog, "
                                   f"which has {', '.join(on_clouds)} there")
    chosen = CatalogFilter(clouds=clouds or None, regions=regions or None, gpu=gpu,
                           accelerator=accelerator, max_price_per_hour=max_price,
                           min_vcpus=min_vcpus, min_memory_gib=min_memory).apply(vms)
    if not chosen:
        given = {"--cloud": clouds, "--region": regions, "--gpu/--cpu": gpu is not None, "--accelerator": accelerator,
                 "--max-price": max_price, "--min-vcpus": min_vcpus, "--min-memory": min_memory}
        names = [option for option, value in given.items() if value]
        accelerators = sorted({vm.accelerator for vm in vms if vm.accelerator})
        hint = f"; accelerators in the catalog: {', '.join(accelerators)}" if accelerator else ""  # the name most mistyped
        raise ThriftyError(f"no VM type matches the catalog filters ({'/'.join(names) or 'none given'}){hint}")
    return chosen


@app.command("list")
def catalog_list(catalog: CatalogOpt = None, cloud: CloudOpt = None, region: RegionOpt = None,
                 gpu: GpuOpt = False, cpu: CpuOpt = False,
                 accelerator: Annotated[str | None, typer.Option(help="e.g. A100 (and its variants), T4, or T4:4 (with four)")] = None,
                 min_vcpus: Annotated[float | None, typer.Option(callback=non_negative)] = None,
                 min_memory: Annotated[float | None, typer.Option(help="GiB", callback=non_negative)] = None,
                 max_price: Annotated[float | None, typer.Option(help="on-demand $/h", callback=positive)] = None,
                 json_out: JsonOpt = False) -> None:
    """List VM types with prices (GCP GPU VMs already include the GPU price)."""
    vms = filtered_vms(catalog, cloud, region, gpu_filter(gpu, cpu), accelerator, max_price, min_vcpus, min_memory)
    if json_out:
        from dataclasses import asdict
        print_json([asdict(vm) for vm in vms])
        return
    # names, regions and numbers keep their full width (cut to `g2-stan…` a name could not be told
    # apart or copied; folded, 0.21320 read as 0.2132 over a stray 0); the GPUs fold at their space
    # when the terminal is narrow, and prices print 4 significant digits
    rows = [(vm.qualified_type, vm.region, f"{vm.vcpus:g}", f"{vm.memory_gib:.4g}",
             f"{vm.accelerator_count}x {vm.accelerator}" if vm.is_gpu else "", f"{vm.price_per_hour:.4g}",
             "" if vm.spot_price_per_hour is None else f"{vm.spot_price_per_hour:.4g}")
            for vm in sorted(vms, key=lambda v: (v.cloud, v.price_per_hour))]
    table = Table(title=f"{len(vms)} VM type{'' if len(vms) == 1 else 's'}", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  show_edge=False, padding=(0, 0))
    for i, col in enumerate(("VM type", "region", "vCPUs", "GiB", "GPUs", "$/h", "spot\n$/h")):
        widest = max(len(row[i]) for row in rows)
        table.add_column(col, justify="left" if col in ("VM type", "region", "GPUs") else "right",
                         no_wrap=col != "GPUs", overflow="fold",
                         min_width=min(widest, 5) if col == "GPUs" else widest)
    for row in rows:
        table.add_row(*row)
    stdout.print(table)


@app.command("show")
def catalog_show(instance_type: str, catalog: CatalogOpt = None, cloud: CloudOpt = None,
                 hardware: HardwareOpt = None, network: NetworkOpt = None, gpus: GpusOpt = None,
                 json_out: JsonOpt = False) -> None:
    """Show one VM type (TYPE or CLOUD:TYPE, as the plan prints it): prices in every region, and the
    speed, memory and bandwidth thrifty assumes for it."""
    from thrifty.catalog import Hardware, load_catalog
    from thrifty.catalog.names import find_type
    all_vms = load_catalog(catalog or [])
    clouds: list[str | None] = list(cloud) if cloud else [None]
    vms = [vm for c in clouds for vm in find_type(all_vms, instance_type, c)]
    if not vms:
        asked = sorted({c.strip().lower() for c in list(cloud or []) + instance_type.split(":")[:-1]})  # --cloud, CLOUD:
        elsewhere = sorted({vm.cloud for vm in find_type(all_vms, instance_type.split(":")[-1])})
        where = f" of {'/'.join(asked)} (it is {'/'.join(elsewhere)}'s)" if asked and elsewhere else ""
        raise ThriftyError(f"instance type {instance_type!r} is not in the catalog{where}")
    hw = Hardware.load(hardware, network, gpus)
    rows = [{"cloud": vm.cloud, "instance_type": vm.instance_type, "region": vm.region,
             "zone": vm.zone, "vcpus": vm.vcpus, "memory_gib": vm.memory_gib,
             "accelerator": vm.accelerator, "accelerator_count": vm.accelerator_count,
             "price_per_hour": vm.price_per_hour, "spot_price_per_hour": vm.spot_price_per_hour,
             "ranks_per_node": vm.ranks_per_node,
             **({"gpu_fp32_tflops": hw.gpu(vm).fp32_tflops, "gpu_tensor_tflops_fp16": hw.gpu(vm).fp16_tensor_tflops,
                 "gpu_memory_bandwidth_gbs": hw.gpu(vm).mem_bw_gbs} if vm.is_gpu else
                {"cpu_speed_per_vcpu": hw.cpu_factor(vm)}),
             "rank_memory_gib": hw.rank_memory_gib(vm), "network_gbps": hw.network_gbps(vm)}
            for vm in vms]
    from thrifty.io import json_safe
    rows = json_safe(rows)  # a rate the GPU lacks (a P4's or P100's FP16 tensor cores) is NaN: none
    if json_out:
        print_json(rows)
        return
    for row in rows:
        # one table per row: a type in several regions, or a host with several GPU options (GCP's N1)
        attached = f", {row['accelerator_count']}x {row['accelerator']}" if row["accelerator"] else ""
        table = Table(show_header=False, title=f"{row['cloud']}:{row['instance_type']} in {row['region']}{attached}")
        for key, value in row.items():
            table.add_row(key, "" if value is None else str(value))  # None: not applicable
        stdout.print(table)


def check_instance_type(instance_type: str, catalogs: list[Path]) -> tuple[str, float | None]:
    """(`local`, None), or a CPU type (TYPE or CLOUD:TYPE) of the bundled catalog or a --catalog
    file, as the bare instance type, with its vCPUs; anything else is a typo."""
    if instance_type == "local" and not catalogs:
        return instance_type, None
    from thrifty.catalog import load_catalog
    from thrifty.catalog.names import find_type
    vms = load_catalog(catalogs)  # a --catalog given is read (and refused when it cannot be) with `local` too
    if instance_type == "local":
        return instance_type, None
    found = find_type(vms, instance_type)
    if found and all(vm.is_gpu for vm in found):  # train.profiler.PROFILED_DEVICE; plan.candidates measures CPU types only
        raise ThriftyError(f"--instance-type {instance_type!r} is a GPU VM, and a profile measures this machine's "
                           "CPUs (GPU VMs are projected from the model's counted work): give 'local' or a CPU VM type")
    if found:
        return found[0].instance_type, found[0].vcpus
    import difflib
    close = difflib.get_close_matches(instance_type, sorted({vm.instance_type for vm in vms}), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ThriftyError(f"--instance-type {instance_type!r} is not in the catalog{hint}; give "
                       f"'local', a type from `thrifty catalog list`, or add --catalog FILE")


def check_this_machine_is(instance_type: str, vcpus: float | None, cores: int) -> None:
    """A profile stored as `instance_type`'s measurement must run on as many CPUs as that VM has:
    taken on 2 cores as an 8-vCPU VM's, the plan would price that VM at 2 cores' speed and launch
    it with the profile's threads (a new user's pass)."""
    if vcpus is not None and round(vcpus) != cores:
        raise ThriftyError(f"--instance-type {instance_type} has {vcpus:g} vCPUs and this machine has {cores} "
                           "usable CPUs: give 'local' (plan projects the VM from this profile), or profile on that VM")
