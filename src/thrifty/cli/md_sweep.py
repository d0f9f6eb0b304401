# SPDX-License-Identifier: MIT
"""`thrifty md sweep`: a campaign of simulations over a parameter box, on Ray, on a (preemptible) pool.
It parses and prints; md.campaign.sweep assembles and runs the campaign."""

from pathlib import Path
from typing import Annotated

import typer

from thrifty.cli.common import (
    JsonOpt,
    fmt_duration,
    fmt_usd,
    parse_duration_s,
    positive,
    print_json,
    say_on_interrupt,
    stdout,
)
from thrifty.cli.preempt import LifetimeModelOpt, OldLifetimeModelOpt
from thrifty.md.surrogate.active import DEFAULT_TARGET


def sweep(space: Annotated[Path, typer.Option(
              help="TOML parameter box, one table a parameter named as the simulation names it, e.g. "
                   "\\[h_nm] min = 2.0, max = 4.0 and \\[z_plus] values = \\[1, 2] (nanoconfinement)")],
          budget_runs: Annotated[int, typer.Option(help="Completed runs to reach (counting those already stored)")],
          db: Annotated[Path, typer.Option(help="SQLite database of the campaign (a restart continues it)")] = Path("campaign.db"),
          pool: Annotated[str, typer.Option(help="spot:N or on-demand:N nodes")] = "spot:4",
          address: Annotated[str | None, typer.Option(
              help="Join this Ray cluster (ray://host:10001 or host:port) instead of starting one here")] = None,
          campaign: Annotated[str, typer.Option(help="Campaign name inside --db")] = "default",
          sampler: Annotated[str, typer.Option(
              help="grid, random or active (a surrogate picks where it would learn most; docs/md-surrogate.md)")] = "grid",
          seed: Annotated[int, typer.Option(help="Random seed (0 or more)", min=0)] = 0,
          target_within_error: Annotated[float, typer.Option(
              help="active: stop when this share of profile bins of runs it has not trained on is within 2 MD "
                   "error bars (an exact predictor scores about 0.95)")] = DEFAULT_TARGET,
          initial_runs: Annotated[int, typer.Option(help="active: runs of the random initial design")] = 8,
          simulation: Annotated[str, typer.Option(help="nanoconfinement (the MD model, to convergence), standin (a numpy "
                                                    "stand-in, not MD: parameters h, zp, zn, c, dp, dn) or "
                                                    "package.module:function")] = "nanoconfinement",
          work_dir: Annotated[Path | None, typer.Option(
              help="Run folders and checkpoints, on storage every node reaches (default: DB.runs beside --db, DB.runs-NAME for a new --campaign NAME; a campaign goes on where its sessions ran); one campaign's alone")] = None,
          lifetime_model: LifetimeModelOpt = "gcp-2019", old_model: OldLifetimeModelOpt = None,
          instance_type: Annotated[str, typer.Option(help="GCP VM type of the pool (its catalog prices)")] = "n1-standard-4",
          job_hours: Annotated[float, typer.Option(help="Expected length of one run, model hours", callback=positive)] = 3.0,
          ckpt_cost: Annotated[str, typer.Option(help="Checkpoint cost, model time (a bare number is seconds)")] = "60s",
          restart_cost: Annotated[str, typer.Option(help="Restart cost, model time (a bare number is seconds)")] = "60s",
          startup: Annotated[str, typer.Option(help="A fresh VM's start-up, model time, for placement (a bare number is seconds)")] = "60s",
          time_scale: Annotated[float | None, typer.Option(
              help="Model seconds per wall second (default 1, wall-clock accounting; 3600, a simulated hour a real "
                   "second, with --emulate-preemptions)", callback=positive)] = None,
          engine: Annotated[str, typer.Option(
              help="openmm, or torch: nanoconfinement on the batched torch engine, --replicas points per task")] = "openmm",
          replicas: Annotated[int, typer.Option(
              help="Points run as one batched job on one worker (--engine torch; 1 with openmm)")] = 1,
          dtype: Annotated[str, typer.Option(help="--engine torch: float64 or float32")] = "float64",
          device: Annotated[str, typer.Option(
              help="--engine torch: cpu, or cuda (each task then asks Ray for one GPU)")] = "cpu",
          equilibrate: Annotated[int | None, typer.Option(
              help="--simulation nanoconfinement: steps before sampling (default 20000)")] = None,
          tolerance: Annotated[float | None, typer.Option(
              help="--simulation nanoconfinement: a run has converged when every error bar is at most the larger "
                   "of this, mol/L, and --relative-tolerance x its bin's density (default 0.002)")] = None,
          relative_tolerance: Annotated[float | None, typer.Option(
              help="--simulation nanoconfinement: see --tolerance (default 0.1; 0: that floor alone)")] = None,
          cap_steps: Annotated[int | None, typer.Option(
              help="--simulation nanoconfinement: most steps of a run (default 200000)")] = None,
          box_nm: Annotated[float | None, typer.Option(
              help="--simulation nanoconfinement: box side, nm (default the model's: 15 up to 0.5 M, 10 above)")] = None,
          cutoff_nm: Annotated[float | None, typer.Option(
              help="--simulation nanoconfinement: real-space Coulomb cutoff, nm (default 2.5)")] = None,
          emulate_preemptions: Annotated[bool, typer.Option(
              help="Run on Ray's multi-node test cluster here, killing spot nodes at lifetimes drawn from --lifetime-model")] = False,
          json_out: JsonOpt = False) -> None:
    """Run simulations over a parameter box as Ray tasks that checkpoint and resume; every completed run lands in --db once."""
    from thrifty.md.campaign.sweep import SweepOptions, run_sweep
    options = SweepOptions(
        space, budget_runs, db, pool, address, campaign, sampler, seed, target_within_error, initial_runs, simulation,
        work_dir, lifetime_model, instance_type, job_hours, parse_duration_s(ckpt_cost, what="--ckpt-cost", bare_unit="s"),
        parse_duration_s(restart_cost, what="--restart-cost", bare_unit="s", allow_zero=True),
        parse_duration_s(startup, what="--startup", bare_unit="s", allow_zero=True), time_scale, engine, replicas,
        dtype, device, equilibrate, tolerance, relative_tolerance, cap_steps, box_nm, cutoff_nm, emulate_preemptions)
    # run_app says it on Ctrl-C ("error: terminated" for a SIGTERM)
    say_on_interrupt(f"interrupted: the campaign stopped; its stored runs stay in {db} and the same command continues it")
    summary = run_sweep(options)
    if json_out:
        print_json(summary)
        return
    # the stored runs' totals are the campaign's; preemptions and the bill are this session's
    if summary["already_finished"]:
        stdout.print(f"campaign {summary['campaign']!r} had finished already: nothing ran, no pool started")
    # on a compressed clock the work redone in model time too, as the node-hours (a new user's pass:
    # 1.16 s beside 46.94 node-hours read as nothing lost, while it was 70 model minutes at 3600x)
    redone_model = ("" if summary["time_scale"] == 1 else
                    f" (wall clock; {fmt_duration(summary['lost_work_s'] * summary['time_scale'])} of model time at this "
                    f"session's --time-scale {summary['time_scale']:g})")
    stdout.print(f"campaign: {summary['completed']} run{'' if summary['completed'] == 1 else 's'} stored ({summary['stored_now']} now, {summary['duplicates']} "
                 f"duplicates), {summary['converged']} converged, {summary['steps']:,} steps, "
                 f"{fmt_duration(summary['lost_work_s'])} of work redone{redone_model}; this session: "
                 f"{summary['preemptions']} node preemptions (VMs lost), {summary['node_hours_model']:.2f} node-hours"
                 f"{'' if summary['time_scale'] == 1 else ' (model time)'}: {fmt_usd(summary['cost_at_spot_usd'])} at "
                 f"spot, {fmt_usd(summary['cost_at_on_demand_usd'])} on demand; in {db}")
    outcome = summary.get("active")
    if outcome is not None:
        held_out = outcome["held_out"]
        stdout.print(f"active learning stopped at the {outcome['stopped']}: " + (
            "no batch picked by the surrogate completed" if held_out is None else
            f"{held_out['within_error']:.1%} of profile bins within 2 MD error bars on the last "
            f"{held_out['runs']} runs it had not trained on (target {target_within_error:.1%})"))
