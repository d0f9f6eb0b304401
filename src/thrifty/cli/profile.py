# SPDX-License-Identifier: MIT
"""`thrifty profile`: measure a workload on local worker processes and store the samples."""

from typing import Annotated

import typer
from rich.table import Table

from thrifty.cli.catalog import check_instance_type, check_this_machine_is
from thrifty.cli.common import (
    DEFAULT_DB,
    DEFAULT_WORKLOAD,
    CatalogOpt,
    DbOpt,
    JsonOpt,
    WorkloadOpt,
    fmt_duration,
    int_list,
    print_json,
    stdout,
)


def profile(workload: WorkloadOpt = DEFAULT_WORKLOAD,
            workers: Annotated[str, typer.Option(help="Worker counts, e.g. 1,2")] = "1,2",
            batch: Annotated[str | None, typer.Option(
                help="Local batch sizes, e.g. 16,32,64 (default: chosen from the data set and the model's FLOPs)")] = None,
            steps: Annotated[int | None, typer.Option(help="Measured steps per setting (default 20; 6 for heavy models)")] = None,
            calibrate: Annotated[bool, typer.Option(help="Also train once to the target metric")] = True,
            instance_type: Annotated[str, typer.Option(
                help="Catalog CPU instance type this machine is (makes its predictions 'measured'), "
                     "or 'local'")] = "local",
            allow_busy: Annotated[bool, typer.Option(
                "--allow-busy", help="Profile even when the machine is busy (intervals widen with the load); "
                                     "also THRIFTY_ALLOW_BUSY=1")] = False,
            catalog: CatalogOpt = None, db: DbOpt = DEFAULT_DB, json_out: JsonOpt = False) -> None:
    """Measure a workload on local worker processes and store the samples."""
    instance_type, vcpus = check_instance_type(instance_type, catalog or [])
    from thrifty.pipeline import ProfileSettings, profile_and_store
    from thrifty.progress import spinner
    from thrifty.store import Store
    from thrifty.train.busy import cores
    from thrifty.workloads.names import workload_key
    settings = ProfileSettings(workers=int_list(workers, "--workers"),
                               local_batches=None if batch is None else int_list(batch, "--batch"),
                               steps=steps,
                               calibrate=calibrate, instance_type=instance_type, allow_busy=allow_busy)
    check_this_machine_is(instance_type, vcpus, cores())
    with Store(db) as store, spinner() as bar:
        task = bar.add_task(f"profiling {workload}", total=None)
        profile_id = profile_and_store(store, workload, settings,
                                       lambda message: bar.update(task, description=message))
        stored = store.latest_profile(workload_key(workload))
    if stored is None:
        raise RuntimeError(f"profile {profile_id} was stored but cannot be read back")
    profile_, calibration = stored
    from dataclasses import asdict

    from thrifty.perf.samples import config_times
    configs = config_times([asdict(s) for s in profile_.samples])
    summary = {"profile_id": profile_id, "db": str(db), "configs": [
        {"num_workers": int(n), "local_batch": int(b), "step_time_s": t, "compute_time_s": c,
         "sync_time_s": s, "samples_per_s": n * b / t}
        for n, b, t, c, s in zip(configs.num_workers, configs.local_batch, configs.step_time_s,
                                 configs.compute_time_s, configs.sync_time_s, strict=True)],
        "calibration": None if calibration is None else
        {k: calibration[k] for k in ("global_batch", "steps", "final_metric", "wall_time_s")},
        "thread_scaling": profile_.meta["thread_scaling"], "machine": profile_.meta["machine"],
        "run_spread": profile_.meta["run_spread"], "launch_sigma_log": profile_.meta["launch_sigma_log"]}
    if json_out:
        print_json(summary)
        return
    # a new user's pass: compute + all-reduce read more than the step, unexplained
    table = Table(title=f"profile {profile_id} of {workload} ({db})",
                  caption="mean per step; step and compute: the slowest rank's; all-reduce: the ranks' mean, "
                          "which holds the others' wait for the slowest, so compute + all-reduce can exceed the step")
    for col in ("workers", "local batch", "step", "compute (slowest)", "all-reduce (mean)", "samples/s"):
        table.add_column(col, justify="right")
    for row in summary["configs"]:
        table.add_row(str(row["num_workers"]), str(row["local_batch"]), fmt_duration(row["step_time_s"]),
                      fmt_duration(row["compute_time_s"]),
                      fmt_duration(row["sync_time_s"]) if row["num_workers"] > 1 else "-",  # one rank: no all-reduce
                      f"{row['samples_per_s']:.0f}")
    stdout.print(table)
    from thrifty.perf.uncertainty import LAUNCH_SIGMA_LOG_FLOOR, readings_busy
    machine = summary["machine"]
    busy = readings_busy(machine)
    scaling = summary["thread_scaling"]
    stdout.print("serial fraction (Amdahl, 1 vs 2 threads; +- bootstrap sd): " + ", ".join(
        f"b {b:g}: {s:.2f} +- {sd:.2f}" + (" [yellow](at its bound)[/]" if edge else "")
        for b, s, sd, edge in zip(scaling["local_batch"], scaling["serial_fraction"],
                                  scaling["serial_fraction_sd"], scaling["at_bound"], strict=True))
        + (" [yellow](busy machine: upper bounds; CPU VMs' intervals reach perfect scaling)[/]"
           if busy else ""))
    beside = machine["during"]["others_load"]
    stdout.print(f"machine: load {machine['before']['others_load']:.1f} on {machine['before']['cores']} cores "
                 f"before, {'?' if beside is None else f'{beside:.1f}'} beside the profile, "
                 f"{machine['during']['steal_fraction']:.1%} steal during; runs of one setting differ "
                 f"by {summary['run_spread']:.0%} (median); launch spread sd {summary['launch_sigma_log']:.3f} "
                 f"in log, at least {LAUNCH_SIGMA_LOG_FLOOR:g} added to every interval"
                 + (" [yellow](busy: measured anyway, --allow-busy)[/]" if busy else ""))
    if calibration:
        stdout.print(f"calibration: batch {calibration['global_batch']} reached the target in "
                     f"{calibration['steps']} steps ({calibration['wall_time_s']:.1f} s)")
