"""`thrifty run -- CMD...` (preemption-tolerant runner) and `thrifty md run` (the MD job)."""

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from thrifty.cli.common import JsonOpt, parse_duration_s, positive, print_json, stdout
from thrifty.errors import ThriftyError

md_app = typer.Typer(help="Molecular-dynamics jobs (OpenMM, or the torch engine) that survive preemptions.", no_args_is_help=True)


# `thrifty run -- CMD ...`: everything after the options is the command
RUN_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}


def run(ctx: typer.Context,
        checkpoint_dir: Annotated[Path, typer.Option(help="Where the job's checkpoints and events.jsonl go")] = Path(".thrifty/run"),
        model: Annotated[str, typer.Option(help="Lifetime model for the checkpoint schedule")] = "gcp-2019",
        job_hours: Annotated[Optional[float], typer.Option(
            help="Expected work, hours: DP schedule (else Young)", callback=positive)] = None,
        ckpt_cost: Annotated[str, typer.Option(
            help="Checkpoint cost, e.g. 60s, until the job reports measured ones")] = "60s",
        restart_cost: Annotated[str, typer.Option(help="Restart cost, until the job reports measured ones")] = "60s",
        notice: Annotated[str, typer.Option(help="Preemption notice (wall time)")] = "30s",
        time_scale: Annotated[float, typer.Option(
            help="Model seconds per wall second (compressed clock)", callback=positive)] = 1.0,
        inject: Annotated[bool, typer.Option(help="Preempt the job at lifetimes drawn from the model")] = False,
        kill: Annotated[str, typer.Option(help="sigkill, sigterm (notice first) or mixed")] = "sigkill",
        seed: Annotated[int, typer.Option()] = 0,
        json_out: JsonOpt = False) -> None:
    """Run CMD (after --), checkpointing on the model's schedule and restarting it after preemptions."""
    from thrifty.transient.adaptive import AdaptiveSchedule
    from thrifty.transient.registry import load_model
    from thrifty.transient.runner import Runner
    command = list(ctx.args)
    if not command:
        raise ThriftyError("no command to run: give it after --, e.g. thrifty run -- python job.py")
    _, lifetime = load_model(model)
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
            ("checkpoints took", "checkpoint_cost_median_s"), ("restarts", "restart_cost_median_s"))
            if measured[key] is not None)
        stdout.print(f"exit {report.exit_code} after {report.wall_s:.1f} s: {report.attempts} attempt(s), "
                     f"{report.preemptions} preemption(s), {report.checkpoints} checkpoint(s), "
                     f"{report.lost_work_s:.1f} s of work lost{costs}; events in {checkpoint_dir / 'events.jsonl'}")
    if report.exit_code:
        raise typer.Exit(report.exit_code)


NANO = "nanoconfinement only"
ENGINES = ("openmm", "torch")


@md_app.command("run")
def md_run(system: Annotated[str, typer.Option(
               help="lj (Lennard-Jones fluid), ions (confined electrolyte) or nanoconfinement (the published model)")] = "ions",
           steps: Annotated[Optional[int], typer.Option(
               help="MD steps (default 5000; nanoconfinement: run until the profiles converge or --cap-steps)")] = None,
           chunk: Annotated[Optional[int], typer.Option(
               help="Steps between samples and checkpoint chances (default 100, or the whole run if shorter)")] = None,
           out: Annotated[Path, typer.Option(help="Output directory")] = Path(".thrifty/md"),
           checkpoint_dir: Annotated[Optional[Path], typer.Option(
               help="Checkpoints (default: $THRIFTY_CHECKPOINT_DIR, else OUT/checkpoints)")] = None,
           platform: Annotated[Optional[str], typer.Option(
               help="OpenMM platform: Reference (bit-reproducible; the default), CPU, CUDA or OpenCL (where OpenMM "
                    "has it)")] = None,
           seed: Annotated[int, typer.Option()] = 0,
           engine: Annotated[str, typer.Option(
               help="openmm, or torch (md.torch_engine, batched and differentiable; nanoconfinement only)")] = "openmm",
           dtype: Annotated[str, typer.Option(help="float64 (bit-identical resumes on the CPU) or float32 (torch engine)")] = "float64",
           device: Annotated[str, typer.Option(help="cpu or cuda (torch engine)")] = "cpu",
           threads: Annotated[Optional[int], typer.Option(
               help="CPU threads of the torch engine (default: this machine's cores; give 1 on a shared one)")] = None,
           h: Annotated[float, typer.Option("--h", help=f"Wall separation, nm ({NANO})")] = 3.0,
           zp: Annotated[int, typer.Option("--zp", help=f"Cation valency 1..3 ({NANO})")] = 1,
           zn: Annotated[int, typer.Option("--zn", help=f"Anion valency, -1 ({NANO})")] = -1,
           c: Annotated[float, typer.Option("--c", help=f"Salt concentration, mol/L ({NANO})")] = 0.5,
           d_plus: Annotated[float, typer.Option(help=f"Cation diameter, nm ({NANO})")] = 0.474,
           d_minus: Annotated[float, typer.Option(help=f"Anion diameter, nm ({NANO})")] = 0.627,
           box_nm: Annotated[Optional[float], typer.Option(
               help=f"Box side lx = ly, nm (default 15 up to 0.5 M, else 10; {NANO})")] = None,
           cutoff_nm: Annotated[float, typer.Option(help=f"PME real-space cutoff, nm ({NANO})")] = 2.5,
           equilibrate: Annotated[Optional[int], typer.Option(
               help=f"Steps before profiles are sampled (default 20000, with --steps N: N/5; {NANO})")] = None,
           tolerance: Annotated[float, typer.Option(
               help=f"Converged when every profile error bar is at most this, mol/L ({NANO})")] = 0.02,
           cap_steps: Annotated[int, typer.Option(help=f"Without --steps, stop here if not converged ({NANO})")] = 200_000,
           json_out: JsonOpt = False) -> None:
    """Run a simulation (OpenMM, or --engine torch) that checkpoints on request and resumes where it stopped."""
    from thrifty.extras import require
    from thrifty.md.job import MDSettings, run_md
    from thrifty.io import check_writable_dir
    from thrifty.md.nanoconfinement import NanoconfinementModel
    from thrifty.md.systems import PLATFORMS, SYSTEMS, get_platform
    from thrifty.transient.protocol import ENV_DIR, JobCheckpoints, check_checkpoint_folder
    if system not in SYSTEMS:
        raise ThriftyError(f"unknown MD system {system!r}; choose {', '.join(SYSTEMS)}")
    if (steps is not None and steps < 1) or (chunk is not None and chunk < 1) or cap_steps < 1:
        raise ThriftyError("--steps, --chunk and --cap-steps must be positive")
    run_steps = cap_steps if steps is None and system == "nanoconfinement" else steps or 5000
    if chunk is not None and chunk > run_steps:
        raise ThriftyError(f"--chunk {chunk:,} is longer than the run ({'--cap-steps' if steps is None else '--steps'}"
                           f" {run_steps:,}): give a chunk of at most that many steps")
    chunk = min(100, run_steps) if chunk is None else chunk
    if engine not in ENGINES:
        raise ThriftyError(f"unknown --engine {engine!r}; choose {', '.join(ENGINES)}")
    if engine == "torch":
        require("torch")  # before the output folders are made (it is imported after them)
        if system != "nanoconfinement":
            raise ThriftyError(f"--engine torch runs --system nanoconfinement only, not {system}")
        if platform is not None:
            raise ThriftyError("--platform applies to --engine openmm; the torch engine takes --device cpu or cuda")
        if dtype not in ("float64", "float32"):
            raise ThriftyError(f"unknown --dtype {dtype!r}; choose float64 or float32")
        if device not in ("cpu", "cuda"):
            raise ThriftyError(f"unknown --device {device!r}; choose cpu or cuda")
        if threads is not None and threads < 1:
            raise ThriftyError(f"--threads must be at least 1, got {threads}")
    elif (dtype, device) != ("float64", "cpu"):
        raise ThriftyError("--dtype and --device apply to --engine torch; OpenMM takes --platform")
    elif threads is not None:
        raise ThriftyError("--threads applies to --engine torch (OpenMM's CPU platform reads OPENMM_CPU_THREADS)")
    platform = platform or "Reference"
    if platform not in PLATFORMS:
        raise ThriftyError(f"unknown OpenMM platform {platform!r}; choose {', '.join(PLATFORMS)}")
    model, run_length = None, {}
    if system == "nanoconfinement":
        model = NanoconfinementModel(h, zp, zn, c, d_plus, d_minus, box_nm, cutoff_nm)
        model.check()
        if equilibrate is None:
            equilibrate = 20_000 if steps is None else steps // 5
        if equilibrate < 0 or equilibrate >= (cap_steps if steps is None else steps):
            raise ThriftyError(f"--equilibrate {equilibrate} leaves no steps to sample: give less than "
                               f"{'--cap-steps' if steps is None else '--steps'}")
        if not tolerance > 0:
            raise ThriftyError(f"--tolerance must be positive, got {tolerance}")
        run_length = {"equilibration_steps": equilibrate, "tolerance_molar": tolerance, "cap_steps": cap_steps}
    else:
        given = [name for name, value, default in (
            ("--h", h, 3.0), ("--zp", zp, 1), ("--zn", zn, -1), ("--c", c, 0.5), ("--d-plus", d_plus, 0.474),
            ("--d-minus", d_minus, 0.627), ("--box-nm", box_nm, None), ("--cutoff-nm", cutoff_nm, 2.5),
            ("--equilibrate", equilibrate, None), ("--tolerance", tolerance, 0.02), ("--cap-steps", cap_steps, 200_000))
            if value != default]
        if given:
            raise ThriftyError(f"{', '.join(given)} apply to --system nanoconfinement only, not {system}")
        steps = 5000 if steps is None else steps
    if engine == "openmm":
        get_platform(platform)  # unavailable here: say so before any folder is made
    elif device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise ThriftyError("--device cuda: torch finds no CUDA device here; give --device cpu")
    check_writable_dir(out, "--out")
    if checkpoint_dir:
        check_writable_dir(checkpoint_dir, "--checkpoint-dir")
    check_checkpoint_folder(checkpoint_dir or Path(os.environ.get(ENV_DIR) or out / "checkpoints"))
    checkpoints = JobCheckpoints(checkpoint_dir) if checkpoint_dir else \
        JobCheckpoints.from_environment(default=out / "checkpoints")
    settings = MDSettings(system, steps, chunk, platform, seed, model, **run_length)
    if engine == "torch":
        from thrifty.md.torch_engine.job import run_torch_md
        from thrifty.md.torch_engine.threads import available_cores, use_threads
        with use_threads(threads or available_cores()):
            summary = run_torch_md(settings, out, checkpoints, dtype, device)
    else:
        summary = run_md(settings, out, checkpoints)
    if json_out:
        print_json(summary)
    elif system == "nanoconfinement":
        error = summary["max_error_molar"]
        bars = "no complete block yet" if error is None else f"largest error bar {error:.3f} M"
        stdout.print(f"{summary['system']}: {summary['steps']} steps ({summary['stopped']}), {summary['particles']} "
                     f"ions, {bars}; profiles.csv, profiles.png in {out}")
    else:
        stdout.print(f"{summary['system']}: {summary['steps']} steps, {summary['particles']} particles, "
                     f"final {summary['temperature_k']:.1f} K; density profile and thermo.csv in {out}")
