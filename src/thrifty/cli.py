"""The `thrifty` command. Every user error prints one line on stderr and exits with code 2."""

import csv
import io
import sys
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from thrifty.catalog import CatalogFilter, Hardware, load_catalog
from thrifty.cli_support import fmt_duration, fmt_usd, int_list, print_json, stderr, stdout
from thrifty.errors import ModelError, ThriftyError
from thrifty.perf.steptime import StepTimeModel, fit_step_time
from thrifty.store import DEFAULT_DB, Store
from thrifty.workloads import DEFAULT_WORKLOAD

app = typer.Typer(help="Train and simulate on the cloud for less.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)
catalog_app = typer.Typer(help="Browse VM types and prices.", no_args_is_help=True)
model_app = typer.Typer(help="Fit and apply the step-time model.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")
app.add_typer(model_app, name="model")

CatalogOpt = Annotated[Optional[list[Path]], typer.Option(
    "--catalog", help="Extra catalog CSV (thrifty's or SkyPilot's vms.csv columns); repeatable.")]
CloudOpt = Annotated[Optional[list[str]], typer.Option("--cloud", help="aws, gcp, azure, ...; repeatable.")]
RegionOpt = Annotated[Optional[list[str]], typer.Option("--region", help="Region; repeatable.")]
GpuOpt = Annotated[Optional[bool], typer.Option("--gpu/--cpu", help="Only GPU VMs / only CPU VMs.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
DbOpt = Annotated[Path, typer.Option("--db", help="SQLite database of profiles and decisions.")]
WorkloadOpt = Annotated[str, typer.Option("--workload", "-w",
                                          help="builtin:NAME or a .py file with make_workload().")]


def _vms(catalogs, clouds, regions, gpu, accelerator=None, max_price=None, min_vcpus=None,
         min_memory=None):
    vms = load_catalog(catalogs or [])
    chosen = CatalogFilter(clouds=clouds or None, regions=regions or None, gpu=gpu,
                           accelerator=accelerator, max_price_per_hour=max_price,
                           min_vcpus=min_vcpus, min_memory_gib=min_memory).apply(vms)
    if not chosen:
        raise ThriftyError("no VM type matches the catalog filters")
    return chosen


@catalog_app.command("list")
def catalog_list(catalog: CatalogOpt = None, cloud: CloudOpt = None, region: RegionOpt = None,
                 gpu: GpuOpt = None,
                 accelerator: Annotated[Optional[str], typer.Option(help="e.g. A100, T4")] = None,
                 min_vcpus: Annotated[Optional[float], typer.Option()] = None,
                 min_memory: Annotated[Optional[float], typer.Option(help="GiB")] = None,
                 max_price: Annotated[Optional[float], typer.Option(help="on-demand $/h")] = None,
                 json_out: JsonOpt = False) -> None:
    """List VM types with prices (GCP GPU VMs already include the GPU price)."""
    vms = _vms(catalog, cloud, region, gpu, accelerator, max_price, min_vcpus, min_memory)
    if json_out:
        from dataclasses import asdict
        print_json([asdict(vm) for vm in vms])
        return
    table = Table(title=f"{len(vms)} VM types")
    for col in ("cloud", "instance type", "region", "vCPUs", "GiB", "GPUs", "$/h", "spot $/h"):
        table.add_column(col, justify="right" if col in ("vCPUs", "GiB", "$/h", "spot $/h") else "left")
    for vm in sorted(vms, key=lambda v: (v.cloud, v.price_per_hour)):
        table.add_row(vm.cloud, vm.instance_type, vm.region, f"{vm.vcpus:g}", f"{vm.memory_gib:g}",
                      f"{vm.accelerator_count}x {vm.accelerator}" if vm.is_gpu else "",
                      f"{vm.price_per_hour:.4f}",
                      "" if vm.spot_price_per_hour is None else f"{vm.spot_price_per_hour:.4f}")
    stdout.print(table)


@catalog_app.command("show")
def catalog_show(instance_type: str, catalog: CatalogOpt = None, cloud: CloudOpt = None,
                 hardware: Annotated[Optional[Path], typer.Option(help="hardware.csv override")] = None,
                 network: Annotated[Optional[Path], typer.Option(help="network.csv override")] = None,
                 json_out: JsonOpt = False) -> None:
    """Show one VM type: prices, and the speed, memory and bandwidth thrifty assumes for it."""
    vms = [vm for vm in load_catalog(catalog or []) if vm.instance_type == instance_type
           and (not cloud or vm.cloud in cloud)]
    if not vms:
        raise ThriftyError(f"instance type {instance_type!r} is not in the catalog")
    hw = Hardware.load(hardware, network)
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
    if json_out:
        print_json(rows)
        return
    for row in rows:
        table = Table(show_header=False, title=f"{row['cloud']}:{row['instance_type']}")
        for key, value in row.items():
            table.add_row(key, "" if value is None else str(value))
        stdout.print(table)


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                    console=stderr, transient=True)


@app.command()
def profile(workload: WorkloadOpt = DEFAULT_WORKLOAD,
            workers: Annotated[str, typer.Option(help="Worker counts, e.g. 1,2")] = "1,2",
            batch: Annotated[Optional[str], typer.Option(
                help="Local batch sizes, e.g. 16,32,64 (default: chosen from the data set and the model's FLOPs)")] = None,
            steps: Annotated[Optional[int], typer.Option(help="Measured steps per setting (default 20; 6 for heavy models)")] = None,
            calibrate: Annotated[bool, typer.Option(help="Also train once to the target metric")] = True,
            instance_type: Annotated[str, typer.Option(
                help="Catalog instance type this machine is (makes its predictions 'measured'), "
                     "or 'local'")] = "local",
            catalog: CatalogOpt = None, db: DbOpt = DEFAULT_DB, json_out: JsonOpt = False) -> None:
    """Measure a workload on local worker processes and store the samples."""
    _check_instance_type(instance_type, catalog or [])
    from thrifty.pipeline import ProfileSettings, profile_and_store
    settings = ProfileSettings(workers=int_list(workers, "--workers"),
                               local_batches=None if batch is None else int_list(batch, "--batch"),
                               steps=steps,
                               calibrate=calibrate, instance_type=instance_type)
    with Store(db) as store, _progress() as bar:
        task = bar.add_task(f"profiling {workload}", total=None)
        profile_id = profile_and_store(store, workload, settings,
                                       lambda message: bar.update(task, description=message))
        profile_, calibration = store.latest_profile(_key(workload))
    from thrifty.perf.samples import config_times
    from dataclasses import asdict
    configs = config_times([asdict(s) for s in profile_.samples])
    summary = {"profile_id": profile_id, "db": str(db), "configs": [
        {"num_workers": int(n), "local_batch": int(b), "step_time_s": t, "compute_time_s": c,
         "sync_time_s": s, "samples_per_s": n * b / t}
        for n, b, t, c, s in zip(configs.num_workers, configs.local_batch, configs.step_time_s,
                                 configs.compute_time_s, configs.sync_time_s)],
        "calibration": None if calibration is None else
        {k: calibration[k] for k in ("global_batch", "steps", "final_metric", "wall_time_s")}}
    if json_out:
        print_json(summary)
        return
    table = Table(title=f"profile {profile_id} of {workload} ({db})")
    for col in ("workers", "local batch", "step", "compute", "all-reduce", "samples/s"):
        table.add_column(col, justify="right")
    for row in summary["configs"]:
        table.add_row(str(row["num_workers"]), str(row["local_batch"]), fmt_duration(row["step_time_s"]),
                      fmt_duration(row["compute_time_s"]), fmt_duration(row["sync_time_s"]),
                      f"{row['samples_per_s']:.0f}")
    stdout.print(table)
    if calibration:
        stdout.print(f"calibration: batch {calibration['global_batch']} reached the target in "
                     f"{calibration['steps']} steps ({calibration['wall_time_s']:.1f} s)")


def _check_instance_type(instance_type: str, catalogs: list[Path]) -> None:
    """`local`, or a type of the bundled catalog or a --catalog file; anything else is a typo."""
    if instance_type == "local":
        return
    known = {vm.instance_type for vm in load_catalog(catalogs)}
    if instance_type not in known:
        import difflib
        close = difflib.get_close_matches(instance_type, sorted(known), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ThriftyError(f"--instance-type {instance_type!r} is not in the catalog{hint}; give "
                           f"'local', a type from `thrifty catalog list`, or add --catalog FILE")


def _key(workload: str) -> str:
    from thrifty.workloads import canonical_name
    return canonical_name(workload)


SAMPLE_COLUMNS = ("num_nodes", "num_workers", "local_batch", "step_time_s")
CONFIG_COLUMNS = ("num_nodes", "num_workers", "local_batch")


def _read_table(path: Path, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> tuple[list[dict], dict[str, np.ndarray]]:
    if not path.is_file():
        raise ThriftyError(f"file not found: {path}")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ThriftyError(f"{path}: missing columns {', '.join(missing)}")
        rows = list(reader)
    if not rows:
        raise ThriftyError(f"{path}: no rows")
    columns = {}
    for col in required + tuple(c for c in optional if c in rows[0]):
        try:
            columns[col] = np.array([float(r[col]) for r in rows])
        except (TypeError, ValueError):
            raise ThriftyError(f"{path}: column {col} holds a value that is not a number") from None
    return rows, columns


@model_app.command("fit")
def model_fit(samples: Annotated[Optional[Path], typer.Option(
                  help="CSV: num_nodes,num_workers,local_batch,step_time_s[,compute_time_s,sync_time_s]")] = None,
              workload: Annotated[Optional[str], typer.Option(help="Fit the newest stored profile instead")] = None,
              out: Annotated[Optional[Path], typer.Option(help="Write the model JSON here")] = None,
              db: DbOpt = DEFAULT_DB, json_out: JsonOpt = False) -> None:
    """Fit the step-time model to samples (a CSV, or the newest profile of a workload)."""
    if (samples is None) == (workload is None):
        raise ThriftyError("give exactly one of --samples CSV or --workload W")
    if samples is not None:
        _, cols = _read_table(samples, SAMPLE_COLUMNS, ("compute_time_s", "sync_time_s"))
        model = fit_step_time(cols["num_nodes"], cols["num_workers"], cols["local_batch"],
                              cols["step_time_s"], cols.get("compute_time_s"), cols.get("sync_time_s"))
    else:
        from dataclasses import asdict
        from thrifty.perf.samples import config_times
        with Store(db) as store:
            stored = store.latest_profile(_key(workload))
        if stored is None:
            raise ThriftyError(f"no stored profile of {workload} in {db}: run `thrifty profile` first")
        c = config_times([asdict(s) for s in stored[0].samples])
        model = fit_step_time(c.num_nodes, c.num_workers, c.local_batch, c.step_time_s,
                              c.compute_time_s, c.sync_time_s)
    if out is not None:
        model.save(out)
    data = model.to_dict()
    if json_out:
        print_json(data)
        return
    table = Table(title="step-time model", show_header=False)
    for name, value in data["params"].items():
        table.add_row(name, f"{value:.4g}" + ("  (fixed: not identifiable)" if name in model.fixed else ""))
    table.add_row("samples", str(model.n_samples))
    table.add_row("in-sample MdAPE", f"{model.train_mdape:.2f} %")
    table.add_row("residual sd (log)", f"{model.sigma_log:.4f}")
    stdout.print(table)
    if out is not None:
        stdout.print(f"wrote {out}")


@model_app.command("predict")
def model_predict(model: Annotated[Path, typer.Option(help="Model JSON from `model fit --out`")],
                  configs: Annotated[Path, typer.Option(help="CSV: num_nodes,num_workers,local_batch")]) -> None:
    """Print CONFIGS as CSV with step_time_s (and a 90% interval) added."""
    fitted = StepTimeModel.load(model)
    rows, cols = _read_table(configs, CONFIG_COLUMNS)
    if np.any(cols["num_workers"] < cols["num_nodes"]) or np.any(cols["num_nodes"] < 1) \
            or np.any(cols["local_batch"] < 1):
        raise ModelError(f"{configs}: need num_workers >= num_nodes >= 1 and local_batch >= 1")
    args = (cols["num_nodes"], cols["num_workers"], cols["local_batch"])
    predicted = fitted.predict(*args)
    low, high = fitted.interval(*args)
    buffer = io.StringIO()
    fields = list(rows[0].keys()) + ["step_time_s", "step_time_low_s", "step_time_high_s"]
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row, t, lo, hi in zip(rows, predicted, low, high):
        writer.writerow({**row, "step_time_s": f"{t:.6g}", "step_time_low_s": f"{lo:.6g}",
                         "step_time_high_s": f"{hi:.6g}"})
    sys.stdout.write(buffer.getvalue())


from thrifty.plan_command import register_plan  # noqa: E402  (plan and train have their own modules)
from thrifty.project_command import register_project  # noqa: E402
from thrifty.preempt_command import preempt_app  # noqa: E402
from thrifty.run_command import md_app, register_run  # noqa: E402
from thrifty.train_command import register_train  # noqa: E402

register_plan(app)
register_project(model_app)
register_train(app)
app.add_typer(preempt_app, name="preempt")
app.add_typer(md_app, name="md")
register_run(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning ThriftyError into one line on stderr and exit code 2.

    Usage errors (unknown option, bad type) are reported by Typer itself, also with exit code 2.
    """
    try:
        app(args=argv, prog_name="thrifty")
    except ThriftyError as exc:
        stderr.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        return 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
