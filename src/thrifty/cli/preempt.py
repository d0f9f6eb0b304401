# SPDX-License-Identifier: MIT
"""`thrifty preempt`: lifetime models of preemptible VMs, checkpoint schedules, VM reuse, spot."""

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from thrifty.cli.common import (
    JsonOpt,
    default_plot,
    float_list,
    fmt_duration,
    fmt_usd,
    parse_duration_s,
    positive,
    print_json,
    renamed,
    stderr,
    stdout,
)
from thrifty.errors import ThriftyError

app = typer.Typer(help="Preemptible VMs: lifetimes, checkpoint schedules, reuse, spot.",
                          no_args_is_help=True)

LIFETIME_MODEL = "a bundled lifetime model's name or a JSON from `preempt fit --out`"
FEW_PREEMPTIONS = 10  # below this many preemptions a fit is said to be a guess (our threshold)
LifetimeModelOpt = Annotated[str, typer.Option("--lifetime-model", help=f"The VMs' lifetimes: {LIFETIME_MODEL}")]
# `--model` meant four things across thrifty's commands; here it named a lifetime model or a family
OldLifetimeModelOpt = Annotated[str | None, renamed("--model", "--lifetime-model", LIFETIME_MODEL)]
FAMILIES = "bathtub, weibull, exponential or auto"
JobHoursOpt = Annotated[float, typer.Option(help="Work the job needs, hours", callback=positive)]
# Monte Carlo runs of `spot`: 10^6 keeps the standard error of every mean below 0.1% of its spread
# and the arrays within a few hundred MB; more is memory, not precision.
MAX_SPOT_RUNS = 1_000_000


def _params_text(model) -> str:
    """A lifetime model's parameters as people read them: times in their unit (fmt_duration, as the
    mean beside them), a rate as its mean time."""
    return ", ".join(f"1/rate={fmt_duration(1 / v)}" if k == "rate_per_s" else
                     f"{k.removesuffix('_s')}={fmt_duration(v)}" if k.endswith("_s") else f"{k}={v:.4g}"
                     for k, v in model.params().items())


def _fit_row(name: str, fitted) -> tuple[str, ...]:
    params = _params_text(fitted.model)
    if fitted.at_bound:
        params += f" ({' and '.join(fitted.at_bound)} on a bound)"
    return (name, fitted.method, params, f"{fitted.log_likelihood:.1f}", f"{fitted.aic:.1f}", f"{fitted.ks:.3f}")


@app.command("fit")
def fit_command(data: Annotated[Path, typer.Argument(help="CSV with lifetime_s [,event, machine_type]")],
                family: Annotated[str, typer.Option(help=f"Distribution family: {FAMILIES}")] = "auto",
                old_model: Annotated[str | None, renamed("--model", "--family", FAMILIES)] = None,
                method: Annotated[str, typer.Option(help="mle (censored) or lsq (bathtub, preempted rows)")] = "mle",
                machine_type: Annotated[str | None, typer.Option(help="Only this machine type")] = None,
                out: Annotated[Path | None, typer.Option(help="Write the chosen model as JSON")] = None,
                json_out: JsonOpt = False) -> None:
    """Fit a lifetime model (censored MLE or the paper's least squares) and compare with the others."""
    from thrifty.io import check_writable_file, write_json_atomic
    from thrifty.transient.fitting import fit, fit_each, lowest_aic, read_lifetimes
    if out is not None:
        check_writable_file(out, "the model JSON")
    lifetimes = read_lifetimes(data).for_machine_type(machine_type)
    if method == "lsq" and family == "auto":  # least squares fits the bathtub alone (a new user's pass: auto
        family = "bathtub"                    # chose by likelihood and the report said "--method lsq")
    fits, not_fitted = fit_each(lifetimes)  # the comparison's MLE fits, which the choice reuses
    if method == "mle" and family == "auto":
        chosen = lowest_aic(fits, not_fitted)
    else:
        chosen = fits[family] if method == "mle" and family in fits else fit(lifetimes, family, method)
    preempted = int(lifetimes.preempted.sum())
    if preempted < FEW_PREEMPTIONS:  # a new user's pass: one VM's lifetime fitted and "chosen" without a word
        stderr.print(f"[yellow]warning:[/] {preempted} preemption(s): a curve fitted to so few is a guess, and "
                     "the schedules planned on it follow the guess (the bundled GCP data hold 1,442 lifetimes)",
                     soft_wrap=True)
    others = {f"{m} (mle)": f for m, f in fits.items()}
    if chosen.model.name == "bathtub" and lifetimes.preempted.sum() >= 4:
        others["bathtub (lsq)"] = fit(lifetimes, "bathtub", "lsq")
    if out is not None:
        write_json_atomic(out, chosen.to_dict())
    if json_out:
        print_json({"chosen": chosen.to_dict(), "mean_lifetime_s": chosen.model.mean(),
                    "compared": {k: v.to_dict() for k, v in others.items()}, "not_fitted": not_fitted})
        return
    table = Table(title=f"lifetime fits: {lifetimes.lifetime_s.size} VMs, {int(lifetimes.preempted.sum())} preempted")
    for col in ("model", "method", "parameters", "log L", "AIC", "KS"):
        table.add_column(col)
    table.add_row(*_fit_row(f"chosen: {chosen.model.name}", chosen))
    for name, fitted in others.items():
        table.add_row(*_fit_row(name, fitted))
    for name, why in not_fitted.items():
        table.add_row(f"{name} (mle)", "-", f"not fitted: {why}", "", "", "")
    table.caption = "KS: the largest gap between the fitted and the data's distribution (Kaplan-Meier)"
    stdout.print(table)
    impossible = [name for name, f in others.items() if f.log_likelihood == -math.inf]
    if impossible:  # a new user's pass: -inf and inf with no word why
        longest, end = float(lifetimes.lifetime_s.max()), min(others[n].model.t_end for n in impossible)
        where = (f" (its VMs all end by {fmt_duration(end)}, before the longest seen, {fmt_duration(longest)})"
                 if end < longest else "")
        stdout.print(f"log L -inf ({', '.join(impossible)}): the curve gives some lifetime seen here no chance"
                     f"{where}, so AIC is inf", soft_wrap=True)
    by_likelihood = max(others, key=lambda k: others[k].log_likelihood)
    how = ("lowest AIC (log L less a parameter's cost; a bathtub whose tau2 is on its lower bound, a spike, "
           "left out)" if method == "mle" and family == "auto" else f"--family {family} --method {method}")
    why_not = "a spike on its bound" if others[by_likelihood].spike else "with more parameters"
    stdout.print(f"mean lifetime {fmt_duration(chosen.model.mean())}; chosen by {how}" +
                 ("" if by_likelihood.split(" ")[0] == chosen.model.name else
                  f"; the highest likelihood alone is {by_likelihood}'s, {why_not}"
                  if how.startswith("lowest") else f"; the highest likelihood is {by_likelihood}'s"))


@app.command("show")
def show_command(name: Annotated[str, typer.Argument(help="Bundled model name or JSON file")] = "gcp-2019",
                 plot: Annotated[Path | None, typer.Option(
                     help="PNG of the fit against Kaplan-Meier and the hazard "
                          "(default: preempt-model.png; none under --json)")] = None,
                 data: Annotated[Path | None, typer.Option(
                     help="Lifetimes CSV to draw Kaplan-Meier from (a fitted model's own data; default: the "
                          "bundled GCP 2019 lifetimes)")] = None,
                 json_out: JsonOpt = False) -> None:
    """Show a lifetime model, plotted against Kaplan-Meier of the bundled data (or --data)."""
    from thrifty.io import check_png_path
    from thrifty.transient.fitting import read_lifetimes
    from thrifty.transient.plot import plot_fit
    from thrifty.transient.registry import bundled, data_file, load_model
    label, model = load_model(name)
    plot = default_plot(plot, json_out, "preempt-model.png")
    if plot is not None:
        check_png_path(plot, "the plot")
        machine_type = label.removeprefix("gcp-2019-") if label.startswith("gcp-2019-n1") else None
        seen = read_lifetimes(data) if data is not None else read_lifetimes(data_file()).for_machine_type(machine_type)
        # a fitted model's file holds no data: say whose Kaplan-Meier it is (a new user's pass: a fit of 6
        # VMs drawn against GCP's 1,442, unsaid)
        against = "" if data is not None or label in bundled() else " (against the bundled GCP 2019 data: --data CSV)"
        plot_fit({label: model}, seen, plot, f"{label}: {model.name} lifetime model{against}")
    info = {"name": label, **model.to_dict(), "mean_lifetime_s": model.mean(),
            "max_lifetime_s": model.t_end, "plot": None if plot is None else str(plot),
            "fit": {k: v for k, v in bundled().get(label, {}).items() if k not in ("model", "params")}}
    if json_out:
        print_json(info)
        return
    stdout.print(f"[bold]{label}[/]: {model.name} {_params_text(model)}")
    stdout.print(f"mean lifetime {fmt_duration(model.mean())}, longest {fmt_duration(model.t_end)}; plot: {plot}")


@app.command("schedule")
def schedule_command(job_hours: JobHoursOpt,
                     ckpt_cost: Annotated[str, typer.Option(help="Checkpoint cost, e.g. 60s or 2m (a bare number is seconds)")] = "60s",
                     restart_cost: Annotated[str, typer.Option(help="Restart cost, e.g. 60s (a bare number is seconds)")] = "60s",
                     vm_age: Annotated[str, typer.Option(help="Age of the VM the job starts on, e.g. 5h (a bare number is hours)")] = "0h",
                     lifetime_model: LifetimeModelOpt = "gcp-2019", old_model: OldLifetimeModelOpt = None,
                     policy: Annotated[str, typer.Option(help="dp, young, daly or none")] = "dp",
                     mttf: Annotated[str | None, typer.Option(
                         help="MTTF for Young/Daly, e.g. 1h; a bare number is hours (default: the model's mean lifetime)")] = None,
                     json_out: JsonOpt = False) -> None:
    """Checkpoint intervals, expected makespan and overhead of a job on preemptible VMs."""
    from thrifty.transient.registry import load_model
    from thrifty.transient.schedule import Job, plan_schedule
    label, lifetime = load_model(lifetime_model)
    job = Job(job_hours * 3600, parse_duration_s(ckpt_cost, what="--ckpt-cost", bare_unit="s"),
              parse_duration_s(restart_cost, what="--restart-cost", bare_unit="s", allow_zero=True))
    age = parse_duration_s(vm_age, what="--vm-age", bare_unit="h", allow_zero=True)
    mttf_s = parse_duration_s(mttf, what="--mttf", bare_unit="h") if mttf else None
    chosen = plan_schedule(lifetime, job, policy, age, mttf_s=mttf_s)
    compared: dict[str, Any] = {}  # every policy, side by side: its schedule, or why it has none
    for other in ("dp", "young", "daly", "none"):
        try:
            compared[other] = chosen if other == policy else plan_schedule(lifetime, job, other, age, mttf_s=mttf_s)
        except ThriftyError as exc:
            compared[other] = str(exc)
    if json_out:
        print_json({"model": label, "vm_age_s": age, **chosen.to_dict(),
                    "policies": {name: {"error": s} if isinstance(s, str) else s.to_dict()
                                 for name, s in compared.items()}})
        return
    table = Table(title=f"{job_hours:g} h job, checkpoint {fmt_duration(job.checkpoint_cost_s)}, model {label}")
    for col in ("policy", "checkpoints\non first VM", "expected makespan", "overhead"):
        table.add_column(col, justify="right")
    for other, s in compared.items():
        if isinstance(s, str):
            table.add_row(other, "-", s, "-")
            continue
        # every interval but the last ends in a checkpoint: the last ends the job, or runs past the
        # model's longest lifetime when the first VM cannot finish it (transient.schedule.first_vm_intervals)
        table.add_row(("* " if other == policy else "") + other, str(len(s.intervals_s) - 1),
                      fmt_duration(s.expected_makespan_s), f"{s.overhead_fraction:.1%}")
    stdout.print(table)
    stdout.print("intervals (work between checkpoints on the first VM): "
                 + ", ".join(fmt_duration(x) for x in chosen.intervals_s))


@app.command("reuse")
def reuse_command(job_hours: Annotated[str, typer.Option(help="Job lengths in hours, e.g. 1,2,5,10,20")] = "1,2,5,10,20",
                  ckpt_cost: Annotated[str, typer.Option(help="Checkpoint cost, e.g. 60s or 2m (a bare number is seconds)")] = "60s",
                  restart_cost: Annotated[str, typer.Option(help="Restart cost, e.g. 60s (a bare number is seconds)")] = "60s",
                  startup: Annotated[str, typer.Option(help="Time to get a fresh VM (a bare number is seconds)")] = "60s",
                  lifetime_model: LifetimeModelOpt = "gcp-2019", old_model: OldLifetimeModelOpt = None,
                  json_out: JsonOpt = False) -> None:
    """At which VM ages the next job should go to a fresh VM instead (threshold table)."""
    from thrifty.transient.registry import load_model
    from thrifty.transient.reuse import solve_reuse
    label, lifetime = load_model(lifetime_model)
    hours = list(float_list(job_hours, "--job-hours"))
    *_, rules = solve_reuse(lifetime, hours, parse_duration_s(ckpt_cost, what="--ckpt-cost", bare_unit="s"),
                            parse_duration_s(restart_cost, what="--restart-cost", bare_unit="s",
                                             allow_zero=True),
                            parse_duration_s(startup, what="--startup", bare_unit="s", allow_zero=True))
    if json_out:
        print_json({"model": label, "rules": [r.to_dict() for r in rules]})
        return
    table = Table(title=f"reuse the VM or start a fresh one (model {label})")
    table.add_column("job")
    table.add_column("fresh VM better when the current VM's age is in")
    for rule in rules:
        ranges = ", ".join(f"{a / 3600:.2f}-{b / 3600:.2f} h" if b < float("inf") else f"{a / 3600:.2f} h on"
                           for a, b in rule.fresh_ranges_s) or "never"
        # the job as asked (a new user's pass: 0.1 h printed as 0.08333 h, its grid length), and
        # the grid's length where the DP solved another
        rounded = not math.isclose(rule.solved_s, rule.job_s)
        if rounded:
            table.caption = "(as T): the length the DP solved, on its 5-minute grid"
        table.add_row(f"{rule.job_s / 3600:g} h" + (f" (as {fmt_duration(rule.solved_s)})" if rounded else ""), ranges)
    stdout.print(table)


@app.command("spot")
def spot_command(job_hours: JobHoursOpt,
                 deadline: Annotated[str, typer.Option(help="e.g. 14h (a bare number is hours)")],
                 spot_price: Annotated[float, typer.Option(help="$/h of the spot VM", callback=positive)],
                 on_demand_price: Annotated[float, typer.Option(help="$/h of the on-demand VM", callback=positive)],
                 ckpt_cost: Annotated[str, typer.Option(help="Checkpoint cost, e.g. 60s or 2m (a bare number is seconds)")] = "60s",
                 restart_cost: Annotated[str, typer.Option(help="Restart cost, e.g. 60s (a bare number is seconds)")] = "60s",
                 lifetime_model: LifetimeModelOpt = "gcp-2019", old_model: OldLifetimeModelOpt = None,
                 lifetimes: Annotated[str, typer.Option(help="model (drawn from --lifetime-model) or real (the bundled data)")] = "model",
                 runs: Annotated[int, typer.Option(help="Monte Carlo runs", min=1, max=MAX_SPOT_RUNS)] = 10_000,
                 json_out: JsonOpt = False) -> None:
    """Spot, on-demand or the deadline-aware mix: expected time, cost and deadline hit rate."""
    import numpy as np

    from thrifty.transient.fitting import EmpiricalLifetimes, read_lifetimes
    from thrifty.transient.registry import data_file, load_model
    from thrifty.transient.schedule import Job
    from thrifty.transient.spot import compare
    if lifetimes not in ("model", "real"):
        raise ThriftyError(f"--lifetimes must be model or real, got {lifetimes!r}")
    from thrifty.catalog.loader import MAX_PRICE_PER_HOUR
    for option, price in (("--spot-price", spot_price), ("--on-demand-price", on_demand_price)):
        if price > MAX_PRICE_PER_HOUR:  # as the catalog's: 1e308 had overflowed the costs to null
            raise ThriftyError(f"{option} ${price:g}/h is above ${MAX_PRICE_PER_HOUR:g}/h, more than any VM costs: "
                               "is it in dollars an hour?")
    if spot_price > on_demand_price:  # as the catalog loader refuses it: spot is the discounted offer
        raise ThriftyError(f"--spot-price ${spot_price:g}/h is above the --on-demand-price ${on_demand_price:g}/h: "
                           "a spot VM is the cheaper offer of the same machine")
    label, lifetime = load_model(lifetime_model)
    source = lifetime if lifetimes == "model" else EmpiricalLifetimes(read_lifetimes(data_file()))
    job = Job(job_hours * 3600, parse_duration_s(ckpt_cost, what="--ckpt-cost", bare_unit="s"),
              parse_duration_s(restart_cost, what="--restart-cost", bare_unit="s", allow_zero=True))
    deadline_s = parse_duration_s(deadline, what="--deadline", bare_unit="h")
    if deadline_s < job.work_s:
        raise ThriftyError(f"the deadline {fmt_duration(deadline_s)} is shorter than the job's "
                           f"{fmt_duration(job.work_s)} of work: no VM can meet it")
    outcomes = compare(lifetime, source, job, deadline_s, spot_price, on_demand_price, np.random.default_rng(0), runs)
    if json_out:
        print_json({"model": label, "lifetimes": lifetimes, "outcomes": [o.to_dict() for o in outcomes]})
        return
    drawn = f"the model {label}" if lifetimes == "model" else \
        f"the bundled GCP lifetimes ({data_file().name}), schedule from {label}"
    table = Table(title=f"{job_hours:g} h job, deadline {fmt_duration(deadline_s)}, lifetimes from {drawn}")
    table.add_column("policy", no_wrap=True)  # 'deadline-aware' whole at 80 columns; the headers wrap
    for col in ("mean time", "p95 time", "mean cost", "deadline met", "moved to on-demand"):
        table.add_column(col, justify="right")
    for o in outcomes:
        table.add_row(o.policy, fmt_duration(o.mean_time_s), fmt_duration(o.p95_time_s), fmt_usd(o.mean_cost_usd),
                      # only the mix moves: a dash for on-demand (not 100%) and spot alone (not 0%)
                      f"{o.deadline_met:.1%}", f"{o.switched:.1%}" if o.policy == "deadline-aware" else "-")
    stdout.print(table)
