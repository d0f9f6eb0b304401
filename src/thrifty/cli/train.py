# SPDX-License-Identifier: MIT
"""`thrifty train`: data-parallel training that keeps unequal workers equally busy.

Local processes with --nproc, or one rank of a torchrun launch (RANK / WORLD_SIZE in the
environment), synchronous (--mode bsp) or with a parameter server (--mode asp).
"""

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from thrifty.cli.common import (
    DEFAULT_DB,
    DEFAULT_WORKLOAD,
    DbOpt,
    JsonOpt,
    WorkloadOpt,
    float_list,
    fmt_duration,
    print_json,
    run_app,
    stderr,
    stdout,
)
from thrifty.errors import ThriftyError


def _schedule(slowdown, hetero_profile, slowdown_schedule, steps_hint: int):
    from thrifty.train.hetero import load_schedule, named_schedule, parse_slowdown
    given = [x for x in (slowdown, hetero_profile, slowdown_schedule) if x is not None]
    if len(given) > 1:
        raise ThriftyError("give at most one of --slowdown, --hetero-profile, --slowdown-schedule")
    if slowdown is not None:
        return parse_slowdown(slowdown)
    if hetero_profile is not None:
        return named_schedule(hetero_profile, steps_hint)
    if slowdown_schedule is not None:
        return load_schedule(slowdown_schedule)
    return None


def _show(summary: dict) -> None:
    table = Table(title=f"thrifty train: {summary['workload']}, {summary['workers']} worker{'' if summary['workers'] == 1 else 's'}, "
                        f"{summary.get('mode', 'bsp')}, policy {summary['policy']}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    resumed = summary.get("resumed_at_step") is not None
    # samples/s and the training time span every step of the run, a resumed one's earlier sessions
    # too; the wall time is this invocation's alone (a resume had shown 305 ms beside 5,949 samples/s
    # of 2,240 samples)
    rows = [("samples/s" + (" (all sessions)" if resumed else ""), f"{summary['samples_per_s']:,.0f}"),
            *([("training time" + (" (all sessions)" if resumed else ""), fmt_duration(summary["train_time_s"]))]
              if "train_time_s" in summary else []),  # ASP's clock is its wall time from the first update
            ("wall time" + (" (this session)" if resumed else ""), fmt_duration(summary["wall_time_s"])),
            (f"final {summary['metric_name']}", f"{summary['final_metric']:.4f}"),
            ("time to target", "not reached" if summary["time_to_target_s"] is None
             else fmt_duration(summary["time_to_target_s"])),
            ("final split", ",".join(map(str, summary["final_batch_sizes"]))),
            ("adjustments", str(summary["adjustments"])),
            ("wait fraction", f"{summary['wait_fraction']:.1%}")]
    if "device" in summary:
        rows.append(("device, precision", f"{summary['device']}, {summary['precision']}"))
    if summary.get("skipped_updates"):
        rows.append(("updates skipped (amp overflow)", str(summary["skipped_updates"])))
    if "staleness_mean" in summary:
        rows.append(("staleness mean / p90 / max",
                     f"{summary['staleness_mean']:.2f} / {summary['staleness_p90']:.0f} / {summary['staleness_max']}"))
    for row in rows:
        table.add_row(*row)
    stdout.print(table)
    stdout.print(f"run directory: {summary['run_dir']}")


def train(
    workload: WorkloadOpt = DEFAULT_WORKLOAD,
    nproc: Annotated[int, typer.Option(help="Local worker processes (ignored under torchrun)")] = 2,
    global_batch: Annotated[int | None, typer.Option(help="B = sum of local batches")] = None,
    policy: Annotated[str, typer.Option(help="uniform, static or dynamic")] = "dynamic",
    mode: Annotated[str, typer.Option(help="bsp (synchronous) or asp (parameter server)")] = "bsp",
    slowdown: Annotated[str | None, typer.Option(help="Per-rank slowdown factors, e.g. 1,4")] = None,
    hetero_profile: Annotated[str | None, typer.Option(help="HL1, HL2, HL4, HL8 or dynamic")] = None,
    slowdown_schedule: Annotated[Path | None, typer.Option(help="JSON schedule of slowdowns")] = None,
    emulate: Annotated[str, typer.Option(help="sleep (portable) or cgroup (root, cgroup v1)")] = "sleep",
    capacities: Annotated[str | None, typer.Option(help="static policy: relative speeds, e.g. 12,12,8,16")] = None,
    steps: Annotated[int | None, typer.Option(help="Steps to run (wins over --epochs)")] = None,
    epochs: Annotated[float, typer.Option(help="Epochs to run")] = 10.0,
    until_target: Annotated[bool, typer.Option(help="Stop once the target metric is reached")] = False,
    target: Annotated[float | None, typer.Option(help="Target metric (default: the workload's)")] = None,
    b_min: Annotated[int, typer.Option(help="Smallest local batch")] = 1,
    b_max: Annotated[int | None, typer.Option(help="Largest local batch (default: probed)")] = None,
    b_max_rule: Annotated[str, typer.Option(help="memory or throughput")] = "memory",
    dead_band: Annotated[float, typer.Option(help="Controller dead-band (relative)")] = 0.05,
    adjust_every: Annotated[int, typer.Option(help="At most one split change every K steps")] = 5,
    eval_every: Annotated[int | None, typer.Option(help="Steps between evaluations")] = None,
    checkpoint_every: Annotated[int, typer.Option(help="Steps between checkpoints (0: end only)")] = 50,
    keep_checkpoints: Annotated[int, typer.Option(help="Newest checkpoints kept (a damaged one falls back)")] = 2,
    run_dir: Annotated[Path, typer.Option(help="Checkpoint, CSV, plots")] = Path(".thrifty/runs/train"),
    resume: Annotated[bool, typer.Option(help="Continue from the newest intact checkpoint (implied under thrifty run)")] = False,
    resume_if_any: Annotated[bool, typer.Option(
        help="--resume where the run holds a checkpoint, else start: the same command starts and continues a job")] = False,
    force: Annotated[bool, typer.Option(
        help="Start over in a --run-dir that holds an earlier run's checkpoints (they are deleted)")] = False,
    sync_bn: Annotated[bool, typer.Option(help="Count-weighted synchronised BatchNorm")] = True,
    seed: Annotated[int, typer.Option(help="Random seed (0 or more)", min=0)] = 0,
    device: Annotated[str | None, typer.Option(
        help="cpu, cuda or cuda:N (default: cuda:LOCAL_RANK where CUDA is, else cpu)")] = None,
    precision: Annotated[str, typer.Option(help="fp32 (PyTorch's defaults: TF32 convolutions on Ampere+), tf32 (TF32 matmuls too), "
                                                     "amp (float16 autocast + loss scaler) or bf16")] = "fp32",
    loader_workers: Annotated[int, typer.Option(
        help="Worker processes per rank that prefetch an item-by-item data set")] = 2,
    step_stream: Annotated[Path | None, typer.Option(
        help="Append one JSON line per step to this file as steps end (for a supervisor such as thrifty search)")] = None,
    db: DbOpt = DEFAULT_DB,
    json_out: JsonOpt = False,
) -> None:
    """Train with per-worker batch sizes that follow each worker's speed."""
    from thrifty.pipeline import max_local_workers
    from thrifty.train.config import TrainConfig, global_batch_for, total_steps
    from thrifty.train.emulation import EMULATIONS
    from thrifty.train.policies import BATCH_POLICIES, ControllerSettings
    from thrifty.train.probe import RULES
    from thrifty.workloads import load_workload
    if policy not in BATCH_POLICIES:
        raise ThriftyError(f"unknown policy {policy!r}; choose one of {', '.join(BATCH_POLICIES)}")
    if mode not in ("bsp", "asp"):
        raise ThriftyError(f"unknown mode {mode!r}; choose bsp or asp")
    if emulate not in EMULATIONS:
        raise ThriftyError(f"unknown emulation {emulate!r}; choose sleep or cgroup")
    if b_max_rule not in RULES:
        raise ThriftyError(f"unknown --b-max-rule {b_max_rule!r}; choose memory or throughput")
    if resume and resume_if_any:  # a new user's pass: "checkpoint not found" for a run that had none
        raise ThriftyError("give one of --resume (a checkpoint must be there) and --resume-if-any (resume where "
                           "there is one, else start)")
    if (resume or resume_if_any) and mode == "asp":
        raise ThriftyError(f"--resume{'-if-any' if resume_if_any and not resume else ''} is for --mode bsp")
    if (resume or resume_if_any) and force:
        raise ThriftyError(f"give --resume{'-if-any' if resume_if_any and not resume else ''} (continue the run) "
                           "or --force (start over), not both")
    if mode == "asp" and (precision != "fp32" or device not in (None, "cpu")):
        raise ThriftyError("--mode asp trains in fp32 on the CPU; --device and --precision are for --mode bsp")
    if mode == "asp" and (until_target or step_stream is not None):  # a new user's pass: both were ignored
        raise ThriftyError("--until-target and --step-stream are for --mode bsp (asp trains its --steps or --epochs "
                           "and streams no steps)")
    if step_stream is not None:
        from thrifty.io import check_writable_file
        check_writable_file(step_stream, "--step-stream")  # before any rank starts, not from rank 0 after
    from thrifty.io import removed_on_failure
    from thrifty.store import Store
    from thrifty.train.launcher import launched_by_torchrun, start_worker_server
    from thrifty.train.runlock import LOCK_NAME, RunDirectoryBusy
    if not launched_by_torchrun() or os.environ.get("RANK", "0") == "0":
        # the rank that stores the run (rank 0 under torchrun) checks the database now, not after the
        # training; every rank opening it at once raced for its write lock
        with Store(db):
            pass
    if not launched_by_torchrun():
        start_worker_server()  # its imports overlap the dry run
    loaded = load_workload(workload)
    if target is not None and (why := loaded.unreachable(target, workload)):
        raise ThriftyError(why)
    from thrifty.train.dryrun import dry_run, dry_run_in_worker
    from thrifty.train.runtime import Runtime
    runtime = Runtime.for_rank(device, precision)  # a --device this machine lacks: one line, before any rank
    if runtime.precision == "amp" and runtime.device.type == "cpu":  # a short digits run took 8x the wall time, unsaid
        stderr.print("[yellow]warning:[/] --precision amp on the CPU runs float16 autocast slowly (several times "
                     "fp32's step time): it is there to try the mixed-precision path; a GPU runs it fast", soft_wrap=True)
    if runtime.precision == "tf32" and runtime.device.type == "cpu":  # TF32 is a CUDA matmul mode: fp32's result
        stderr.print("[yellow]warning:[/] --precision tf32 on the CPU trains in plain fp32 (TF32 is an Ampere GPU "
                     "matmul mode)", soft_wrap=True)
    if launched_by_torchrun():  # a broken workload: one line, now
        dry_run(loaded, runtime)
    else:  # in a rank's process, where torch._dynamo is imported already (train.dryrun)
        dry_run_in_worker(workload, device, precision)
    batch = global_batch_for(global_batch, loaded)
    if batch < 1:
        raise ThriftyError(f"--global-batch must be positive, got {batch}")
    config = TrainConfig(  # no --global-batch: the workload's default, or on --resume the checkpoint's
        workload=workload, workers=nproc, global_batch=global_batch, policy=policy, steps=steps,
        epochs=epochs, emulate=emulate, b_min=b_min, b_max=b_max, b_max_rule=b_max_rule,
        capacities=float_list(capacities, "--capacities") if capacities else None,
        controller=ControllerSettings(dead_band=dead_band, every=adjust_every),
        eval_every=eval_every, until_target=until_target, target=target,
        checkpoint_every=checkpoint_every, keep_checkpoints=keep_checkpoints, run_dir=run_dir, resume=resume, resume_if_any=resume_if_any, force=force,
        sync_bn=sync_bn,
        seed=seed, progress=not json_out, step_stream=step_stream, device=device, precision=precision,
        loader_workers=loader_workers)
    hint = total_steps(config, loaded.train_size, batch)
    config = replace(config, slowdown=_schedule(slowdown, hetero_profile, slowdown_schedule, hint))
    from thrifty.train.launcher import exit_without_teardown
    if launched_by_torchrun():
        import contextlib

        from thrifty.train.trainer import Preempted, train_torchrun_rank
        # rank 0 makes the run directory: a run that fails or is interrupted before any checkpoint
        # leaves none behind (a new user's pass: Ctrl-C left a folder holding only its .lock)
        made_here = (removed_on_failure(run_dir, keep=(Preempted, RunDirectoryBusy), own_names=(LOCK_NAME,),
                                        worth_keeping=_worth_keeping)
                     if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext())
        try:
            with made_here:
                summary = train_torchrun_rank(config)
        except Preempted as notice:  # rank 0 after a SIGTERM: saved; a SkyPilot managed job restarts it
            from thrifty.transient.protocol import PREEMPTED_EXIT
            _say_preempted(notice, run_dir, json_out)
            exit_without_teardown(PREEMPTED_EXIT)
        if summary is None:
            exit_without_teardown(0)
    elif mode == "asp":
        from thrifty.cli.common import stop_on_sigterm
        from thrifty.train.asp import run_asp
        # no checkpoint to take on a notice: a SIGTERM stops the run as Ctrl-C does, its folder removed
        # and one line said (a new user's pass: a silent 143 that left the folder with its lock)
        stop_on_sigterm()
        # a failed run leaves no run directory behind; one refused for another run's leaves it alone
        with removed_on_failure(run_dir, keep=(RunDirectoryBusy,), own_names=(LOCK_NAME,)):
            summary = run_asp(config, max_workers=max_local_workers())
    else:
        from thrifty.train.trainer import Preempted, run_training
        from thrifty.transient.protocol import PREEMPTED_EXIT, checkpoint_files
        earlier = checkpoint_files(run_dir)  # an earlier run's, which this one's failure does not concern
        try:  # a preempted run keeps its checkpoint, and so does one that failed after writing one
            with removed_on_failure(run_dir, keep=(Preempted, RunDirectoryBusy), own_names=(LOCK_NAME,),
                                    worth_keeping=_worth_keeping):
                summary = run_training(config, max_workers=max_local_workers())
        except Preempted as notice:  # `thrifty run` restarts a job that exits with PREEMPTED_EXIT
            _say_preempted(notice, run_dir, json_out)
            raise typer.Exit(PREEMPTED_EXIT) from None
        except KeyboardInterrupt:  # Ctrl-C: the line says where the work it kept is, as a failure's does
            if checkpoint_files(run_dir) != earlier and checkpoint_files(run_dir):
                from thrifty.cli.common import say_on_interrupt
                how = "the same command goes on" if resume or resume_if_any else "add --resume to go on"
                say_on_interrupt(f"interrupted: the run's last checkpoint stays in {run_dir}: {how} from it (steps "
                                 "since it are lost; a SIGTERM saves first)")
            raise
        except ThriftyError as failure:
            from thrifty.train.checkpoint import EarlierRunCheckpoints
            # say where the work it kept is: the checkpoints this run wrote (not a refused setting's on an
            # earlier run's folder, a finished one's included; not a folder another run holds)
            wrote = checkpoint_files(run_dir) != earlier and bool(checkpoint_files(run_dir))
            if not (resume or resume_if_any) and wrote and not isinstance(failure, (EarlierRunCheckpoints,
                                                                                   RunDirectoryBusy)):
                raise ThriftyError(f"{failure}; the run's last checkpoint stays in {run_dir}: add --resume "
                                    f"to go on from it") from None
            raise
    if summary.get("nothing_to_do"):  # the same line again on its finished run: as stored, stored once
        stored = run_dir / "summary.json"
        stderr.print(f"the run in {run_dir} is done (step {summary['resumed_at_step']}): nothing to do; its "
                     "summary as stored", soft_wrap=True)
        summary = json.loads(stored.read_text()) if stored.is_file() else summary
    else:
        _store(db, summary, config, mode)
    if json_out:
        print_json(summary)
    else:
        _show(summary)
    if launched_by_torchrun():
        exit_without_teardown(0)


def _worth_keeping(folder: Path) -> bool:
    """Whether a failed run's folder stays: it holds a checkpoint, or its checkpoints are elsewhere
    ($THRIFTY_CHECKPOINT_DIR: a spot task's bucket) and it holds the log a resume from them goes on
    with (a review: a failed spot run had lost its steps.csv)."""
    from thrifty.records import has_log
    from thrifty.transient.protocol import ENV_DIR, checkpoint_files
    elsewhere = os.environ.get(ENV_DIR)
    return bool(checkpoint_files(folder)) or bool(elsewhere and checkpoint_files(Path(elsewhere)) and has_log(folder))


def _say_preempted(notice, run_dir: Path, json_out: bool) -> None:
    """The notice's line on stderr and, under --json, what a script needs on stdout (it had printed
    nothing there): the step saved and where."""
    stderr.print(str(notice), soft_wrap=True)
    if json_out:  # under `thrifty run` (or a spot task) the checkpoints are in its folder, not the run's
        from thrifty.transient.protocol import ENV_DIR
        where = str(Path(run_dir).resolve())  # absolute, as summary.json's (a new user's pass: the text given)
        print_json({"preempted": True, "step": notice.step, "run_dir": where,
                    "checkpoint_dir": str(Path(os.environ[ENV_DIR]).resolve()) if os.environ.get(ENV_DIR) else where,
                    "message": str(notice)})


def _store(db: Path, summary: dict, config, mode: str) -> None:
    from thrifty.records import RunLog
    from thrifty.store import Store
    log = RunLog.read(config.run_dir) if mode == "bsp" else RunLog()
    with Store(db) as store:
        summary["run_id"] = store.save_training_run(summary, log, mode=mode)
    from thrifty.train.metrics import write_summary
    write_summary(config.run_dir, summary)  # the run folder names its row in --db


def main(argv: list[str], prog_name: str) -> int:
    """The train command alone (no other command imported): `python -m thrifty.train ARGS`."""
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command()(train)
    return run_app(single, argv, prog_name=prog_name)
