# SPDX-License-Identifier: MIT
"""`thrifty md run`: one MD job (OpenMM, or the torch engine) that checkpoints on request and resumes
where it stopped. It parses and prints; md.engines.single_run checks the engine's options, sets the
sampling and runs the job (md.engines.job_loop)."""

import json
import logging
import os
import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from thrifty.cli.common import JsonOpt, parse_duration_s, print_json, stdout
from thrifty.errors import ThriftyError

md_app = typer.Typer(help="Molecular-dynamics jobs (OpenMM, or the torch engine) that survive preemptions.",
                     no_args_is_help=True)

NANO = "nanoconfinement only"
NANOCONFINEMENT_ONLY = ("h", "zp", "zn", "c", "d_plus", "d_minus", "box_nm", "cutoff_nm", "equilibrate", "tolerance",
                        "relative_tolerance", "cap_steps")
log = logging.getLogger(__name__)
STOPPED = {"converged": "converged", "cap": "not converged by --cap-steps", "steps": "as --steps asked"}  # why it stopped


def _holds(stored: object, wanted: object) -> bool:
    """Whether `stored` (a summary's JSON) has every key and value of `wanted` (a dict may hold more)."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(_holds(stored.get(k), v) for k, v in wanted.items())
    return stored == wanted


def _finished_here(out: Path, force: bool, this_run: dict) -> dict | None:
    """A finished run of this same job in --out (`this_run`'s keys equal in its summary.json) is
    returned: the command repeated has nothing to do (and under `thrifty run`, a VM taken back after
    the job ended restarts it: the job is done, not failed). Another finished run there is refused
    unless --force (whose run removes, once it has finished, what the old one left that it did not
    write: _remove_stale_outputs; and at its start the checkpoints the finished run left:
    _drop_finished_runs_checkpoints; a checkpoint of another run is refused as always)."""
    from thrifty.md.runs import SUMMARY_FILE
    path = out / SUMMARY_FILE
    if not path.exists() or force:
        return None
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        summary = None
    if _holds(summary, this_run):
        return summary
    raise ThriftyError(f"--out {out} holds a finished run ({SUMMARY_FILE}): give --force to replace it, or another --out")


def _remove_stale_outputs(out: Path, started_ns: int) -> None:
    """After a --force run has finished: the replaced run's outputs (md.runs.RUN_OUTPUT_FILES) that
    this one did not write again. A run of another system had left profiles.csv and params.json
    for train-surrogate to take as its own; removed only now, a run refused or stopped on its way
    destroys no output (thermo.csv, which a resume trims, included)."""
    from thrifty.md.runs import RUN_OUTPUT_FILES
    for name in RUN_OUTPUT_FILES:
        path = out / name
        if path.exists() and path.stat().st_mtime_ns < started_ns:
            path.unlink()


def _drop_finished_runs_checkpoints(out: Path, checkpoints: Path) -> None:
    """--force over a finished run: the checkpoints written before its summary are the finished
    run's (one left by a notice on its way): a fresh run must not resume from them (`--force` over
    a run that was once interrupted was refused: "the checkpoint ... is at step 7,500, beyond
    --steps 5,000"). Newer ones are an unfinished --force run's own, which the same command resumes.
    Told apart by modification time: checkpoints copied back from elsewhere after the summary count
    as the unfinished run's."""
    from thrifty.md.runs import SUMMARY_FILE
    from thrifty.transient.protocol import checkpoint_files
    summary = out / SUMMARY_FILE
    if not summary.exists():
        return
    finished_ns = summary.stat().st_mtime_ns
    for path in checkpoint_files(checkpoints):
        if path.stat().st_mtime_ns <= finished_ns:
            path.unlink(missing_ok=True)


def _checkpoint_on_first_ctrl_c(checkpoints) -> None:
    """Alone (not under `thrifty run`), a first Ctrl-C is the notice: the run checkpoints after its
    chunk and exits 75, and the same command resumes; a second one stops it at once. (A run alone
    checkpoints on notices only, so Ctrl-C had ended it with nothing saved.)"""
    def first(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # first: a quick second Ctrl-C is the second
        checkpoints.take_notice()
        log.warning("interrupted: checkpointing after this chunk, then stopping (Ctrl-C again: stop at once, "
                    "nothing saved)")
    signal.signal(signal.SIGINT, first)


def _checkpoint_folder(checkpoint_dir: Path | None, out: Path) -> Path:
    """Where the run's checkpoints go: --checkpoint-dir, else $THRIFTY_CHECKPOINT_DIR, else OUT/checkpoints."""
    from thrifty.transient.protocol import ENV_DIR
    return checkpoint_dir or Path(os.environ.get(ENV_DIR) or out / "checkpoints")


def _run(options, model, settings, out: Path, checkpoint_dir: Path | None, system: str,
         every_s: float | None) -> dict:
    from thrifty.progress import ProgressBar
    from thrifty.transient.protocol import JobCheckpoints, PeriodicCheckpoints, under_runner
    folder = _checkpoint_folder(checkpoint_dir, out)
    checkpoints = JobCheckpoints(folder) if every_s is None else PeriodicCheckpoints(folder, every_s)
    if not under_runner():
        _checkpoint_on_first_ctrl_c(checkpoints)
    bar: list[ProgressBar] = []  # started at the first chunk: after every check, so errors come first

    def on_chunk(step: int) -> None:
        if not bar:
            bar.append(ProgressBar(f"md run {system}", settings.last_step, completed=step))
        bar[0].update(step)
    try:
        return options.run(model, settings, out, checkpoints, on_chunk)
    finally:
        for b in bar:
            b.close()


@md_app.command("run")
def md_run(ctx: typer.Context, system: Annotated[str | None, typer.Option(
               help="lj (Lennard-Jones fluid), ions (confined electrolyte) or nanoconfinement (the published model); "
                    "default ions, with --engine torch nanoconfinement (the one system it runs)")] = None,
           steps: Annotated[int | None, typer.Option(
               help="MD steps (default 5000; nanoconfinement: run until the profiles converge or --cap-steps)")] = None,
           chunk: Annotated[int | None, typer.Option(
               help="Steps between samples and checkpoint chances (default 100, or the whole run if shorter)")] = None,
           out: Annotated[Path, typer.Option(help="Output directory")] = Path(".thrifty/md"),
           force: Annotated[bool, typer.Option(help="Replace the outputs of a finished run in --out")] = False,
           checkpoint_dir: Annotated[Path | None, typer.Option(
               help="Checkpoints (default: $THRIFTY_CHECKPOINT_DIR, else OUT/checkpoints)")] = None,
           checkpoint_every: Annotated[str | None, typer.Option(
               help="Also checkpoint every this long, e.g. 10m, when run alone (default: only when asked: a "
                    "SIGTERM, Ctrl-C, or `thrifty run`'s schedule)")] = None,
           platform: Annotated[str | None, typer.Option(
               help="OpenMM platform: Reference (bit-reproducible; the default), CPU, CUDA or OpenCL (where OpenMM "
                    "has it)")] = None,
           seed: Annotated[int, typer.Option(help="Random seed (0 or more)", min=0)] = 0,
           engine: Annotated[str, typer.Option(
               help="openmm, or torch (md.torch_physics, batched and differentiable; nanoconfinement only)")] = "openmm",
           dtype: Annotated[str, typer.Option(help="float64 (bit-identical resumes on the CPU) or float32 (torch engine)")] = "float64",
           device: Annotated[str, typer.Option(help="cpu or cuda (torch engine)")] = "cpu",
           threads: Annotated[int | None, typer.Option(
               help="CPU threads of the torch engine (default: this machine's cores; give 1 on a shared one)")] = None,
           h: Annotated[float, typer.Option("--h", help=f"Wall separation, nm ({NANO})")] = 3.0,
           zp: Annotated[int, typer.Option("--zp", help=f"Cation valency 1..3 ({NANO})")] = 1,
           zn: Annotated[int, typer.Option("--zn", help=f"Anion valency, -1 ({NANO})")] = -1,
           c: Annotated[float, typer.Option("--c", help=f"Salt concentration, mol/L ({NANO})")] = 0.5,
           d_plus: Annotated[float, typer.Option(help=f"Cation diameter, nm ({NANO})")] = 0.474,
           d_minus: Annotated[float, typer.Option(help=f"Anion diameter, nm ({NANO})")] = 0.627,
           box_nm: Annotated[float | None, typer.Option(
               help=f"Box side lx = ly, nm (default 15 up to 0.5 M, else 10; {NANO})")] = None,
           cutoff_nm: Annotated[float, typer.Option(help=f"PME real-space cutoff, nm ({NANO})")] = 2.5,
           equilibrate: Annotated[int | None, typer.Option(
               help=f"Steps before profiles are sampled (default 20000, with --steps N: N/5; {NANO})")] = None,
           tolerance: Annotated[float, typer.Option(
               help=f"Converged when every profile error bar is at most the larger of this, mol/L, and "
                    f"--relative-tolerance x its bin's density ({NANO})")] = 0.002,
           relative_tolerance: Annotated[float, typer.Option(
               help=f"See --tolerance; 0: that floor alone ({NANO})")] = 0.1,
           cap_steps: Annotated[int, typer.Option(help=f"Without --steps, stop here if not converged ({NANO})")] = 200_000,
           json_out: JsonOpt = False) -> None:
    """Run a simulation (OpenMM, or --engine torch) that checkpoints on request and resumes where it stopped."""
    from thrifty.io import check_writable_dir
    from thrifty.md.engines.job_loop import Preempted
    from thrifty.md.engines.single_run import (
        EngineOptions,
        fixed_length_sampling,
        nanoconfinement_sampling,
        run_length,
    )
    from thrifty.md.nanoconfinement import NanoconfinementModel
    from thrifty.transient.protocol import check_checkpoint_folder, under_runner
    system = system or ("nanoconfinement" if engine == "torch" else "ions")
    options = EngineOptions(engine, system, platform, dtype, device, threads, seed).checked()
    last_step, chunk = run_length(system, steps, chunk, cap_steps)
    model = None
    if system == "nanoconfinement":
        model = NanoconfinementModel(h, zp, zn, c, d_plus, d_minus, box_nm, cutoff_nm)
        model.check()
        settings = nanoconfinement_sampling(steps, chunk, equilibrate, tolerance, relative_tolerance, cap_steps)
    else:
        # given on the command line, its default value included (compared with the defaults, an
        # explicit --h 3 passed unnoticed); by name: typer vendors its own click
        given = [f"--{name.replace('_', '-')}" for name in NANOCONFINEMENT_ONLY
                 if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"]
        if given:
            raise ThriftyError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to --system nanoconfinement "
                               f"only, not {system}")
        settings = fixed_length_sampling(last_step, chunk)
    every_s = None if checkpoint_every is None else parse_duration_s(checkpoint_every, what="--checkpoint-every",
                                                                       bare_unit="s")
    if every_s is not None and under_runner():  # its runner's schedule asks, and prices what it asks
        raise ThriftyError("--checkpoint-every is for a run alone: under `thrifty run` its schedule asks for them")
    check_writable_dir(out, "--out")
    if checkpoint_dir:
        check_writable_dir(checkpoint_dir, "--checkpoint-dir")
    check_checkpoint_folder(_checkpoint_folder(checkpoint_dir, out))
    this_run = {"system": system, "seed": seed, "engine": engine, "sampling": asdict(settings),
                # as the engine's describe() writes them: another platform or precision is another run
                **({"platform": options.platform} if engine == "openmm" else
                   {"platform": f"torch-{options.device.split(':')[0]}", "dtype": options.dtype})}
    if model is not None:
        this_run["parameters"] = {**asdict(model), "box_nm": model.side_nm}  # the default side, resolved
    summary = _finished_here(out, force, this_run)
    if force:
        _drop_finished_runs_checkpoints(out, _checkpoint_folder(checkpoint_dir, out))
    if summary is not None:
        log.warning("--out %s holds this job's finished run: nothing to do", out)
    else:
        started_ns = time.time_ns()
        try:
            summary = _run(options, model, settings, out, checkpoint_dir, system, every_s)
        except Preempted as notice:  # a new user's pass: --json printed nothing (train's says this much)
            if json_out:
                where = _checkpoint_folder(checkpoint_dir, out)
                print_json({"preempted": True, "step": notice.step, "out": str(out), "checkpoint_dir": str(where),
                            "message": f"checkpointed at step {notice.step} on a preemption notice; "
                                       "the same command resumes from it"})
            raise
        if force:
            _remove_stale_outputs(out, started_ns)
    if json_out:
        print_json(summary)
    elif system == "nanoconfinement":
        error = summary["max_error_molar"]
        blocks = summary.get("complete_blocks", 0)  # an error bar needs two blocks (md.engines.outputs)
        bars = (f"{blocks} complete block{'' if blocks == 1 else 's'}, no error bar before 2" if error is None
                else f"largest error bar {error:.3f} M")
        why = STOPPED.get(summary["stopped"], summary["stopped"])
        stdout.print(f"{summary['system']}: {summary['steps']} steps ({why}), {summary['particles']} ions, {bars}; "
                     f"profiles.csv, profiles.png, params.json in {out}")
    else:
        stdout.print(f"{summary['system']}: {summary['steps']} steps, {summary['particles']} particles, "
                     f"final {summary['temperature_k']:.1f} K; density profile and thermo.csv in {out}")
