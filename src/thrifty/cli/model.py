# SPDX-License-Identifier: MIT
"""`thrifty model`: fit the step-time model to samples, predict configurations with it, and
project a workload's step time onto a VM type."""

import csv
import difflib
import io
import logging
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from thrifty.cli.common import (
    DEFAULT_DB,
    DEFAULT_WORKLOAD,
    CatalogOpt,
    DbOpt,
    GpusOpt,
    HardwareOpt,
    JsonOpt,
    NetworkOpt,
    WorkloadOpt,
    fmt_duration,
    int_list,
    print_json,
    renamed,
    stdout,
)
from thrifty.errors import ThriftyError

log = logging.getLogger(__name__)

app = typer.Typer(help="Fit and apply the step-time model.", no_args_is_help=True)


SAMPLE_COLUMNS = ("num_nodes", "num_workers", "local_batch", "step_time_s")
CONFIG_COLUMNS = ("num_nodes", "num_workers", "local_batch")


def _read_table(path: Path, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> tuple[list[dict], dict]:
    """The columns as arrays. sync_time_s may be blank on a one-worker row, which has no sync (read
    as 0), as `thrifty search` traces leave it."""
    import numpy as np

    from thrifty.io import read_csv
    rows = read_csv(path, ThriftyError, "CSV file", required=required)
    # other columns are allowed (a search trace has many); a near miss of an absent optional one is
    # said (csv puts a row's fields beyond the header under None: not a column)
    absent = [c for c in optional if c not in rows[0]]
    for name in (n for n in rows[0] if n is not None and n not in required + optional):
        near = difflib.get_close_matches(name, absent, n=1, cutoff=0.7)
        if near:
            log.warning("%s: column %s is not read; did you mean %s?", path, name, near[0])
    columns: dict[str, np.ndarray] = {}
    for col in required + tuple(c for c in optional if c in rows[0]):  # num_workers (required) first
        values = []
        for line, r in enumerate(rows, start=2):
            text = (r.get(col) or "").strip()
            if not text and col == "sync_time_s" and columns["num_workers"][line - 2] == 1:
                text = "0"
            try:
                values.append(float(text))
            except ValueError:
                raise ThriftyError(f"{path}:{line}: column {col} is not a number: {text!r}") from None
        columns[col] = np.array(values)
    return rows, columns


@app.command("fit")
def model_fit(samples: Annotated[Path | None, typer.Option(
                  help="CSV with columns num_nodes, num_workers, local_batch, step_time_s and optionally "
                       "sync_time_s (the part of the step the all-reduce adds, that compute does not hide: "
                       "compute is the step less it) or compute_time_s (used where no sync_time_s is given)")] = None,
              workload: Annotated[str | None, typer.Option(help="Fit the newest stored profile instead")] = None,
              out: Annotated[Path | None, typer.Option(help="Write the model JSON here")] = None,
              db: DbOpt = DEFAULT_DB, json_out: JsonOpt = False) -> None:
    """Fit the step-time model to samples (a CSV, or the newest profile of a workload)."""
    from thrifty.perf.steptime import fit_step_time
    if (samples is None) == (workload is None):
        raise ThriftyError("give exactly one of --samples CSV or --workload W")
    if out is not None:
        from thrifty.io import check_writable_file
        check_writable_file(out, "the model JSON")
    if samples is not None:
        _, cols = _read_table(samples, SAMPLE_COLUMNS, ("compute_time_s", "sync_time_s"))
        model = fit_step_time(cols["num_nodes"], cols["num_workers"], cols["local_batch"],
                              cols["step_time_s"], cols.get("compute_time_s"), cols.get("sync_time_s"))
        if "compute_time_s" in cols and "sync_time_s" in cols:  # after the fit: a refusal stays one line
            log.warning("%s has sync_time_s and compute_time_s: the compute is taken as the step less its sync "
                        "(the exposed wait), and compute_time_s is not used", samples)
    else:
        from dataclasses import asdict

        from thrifty.perf.samples import config_times
        from thrifty.store import Store
        from thrifty.workloads.names import workload_key
        with Store(db) as store:
            stored = store.latest_profile(workload_key(str(workload)))  # given: exactly one of the two
        if stored is None:
            raise ThriftyError(f"no stored profile of {workload} in {db}: run `thrifty profile` first")
        c = config_times([asdict(s) for s in stored[0].samples])
        from thrifty.perf.uncertainty import LAUNCH_SIGMA_LOG_FLOOR
        model = fit_step_time(c.num_nodes, c.num_workers, c.local_batch, c.step_time_s,
                              c.compute_time_s, c.sync_time_s,
                              launch_sigma_log=stored[0].meta.get("launch_sigma_log", LAUNCH_SIGMA_LOG_FLOOR))
    if out is not None:
        model.save(out)
    data = model.to_dict()
    if json_out:
        print_json(data)
        return
    table = Table(title="step-time model", show_header=False)
    for name, value in data["params"].items():
        note = ("  (fixed: not identifiable)" if name in model.fixed else
                "  (at its bound: the samples push it past its range)" if name in model.at_bound else "")
        table.add_row(name, f"{value:.4g}" + note)
    table.add_row("samples", str(model.n_samples))
    from thrifty.perf.uncertainty import EXACT_FIT_SIGMA_LOG
    table.add_row("in-sample MdAPE", f"- (an exact fit of {model.n_samples} samples to {len(model.free_indices)} "
                  f"parameters has no error estimate: intervals assume sd {EXACT_FIT_SIGMA_LOG} in log)"
                  if model.exact else f"{model.train_mdape:.2f} % (in-sample" + (
                      f"; {model.n_samples} samples to {len(model.free_indices)} parameters, and the model cannot pass "
                      "through them: intervals take the residuals' root sum of squares)" if model.underdetermined
                      else ")"))
    table.add_row("residual sd (log)", "- (an exact fit)" if model.exact else f"{model.sigma_log:.4f}")
    table.add_row("launch spread sd (log)", f"{model.launch_sigma_log:.4f} (added to every interval; "
                  "intervals also widen with the distance from the samples)")
    stdout.print(table)
    if out is not None:
        stdout.print(f"wrote {out}")


@app.command("predict")
def model_predict(step_time_model: Annotated[Path, typer.Option(help="Step-time model JSON from `model fit --out`")],
                  configs: Annotated[Path, typer.Option(help="CSV: num_nodes,num_workers,local_batch")],
                  old_model: Annotated[str | None, renamed(
                      "--model", "--step-time-model", "a step-time model JSON from `model fit --out`")] = None,
                  ) -> None:
    """Print CONFIGS as CSV with step_time_s (and a 90% interval) added; named predicted_step_time_s
    (and so on) where CONFIGS has a column of that name already, e.g. the samples a fit was made on."""
    import numpy as np

    from thrifty.errors import ModelError
    from thrifty.perf.steptime import StepTimeModel, check_configs
    fitted = StepTimeModel.load(step_time_model)
    rows, cols = _read_table(configs, CONFIG_COLUMNS)
    args = (cols["num_nodes"], cols["num_workers"], cols["local_batch"])
    try:  # what a fit would refuse as a sample, a prediction refuses too
        check_configs(*args, "row")
    except ModelError as exc:
        raise ModelError(f"{configs}: {exc}") from None
    with np.errstate(over="ignore", invalid="ignore"):
        predicted = fitted.predict(*args)
        low, high = fitted.interval(*args)
    if not (np.all(np.isfinite(predicted)) and np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ModelError(f"{configs}: the model gives no finite step time for some rows (values too large?)")
    buffer = io.StringIO()
    added = ["step_time_s", "step_time_low_s", "step_time_high_s"]
    if set(added) & set(rows[0]):  # the input's own columns (measured step times) are kept as they are
        added = [f"predicted_{name}" for name in added]
    # predicted_* of an earlier prediction are replaced in their place, not repeated
    fields = list(rows[0].keys()) + [name for name in added if name not in rows[0]]
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row, t, lo, hi in zip(rows, predicted, low, high, strict=True):
        writer.writerow({**row, **dict(zip(added, (f"{t:.6g}", f"{lo:.6g}", f"{hi:.6g}"), strict=True))})
    sys.stdout.write(buffer.getvalue())


@app.command("project")
def project(
    instance_type: Annotated[str, typer.Option(help="Catalog instance type, e.g. g2-standard-4 or gcp:g2-standard-4")],
    workload: WorkloadOpt = DEFAULT_WORKLOAD,
    local_batch: Annotated[str, typer.Option(help="Local batch sizes, e.g. 32,64,128")] = "32,64,128",
    workers: Annotated[int | None, typer.Option(help="Data-parallel ranks (default: one VM's)")] = None,
    precision: Annotated[str, typer.Option(help="fp32, tf32, amp or bf16 (GPUs with BF16 tensor cores)")] = "fp32",
    cloud: Annotated[str | None, typer.Option(help="Cloud, when the type name exists in several")] = None,
    accelerator: Annotated[str | None, typer.Option(
        help="The VM's GPUs when its type comes with several (GCP N1): NAME:COUNT as the plan's SkyPilot "
             "task writes them, e.g. T4:4, or none")] = None,
    catalog: CatalogOpt = None,
    hardware: HardwareOpt = None,
    network: NetworkOpt = None,
    gpus: GpusOpt = None,
    db: DbOpt = DEFAULT_DB,
    allow_busy: Annotated[bool, typer.Option(
        "--allow-busy", help="When it profiles (no stored profile of the workload): even on a busy machine")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Predicted step time and its 90% interval of a workload on a VM type (profiling the workload on this
    machine first when the store has no profile of it)."""
    import dataclasses

    import numpy as np

    from thrifty.catalog import Hardware, load_catalog
    from thrifty.catalog.names import accelerator_label, find_type, one_hardware
    from thrifty.catalog.torch_cuda import task_torch_build
    from thrifty.pipeline import ProfileSettings, job_model
    from thrifty.plan import PlanRequest, VMArrays
    from thrifty.plan.candidates import max_local_batch, predict_step_times
    from thrifty.plan.request import MAX_PLAN_WORKERS
    from thrifty.store import Store

    batches = int_list(local_batch, "--local-batch")
    if min(batches) < 1:
        raise ThriftyError(f"--local-batch needs positive sizes, got {local_batch}")
    vms = find_type(load_catalog(catalog or []), instance_type, cloud)
    if not vms:
        raise ThriftyError(f"unknown instance type {instance_type!r}: see `thrifty catalog list`")
    vm = one_hardware(vms, instance_type, accelerator)
    ranks = workers if workers is not None else vm.ranks_per_node
    if not 1 <= ranks <= MAX_PLAN_WORKERS:
        raise ThriftyError(f"--workers must be between 1 and {MAX_PLAN_WORKERS} (as plan's --max-workers), got {ranks}")
    nodes = math.ceil(ranks / vm.ranks_per_node)
    request = PlanRequest(precision=precision)
    if not vm.is_gpu and precision != "fp32":  # as plan --cpu: the CPU projection is the fp32 profile's
        raise ThriftyError(f"--precision {precision} is for GPUs: {vm.label} has none and trains in fp32")
    hw = Hardware.load(hardware, network, gpus)
    if precision == "bf16" and vm.is_gpu and not hw.gpu(vm).has_bf16:  # PyTorch's bfloat16 autocast refuses it
        raise ThriftyError(f"--precision bf16 needs BF16 tensor cores (Ampere or later): {vm.label} has none; "
                           "use amp")
    vmx = VMArrays.build([vm], hw)
    if ranks < vm.ranks_per_node:  # fewer ranks than GPUs: each has more of the host (a plan fills its VMs)
        vmx = dataclasses.replace(vmx, vcpus_per_rank=np.array([vm.vcpus / ranks], float))
    build = task_torch_build()
    if build is not None and not vmx.trainable[0]:  # projected all the same: with an older torch the GPU trains
        log.warning("%s: %s and its %s is %d.%d, so `thrifty plan` does not offer it", vm.label, build.describe(),
                    hw.gpu(vm).name, *(hw.gpu(vm).compute_capability or (0, 0)))
    with Store(db) as store:
        job, _ = job_model(store, workload, step_time_only=True, settings=ProfileSettings(allow_busy=allow_busy))
    fits = int(max_local_batch(vmx, job, precision)[0])
    if max(batches) > fits:
        raise ThriftyError(f"local batch {max(batches)} does not fit in the memory of one "
                           f"{'GPU' if vm.is_gpu else 'VM'} of {vm.label} (at most {fits} at {precision})")
    count = len(batches)
    step, low, high, measured, _, _ = predict_step_times(
        vmx, job, np.zeros(count, int), np.full(count, float(nodes)), np.full(count, float(ranks)),
        np.array(batches, float), request)
    rows: list[dict[str, Any]] = [{"cloud": vm.cloud, "instance_type": vm.instance_type,
             "accelerator": accelerator_label(vm), "workers": ranks, "local_batch": b,
             "step_time_s": float(t), "interval_s": [float(lo), float(hi)],
             "prediction": "measured" if m else "projected"}
            for b, t, lo, hi, m in zip(batches, step, low, high, measured, strict=True)]
    if json_out:
        print_json(rows)
        return
    table = Table(title=f"{workload} on {vm.label}, {ranks} worker(s), {precision}")
    for col in ("local batch", "step time", "90% interval", "samples/s", "how"):
        table.add_column(col, justify="right")
    for row in rows:
        low_s, high_s = row["interval_s"]
        table.add_row(str(row["local_batch"]), fmt_duration(row["step_time_s"]),
                      f"{fmt_duration(low_s)} - {fmt_duration(high_s)}",
                      f"{ranks * row['local_batch'] / row['step_time_s']:,.0f}", row["prediction"][:4])
    stdout.print(table)
