# SPDX-License-Identifier: MIT
"""`thrifty plan`: profile (or reuse a profile), evaluate every candidate, show and store the choice."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from thrifty.cli.catalog import filtered_vms
from thrifty.cli.common import (
    DEFAULT_DB,
    DEFAULT_WORKLOAD,
    CatalogOpt,
    CloudOpt,
    CpuOpt,
    DbOpt,
    GpuOpt,
    GpusOpt,
    HardwareOpt,
    JsonOpt,
    NetworkOpt,
    RegionOpt,
    WorkloadOpt,
    default_plot,
    fmt_duration,
    fmt_usd,
    fmt_usd_bound,
    fmt_usd_range,
    gpu_filter,
    int_list,
    number_check,
    parse_duration_s,
    parse_money_usd,
    positive,
    print_json,
    stderr,
    stdout,
)
from thrifty.errors import ThriftyError

if TYPE_CHECKING:
    from thrifty.catalog import Hardware, VMType

# More epochs than any published recipe by far (ImageNet: 90, CIFAR: 200-300); a larger number is a typo.
MAX_EPOCHS = 10_000
STARTUP_NOTE_SHARE = 0.1  # the recommendation notes the assumed start-up when it is this much of the time
epochs_check = number_check(lambda v: 0 < v <= MAX_EPOCHS, f"a number of epochs in (0, {MAX_EPOCHS:,}]")


def _table(result, indices, merged, title: str) -> Table:
    """One row per configuration; `merged`: how many near-duplicates (within the prediction's
    resolution, plan.ties) each row stands for, shown as +N after its rank. Numbers never wrap; the
    VM type is the one column that wraps (whole, at a line break before its GPUs, then folded), so
    rows stay distinguishable at 80 columns."""
    if merged.any():
        title += f"; {_count(int(merged.sum()), 'near-duplicate')} within the predictions' resolution merged (+N)"
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    # at least 8 wide: at 80 columns the widest numbers (a rank '10+123', '64 x 1' VMs, batch 16384,
    # '$1,234.50' and its interval) leave it 10, and it takes whatever more the row leaves
    table.add_column("VM type", overflow="fold", min_width=8, ratio=1)
    for col in ("VMs x\nranks", "batch", "spot", "time", "cost", "90%\ninterval"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("how", no_wrap=True)
    rows = [result.describe(int(i)) for i in indices]
    # rows of one cloud in several regions (a catalog of several): each says its region, or two
    # rows of one type would read alike
    regional = len({(d["cloud"], d["region"]) for d in rows}) > len({d["cloud"] for d in rows})
    for rank, (d, extra) in enumerate(zip(rows, merged, strict=True), start=1):
        low, high = d["predicted_cost_interval_usd"]
        gpus = f"\n{d['accelerator_count']}x {d['accelerator']}" if d["accelerator"] else ""
        region = f"\n{d['region']}" if regional else ""
        table.add_row(f"{rank}+{extra}" if extra else str(rank), f"{d['cloud']}:{d['instance_type']}{region}{gpus}",
                      f"{d['nodes']} x {d['workers'] // d['nodes']}", str(d["global_batch"]),
                      "spot" if d["spot"] else "", fmt_duration(d["predicted_time_s"]),
                      fmt_usd(d["predicted_cost_usd"], digits=3), _interval_cell(fmt_usd_range(low, high)),
                      "srch" if d["source"] == "search" else d["prediction"][:4])
    return table


MAX_STARTUP_S = 86_400.0  # a VM's boot and set-up take minutes; a day or more is a typo (100d was planned)


def _startup_s(text: str) -> float:
    seconds = parse_duration_s(text, what="--startup", bare_unit="s", allow_zero=True)
    if seconds > MAX_STARTUP_S:
        raise ThriftyError(f"--startup {text!r} is over a day: a VM's start-up and set-up take minutes "
                           "(a bare number is seconds)")
    return seconds


def _with_gpu_specs(vms: list["VMType"], hw: "Hardware") -> list["VMType"]:
    """The VMs whose GPUs (if any) have specs; the others are left out with one warning naming their
    GPUs (a SkyPilot catalog lists K80s, Inferentia and more), or refused when that leaves none."""
    specified = [not vm.is_gpu or (vm.accelerator or "").lower() in hw.gpus for vm in vms]
    known = [vm for vm, ok in zip(vms, specified, strict=True) if ok]
    left_out = {(vm.cloud, vm.instance_type, vm.accelerator or "") for vm, ok in zip(vms, specified, strict=True)
                if not ok}  # types, not their rows in each region
    unknown = sorted({accelerator for _, _, accelerator in left_out})
    if unknown and known:
        stderr.print(f"[yellow]warning:[/] left out {len(left_out)} VM types whose GPUs have no specs "
                     f"({', '.join(unknown)}): add rows to a GPU specs file (columns of data/gpus.csv) and pass "
                     "it with --gpus", soft_wrap=True)
    if unknown and not known:
        hw.gpu(vms[0])  # every VM left is a GPU one without specs: refused, naming its accelerator and --gpus
    return known


INTERVAL_CELL_WIDTH = 11  # '$0.12-0.25', '$12.10-15.40': the widths that fit at 80 columns


def _interval_cell(interval: str) -> str:
    """A cost interval too wide for 80 columns beside the rest (sub-cent costs: '$0.00063-0.00064')
    on two lines, broken after its dash; the row is two lines high anyway (the VM type wraps)."""
    return interval.replace("-", "-\n", 1) if len(interval) > INTERVAL_CELL_WIDTH else interval


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def plan(
    workload: WorkloadOpt = DEFAULT_WORKLOAD,
    objective: Annotated[str, typer.Option(help="cost, time or knee")] = "cost",
    deadline: Annotated[str | None, typer.Option(help="e.g. 12h, 90m, 2d (a bare number is hours)")] = None,
    budget: Annotated[str | None, typer.Option(help="US dollars, e.g. 50 or $12.5")] = None,
    max_workers: Annotated[int, typer.Option(help="Largest number of ranks")] = 32,
    max_price: Annotated[float | None, typer.Option(help="Largest on-demand $/h of one VM", callback=positive)] = None,
    cloud: CloudOpt = None,
    region: RegionOpt = None,
    gpu: GpuOpt = False,
    cpu: CpuOpt = False,
    spot: Annotated[str, typer.Option(help="both, only or never")] = "both",
    catalog: CatalogOpt = None,
    hardware: HardwareOpt = None,
    network: NetworkOpt = None,
    gpus: GpusOpt = None,
    epochs: Annotated[float | None, typer.Option(
        help="Epochs your job needs at its default batch (instead of the calibration run)",
        callback=epochs_check)] = None,
    batch: Annotated[str | None, typer.Option(
        help="Global batch sizes to consider, e.g. 128,256 (default: powers of two the job allows)")] = None,
    precision: Annotated[str, typer.Option(help="fp32 (PyTorch default), tf32, amp or bf16 (GPU projection; bf16 on Ampere and later only); "
             "other than fp32 plans GPU VMs only")] = "fp32",
    startup: Annotated[str | None, typer.Option(
        help="VM start-up + setup time before training, e.g. 3m; a bare number is seconds (default: per cloud)")] = None,
    bucket: Annotated[str | None, typer.Option(
        help="Spot plans: the bucket the SkyPilot task keeps its checkpoints in (default: thrifty-ckpt-USER-HASH)")] = None,
    reprofile: Annotated[bool, typer.Option(help="Profile again even if a profile is stored")] = False,
    allow_busy: Annotated[bool, typer.Option("--allow-busy", help="When it profiles: even on a busy machine")] = False,
    top: Annotated[int, typer.Option(help="Rows in the top-k table")] = 10,
    plot: Annotated[Path | None, typer.Option(
        help="PNG of cost vs time (default: thrifty-plan.png; none under --json)")] = None,
    db: DbOpt = DEFAULT_DB,
    json_out: JsonOpt = False,
) -> None:
    """Pick the VM type, workers, batch size and spot/on-demand that reach the target best."""
    from thrifty.catalog import Hardware
    from thrifty.cli.workload_job_model import workload_job_model
    from thrifty.io import check_png_path
    from thrifty.plan import PlanRequest, VMArrays
    from thrifty.plan.bucket import check_bucket_name
    from thrifty.plan.decision import decide
    from thrifty.plan.launch import skypilot_yaml, torchrun_command
    from thrifty.plan.plot import plot_plan
    from thrifty.store import Store
    from thrifty.workloads.names import workload_key

    request = PlanRequest(
        objective=objective, max_workers=max_workers, spot=spot, top_k=top, precision=precision,
        batches=None if batch is None else tuple(int_list(batch, "--batch")),
        startup_s=None if startup is None else _startup_s(startup),
        deadline_s=None if deadline is None else parse_duration_s(deadline, what="deadline", bare_unit="h"),
        budget_usd=None if budget is None else parse_money_usd(budget, what="budget"))
    if bucket is not None:
        check_bucket_name(bucket)
    plot = default_plot(plot, json_out, "thrifty-plan.png")
    if plot is not None:
        check_png_path(plot, "the plot")
    if cpu and precision != "fp32":
        raise ThriftyError(f"--precision {precision} is for GPUs: CPU VMs train in fp32 (drop --cpu or --precision)")
    # a precision other than fp32 asks for GPUs (CPU VMs train in fp32: a CPU plan would not be in it)
    vms = filtered_vms(catalog, cloud, region, gpu_filter(gpu, cpu), max_price=max_price)
    if precision != "fp32":
        vms = [vm for vm in vms if vm.is_gpu]
        if not vms:
            raise ThriftyError(f"--precision {precision} is for GPUs and the chosen catalog rows have none: "
                               "give --precision fp32 for CPU VMs, or widen --cloud, --region or --max-price")
    hw = Hardware.load(hardware, network, gpus)
    vmx = VMArrays.build(_with_gpu_specs(vms, hw), hw)
    with Store(db) as store:
        job, reused = workload_job_model(store, workload, reprofile=reprofile, epochs_to_target=epochs,
                                         allow_busy=allow_busy)
        # the plot before the decision is stored: a bad --plot path leaves nothing behind
        decision = decide(store, workload_key(workload), vmx, job, request, before_storing=None if plot is None else
                          lambda result: plot_plan(result, plot, title=f"{workload}: {len(result.candidates):,} "
                                                                       "candidates"))
    result, best, chosen_from, probes = decision.result, decision.recommended, decision.plane, decision.probes
    elapsed = decision.elapsed_s
    launch = {"torchrun": torchrun_command(best, workload), "skypilot_yaml": skypilot_yaml(best, workload, bucket=bucket)}
    if best["predicted_epochs"] > best["epochs"] and not best["until_target"]:  # held to what thrifty train runs
        stderr.print(f"[yellow]warning:[/] the plan's {best['predicted_epochs']:,.0f} epochs are more than thrifty train "
                     f"runs: its launch line stops at {best['epochs']:,.0f}", soft_wrap=True)
    summary = {
        "workload": workload, "objective": objective, "profile_reused": reused,
        "recommended": best,
        "pareto": chosen_from["pareto"],
        "top": [{**result.describe(int(i)), "merged": int(m)} for i, m in zip(*result.top(top), strict=True)],
        "search_windows": len(probes),  # stored windows of this workload read (not all need match)
        "candidates_evaluated": len(result.candidates),
        "candidates_feasible": int(result.feasible_mask.sum()),
        # the deadline and budget, where given, hold at the 90% intervals' upper ends (plan.optimizer._confident)
        "constraints_at_risk": list(result.constraints_at_risk),
        "candidates_per_s": len(result.candidates) / max(elapsed, 1e-9),
        "model": job.summary(), "launch": launch, "plot": None if plot is None else str(plot)}
    if json_out:
        print_json(summary)
        return
    if job.recipe is not None:
        steps_from = (f"{job.recipe['epochs']:g} epochs at global batch {job.recipe['min_batch']}-"
                      f"{job.recipe['max_batch']} ({job.recipe['source']})")
    elif job.epochs_stated:  # a new user's pass: --epochs 2000 printed a line with --epochs 8738 and no word why
        stated = job.calibration_steps * job.calibration_batch / job.train_size
        bound = " at least" if job.noise_scale_is_bound else " ~"  # a lower bound: the gradients averaged to noise
        steps_from = (f"--epochs {stated:g} at global batch {job.calibration_batch} ({job.calibration_steps:,.0f} "
                      f"steps); other batches need the steps S(B) = S_min (1 + B_noise / B) gives, B_noise{bound} "
                      f"{job.noise_scale:.0f} samples, so a launch line's --epochs is its batch's")
    elif job.noise_scale_is_bound:  # perf.jobmodel._noise: the gradient lost in the noise
        steps_from = (f"B_noise at least {job.noise_scale:.0f} samples (the profiled gradients average to noise: "
                      f"the bound is taken), S_min {job.s_min:.0f} steps")
    else:
        steps_from = (f"B_noise ~ {job.noise_scale:.0f} samples (90%: {job.noise_scale_interval[0]:.0f}-"
                      f"{job.noise_scale_interval[1]:.0f}), S_min {job.s_min:.0f} steps")
    fit = job.step_time
    fit_note = (f"exact fit of {fit.n_samples} configurations, no error estimate (intervals assume one)"
                if fit.exact else f"in-sample MdAPE {fit.train_mdape:.1f}% over {fit.n_samples} configurations"
                + (f" (no more than the fit's {len(fit.free_indices)} parameters, and it cannot pass through them)"
                   if fit.underdetermined else ""))
    if fit.at_bound:
        fit_note += f"; [yellow]at a bound: {', '.join(fit.at_bound)}[/]"
    if job.thread_scaling is not None and job.thread_scaling.contended:
        fit_note += ("; [yellow]profiled on a busy machine: the serial fraction is an upper bound, CPU VMs' "
                     "intervals reach perfect scaling[/]")
    stdout.print(f"[bold]{workload}[/]: {steps_from}; step-time fit: {fit_note} "
                 f"({'stored profile' if reused else 'new profile'})")
    # the rows are the order the tie rule falls back in, not a sort by the objective's point values
    cheapest_left = "the fastest within its resolution of the cheapest left"
    tie_rule = {"cost": f" (in the order the rule falls back: each row {cheapest_left})",
                "time": " (in the order the rule falls back: each row the cheapest within its resolution of "
                        "the fastest left)",
                "knee": f" (the knee of the Pareto front, then in the order the cost rule falls back: each row "
                        f"{cheapest_left})"}[objective]
    stdout.print(_table(result, *result.top(top), f"top {top} by {objective}{tie_rule}"))
    stdout.print(_table(result, result.front, result.front_merged,
                        f"Pareto front (fastest first, {len(result.front)} point{'' if len(result.front) == 1 else 's'})"))
    lo, hi = best["predicted_time_interval_s"]
    # the interval's width is the training's: a start-up that is much of the time is an assumption (--startup)
    startup_note = (f", with an assumed {fmt_duration(best['startup_s'])} VM start-up"
                    if best["startup_s"] >= STARTUP_NOTE_SHARE * best["predicted_time_s"] else "")
    gpu_note = f" ({best['accelerator_count']}x {best['accelerator']})" if best["accelerator"] else ""
    stdout.print(Panel.fit(
        f"{best['cloud']}:{best['instance_type']}{gpu_note} x {_count(best['nodes'], 'VM')} in {best['region']}, "
        f"{_count(best['workers'], 'worker')}, global batch {best['global_batch']}, "
        f"{'spot' if best['spot'] else 'on-demand'}\n"
        f"time {fmt_duration(best['predicted_time_s'])} (90%: {fmt_duration(lo)} - {fmt_duration(hi)}{startup_note}), "
        f"cost {fmt_usd(best['predicted_cost_usd'], digits=3)} "
        f"(90%: {fmt_usd_bound(best['predicted_cost_interval_usd'][0], up=False)} - "
        f"{fmt_usd_bound(best['predicted_cost_interval_usd'][1], up=True)}); {best['prediction']} prediction"
        f"{' (search windows)' if best['source'] == 'search' else ''}",
        title="recommended"))
    if result.constraints_at_risk:
        risk = result.constraints_at_risk
        held = {"deadline": "meets the deadline", "budget": "fits the budget"}
        other = (", the other constraint held there"
                 if request.deadline_s is not None and request.budget_usd is not None and len(risk) == 1 else "")
        stdout.print(f"[yellow]no configuration {' and '.join(held[r] for r in risk)} at the upper end of its 90% "
                     f"interval{other}: this one does at the predicted value{'s' if len(risk) > 1 else ''} only[/]",
                     soft_wrap=True)
    stdout.print(f"{len(result.candidates):,} candidates evaluated in {elapsed * 1000:.0f} ms "
                 f"({summary['candidates_per_s']:,.0f}/s); plot: {plot}")
    # escaped: `pip install -e '.[train]'` is not rich markup
    stdout.print("[bold]launch[/] (on every node):\n  " + escape(launch["torchrun"]), soft_wrap=True)
    stdout.print("[bold]SkyPilot task[/]:\n" + escape(launch["skypilot_yaml"]), soft_wrap=True)
