# SPDX-License-Identifier: MIT
"""`thrifty run -- CMD...`: the preemption-tolerant runner (`thrifty md run` is cli/md_run.py)."""

from pathlib import Path
from typing import Annotated

import typer

from thrifty.cli.common import JsonOpt, error_line, parse_duration_s, positive, print_json, stdout
from thrifty.cli.preempt import LifetimeModelOpt, OldLifetimeModelOpt
from thrifty.errors import ThriftyError

# `thrifty run [OPTIONS] [--] CMD ...`: the command starts at its first word, so its own options
# (`--seed 3`) are never read as the runner's; an unknown option before it is refused
RUN_CONTEXT = {"allow_extra_args": True, "allow_interspersed_args": False}


def run(ctx: typer.Context,
        checkpoint_dir: Annotated[Path, typer.Option(help="Where the job's checkpoints and events.jsonl go")] = Path(".thrifty/run"),
        lifetime_model: LifetimeModelOpt = "gcp-2019", old_model: OldLifetimeModelOpt = None,
        job_hours: Annotated[float | None, typer.Option(
            help="Expected work, hours: DP schedule (else Young)", callback=positive)] = None,
        ckpt_cost: Annotated[str, typer.Option(
            help="Checkpoint cost, e.g. 60s (a bare number is seconds), until the job reports measured ones")] = "60s",
        restart_cost: Annotated[str, typer.Option(help="Restart cost, e.g. 60s (a bare number is seconds), until the job reports measured ones")] = "60s",
        notice: Annotated[str, typer.Option(help="Preemption notice, wall time (a bare number is seconds)")] = "30s",
        time_scale: Annotated[float, typer.Option(
            help="Model seconds per wall second (compressed clock)", callback=positive)] = 1.0,
        inject: Annotated[bool, typer.Option(help="Preempt the job at lifetimes drawn from the model")] = False,
        kill: Annotated[str, typer.Option(help="sigkill, sigterm (notice first) or mixed")] = "sigkill",
        seed: Annotated[int, typer.Option(help="Random seed (0 or more)", min=0)] = 0,
        json_out: JsonOpt = False) -> None:
    """Run CMD (after --), checkpointing on the model's schedule and restarting it after preemptions."""
    from thrifty.transient.adaptive import AdaptiveSchedule
    from thrifty.transient.registry import load_model
    from thrifty.transient.runner import Runner
    command = list(ctx.args)
    if not command:
        raise ThriftyError("no command to run: give it after --, e.g. thrifty run -- python job.py")
    if kill in ("sigterm", "mixed") and not inject:  # without --inject nothing is preempted: it would be ignored
        raise ThriftyError(f"--kill {kill} chooses how injected preemptions end a VM: give --inject with it")
    _, lifetime = load_model(lifetime_model)
    delta = parse_duration_s(ckpt_cost, what="--ckpt-cost", bare_unit="s")
    restart = parse_duration_s(restart_cost, what="--restart-cost", bare_unit="s", allow_zero=True)
    # costs are model time (like --job-hours); the job's measured ones replace them as they come
    schedule = AdaptiveSchedule(lifetime, delta / time_scale, restart / time_scale,
                                None if job_hours is None else job_hours * 3600 / time_scale, time_scale)
    runner = Runner(command, checkpoint_dir, notice_s=parse_duration_s(notice, what="--notice", bare_unit="s"),
                    lifetimes=lifetime if inject else None, time_scale=time_scale, kill=kill, seed=seed,
                    schedule=schedule)
    report = runner.run()
    if json_out:
        print_json(report.summary())
    else:
        measured = report.summary()
        costs = "".join(f", {what} {measured[key]:.3g} s (median)" for what, key in (
            ("checkpoints took", "checkpoint_cost_median_s"),
            ("starts took", "restart_cost_median_s"))  # launch to working, the first start's too: a restart's cost
            if measured[key] is not None)
        stdout.print(f"exit {report.exit_code} after {report.wall_s:.1f} s: {report.attempts} attempt(s), "
                     f"{report.preemptions} preemption(s), "
                     + (f"{report.stops} stop(s) from outside, " if report.stops else "")
                     + f"{report.checkpoints} checkpoint(s), "
                     f"{report.lost_work_s:.1f} s of work lost{costs}; events in {checkpoint_dir / 'events.jsonl'}",
                     soft_wrap=True)  # one line in a pipe too (a script reads it)
    if report.failure is not None:  # the summary above, then why, and the job's own exit code
        error_line(f"{report.failure}; see {checkpoint_dir / 'events.jsonl'}")
    if report.exit_code:
        raise typer.Exit(report.exit_code)
