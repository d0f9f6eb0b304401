# SPDX-License-Identifier: MIT
"""Checkpoints of a training run, in the format `thrifty run` watches (transient.protocol):
`ckpt-000001.bin`, ... (checksummed, temp name, fsync, rename), the newest `keep_checkpoints`
kept, in $THRIFTY_CHECKPOINT_DIR under the runner and in the run directory otherwise.

Rank 0 writes model, optimizer, batch policy (the controller's state), sampler position, samples
seen (the learning-rate schedule's position), amp's loss-scaler state and every rank's RNG state
(the CPU's and its GPU's), after appending the rows since the last checkpoint to the run's CSV
log; the checkpoint records the log files' lengths, and a resumed run cuts them back to those
(rows of steps after the checkpoint go), so no checkpoint reads or rewrites the whole log.
Tensors are read onto the CPU and then loaded into the model and optimizer where they live, so a
checkpoint from a GPU resumes on a CPU and back. A run resumes from the newest intact checkpoint
(a damaged newer one is skipped and logged in fallbacks.log, as a lost checkpoint): rank 0 reads
it and sends it to every rank, so the ranks cannot disagree and need no shared storage. With the
same world size and global batch the run continues bit for bit. A run may also move to another
world size and global batch (checkpoint, relaunch with other --nproc / --global-batch, resume):
- the sampler continues the same epoch's permutation at the saved sample offset, so no sample of
  the epoch is seen twice or skipped (checkpoints without an offset: step-in-epoch x saved B);
- the optimizer is the workload's for the new B (`make_optimizer(params, B)`); its saved state
  (momentum buffers, Adam moments, step counts) is loaded, and then every param group's
  hyperparameters (lr, momentum, weight decay, ...) are set back to the new B's, so a batch-scaled
  learning rate follows the new B. The schedule's position is the samples seen (saved), so the
  workload's schedule (workloads.schedules) continues where it was, at the new B's base rate;
- the controller (batch policy) starts fresh, splitting B among the ranks from B / n, as the old
  ranks' speeds at the old split say nothing about the new one;
- the step counter and the log continue (see train.config.total_steps for the run length).
Another workload is refused; a global batch above the data set is refused by check_config.
"""

import logging
import os
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from thrifty.checkpoint_file import CheckpointError, decode, dumps, loads
from thrifty.records import RunLog, check_log_bytes
from thrifty.train.config import TrainConfig
from thrifty.train.loop import RankState
from thrifty.train.policies import BatchPolicy
from thrifty.transient.protocol import ENV_DIR, JobCheckpoints, checkpoint_files, newest_intact, under_runner
from thrifty.workloads import canonical_name

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "thrifty.train/2"


def checkpoint_dir(config: TrainConfig) -> Path:
    """The config's, else the runner's (it counts and watches the files there), else run_dir."""
    if config.checkpoint_dir is not None:
        return Path(config.checkpoint_dir)
    return Path(os.environ[ENV_DIR]) if under_runner() else Path(config.run_dir)


def checkpoint_store(config: TrainConfig) -> JobCheckpoints:
    return JobCheckpoints(checkpoint_dir(config), handle_signals=False, keep=config.keep_checkpoints)


def check_resumable(config: TrainConfig) -> int | None:
    """--resume without an intact checkpoint, or from one of another workload, fails here, before
    anything is written or started (call it after check_config); the checkpoint's step (None
    without --resume), for check_steps_left once the run directory is held."""
    if not config.resume:
        return None
    directory = checkpoint_dir(config)
    files = checkpoint_files(directory) if directory.is_dir() else []
    if not files:
        raise CheckpointError(f"checkpoint not found in {directory} (no ckpt-*.bin)")
    found = newest_intact(directory)
    if found is None:
        raise CheckpointError(f"every checkpoint in {directory} is truncated or corrupt "
                              f"({', '.join(p.name for p in files)})")
    saved = _read(found[0], found[1], config)  # the bytes read: a live run may prune the file
    if "log_bytes" in saved:
        check_log_bytes(config.run_dir, saved["log_bytes"])
    return saved.get("step")


def resolved_resume(config: TrainConfig) -> TrainConfig:
    """--resume-if-any as --resume where the checkpoint folder holds a checkpoint (an intact one or
    not: check_resumable then refuses a damaged or another workload's as --resume does), as a fresh
    run where it holds none: the same command starts the job and, relaunched after a crash or a
    stop, continues it (`thrifty plan`'s on-demand task and torchrun line; plan.launch)."""
    if not config.resume_if_any or config.resume or under_runner():  # the runner implies a resume its own way
        return config
    directory = checkpoint_dir(config)
    return replace(config, resume=bool(directory.is_dir() and checkpoint_files(directory)))


def with_resumed_batch(config: TrainConfig) -> TrainConfig:
    """A --resume that gives no --global-batch continues at its checkpoint's (it had gone back to the
    workload's default: a run moved to 128 went on at 64); the config as it is otherwise, or when
    no intact checkpoint is there (check_resumable then says why)."""
    if not config.resume or config.global_batch is not None:
        return config
    directory = checkpoint_dir(config)
    found = newest_intact(directory) if directory.is_dir() else None
    if found is None:
        return config
    try:
        saved = _read(found[0], found[1], config)
    except CheckpointError:
        return config  # another workload's: check_resumable refuses it
    return replace(config, global_batch=int(saved["global_batch"]))


def check_steps_left(config: TrainConfig, saved_step: int | None) -> None:
    """A --resume whose --steps are done is refused before any rank starts (it reported success at
    step 50 of 40); a runner's restart of a job that ended just then is no error. The local launcher
    calls it; under torchrun check_work_left does the same on every rank. Call it holding the run directory,
    so that a folder in use says so first (the step is check_resumable's, read just before: a run
    that ended in between makes it stale). An --epochs run that is done is caught by check_work_left."""
    if saved_step is not None and config.steps is not None and saved_step >= config.steps \
            and not finishes_quietly(config, asked_no_less=saved_step == config.steps):
        raise CheckpointError(f"the run in {config.run_dir} is at step {saved_step}: --steps {config.steps} "
                              f"is done; give --steps above {saved_step} to train on")


def finishes_quietly(config: TrainConfig, asked_no_less: bool) -> bool:
    """A restart of a finished run is no error, but ends at once with its summary: under `thrifty
    run` (a VM taken back just after the job ended) and under --resume-if-any when it asks for no
    less than the run did (the plan's line run again on its finished run, as a spot task's is: a new
    user's pass found the on-demand relaunch failing where the spot one did not; fewer --steps or
    --epochs than were done are refused as under --resume)."""
    return under_runner() or (config.resume_if_any and asked_no_less)


def nothing_to_do(config: TrainConfig) -> bool:
    """Whether a run that trains no step is the plan's line again on its finished run: it stores
    and writes nothing again (train.trainer; cli.train prints the stored summary)."""
    return config.resume_if_any and not under_runner()


def check_work_left(config: TrainConfig, step: int, stop_step: int, target_met: str | None = None) -> None:
    """A resumed run with nothing left to train (its --epochs done, which needs the workload's size to
    tell: check_steps_left cannot; or, with --until-target, `target_met`: the target its checkpoint's
    last evaluation had met, described) is refused; every rank calls it on the same state and refuses
    alike, so none waits for another. A runner's restart of a job that ended just then is no error."""
    if step == 0 or finishes_quietly(config, asked_no_less=target_met is not None or stop_step >= step):
        return
    if target_met is not None:
        raise CheckpointError(f"the run in {config.run_dir} had met its target by step {step} ({target_met}): "
                              "--until-target has nothing left to train")
    if stop_step <= step:
        asked = f"--steps {config.steps}" if config.steps is not None else f"--epochs {config.epochs or 1.0:g}"
        raise CheckpointError(f"the run in {config.run_dir} is at step {step}: {asked} is done; ask for more "
                              "to train on")


class EarlierRunCheckpoints(CheckpointError):
    """A fresh run (no --resume, no --force) in a run directory holding another run's checkpoints."""


def choose_checkpoint(config: TrainConfig) -> Path | None:
    """The checkpoint this run continues from, None for a fresh start (call it holding the run
    directory). Resuming is implied under `thrifty run`. A fresh run clears older checkpoints, so
    that a later --resume cannot continue another run; it refuses to, unless `force`, when they
    are an earlier run's (a second `thrifty train` in one folder deleted the first one's work).
    Under `thrifty run`, whose checkpoints go to its own folder, a run directory holding checkpoints
    is refused the same way (its new outputs had joined another run's checkpoints there)."""
    run_dir = Path(config.run_dir)
    if under_runner() and run_dir.resolve() != checkpoint_dir(config).resolve():
        stale = checkpoint_files(run_dir)
        if stale and not config.force:  # the runner's checkpoints go elsewhere: these are another run's
            raise EarlierRunCheckpoints(
                f"--run-dir {run_dir} holds an earlier run's checkpoints (newest {stale[-1].name}), which would lie "
                f"beside this run's outputs while its own go to {checkpoint_dir(config)}: --force deletes them, "
                "or give another --run-dir")
        for path in stale:
            path.unlink(missing_ok=True)
    found = None
    if config.resume or under_runner():
        found = checkpoint_store(config).latest_file()
        if found is None and config.resume:  # damaged or gone since check_resumable looked
            raise CheckpointError(f"no intact checkpoint left in {checkpoint_dir(config)} to resume from")
    if found is None:
        earlier = checkpoint_files(checkpoint_dir(config))
        if earlier and not (config.force or under_runner()):
            raise EarlierRunCheckpoints(
                f"--run-dir {config.run_dir} holds an earlier run's checkpoints (newest {earlier[-1].name}): "
                "add --resume to continue it, --force to start over (they are deleted), or give another --run-dir")
        for path in earlier:
            path.unlink(missing_ok=True)
    return None if found is None else found[0]


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()  # the current device's (the rank's GPU)
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():  # a GPU checkpoint resumed on the CPU skips it
        torch.cuda.set_rng_state(state["cuda"])


def save_checkpoint(state: RankState, config: TrainConfig, rank: int, world: int,
                    store: JobCheckpoints | None) -> None:
    """Every rank calls it (the RNG states are gathered); rank 0 writes into `store`, which reports
    the checkpoint's cost from here: the gather, the log's append, serialising and writing."""
    began = time.monotonic()
    rngs: list[dict | None] = [None] * world
    if world > 1:
        dist.all_gather_object(rngs, rng_state())
    else:
        rngs = [rng_state()]
    if rank != 0:
        return
    if store is None or not isinstance(state.policy, BatchPolicy):
        raise TypeError("rank 0 saves into a store, and only a BatchPolicy's state is checkpointed")
    log_bytes = state.log.append(config.run_dir)  # first: a kill between the two leaves the log ahead
    payload = dumps({
        "format": CHECKPOINT_FORMAT, "workload": canonical_name(config.workload), "world_size": world,
        "global_batch": state.policy.global_batch, "model": state.model.state_dict(),
        "optimizer": state.own_optimizer().state_dict(), "policy": state.policy.state_dict(), "step": state.step,
        "epoch": state.epoch, "sample_offset": state.sample_offset, "samples_seen": state.samples_seen,
        "skipped_updates": state.skipped_updates,
        "scaler": state.scaler.state_dict() if state.scaler is not None else None,
        "train_time_s": state.train_time_s, "rng": rngs, "log_bytes": log_bytes, "last_metric": state.last_metric})
    path = store.save(payload, began_s=began)
    log.info("checkpoint of step %d (epoch %d) written: %s, %.1f MB", state.step, state.epoch, path,
             len(payload) / 1e6)


def _read(path: Path, payload: bytes, config: TrainConfig) -> dict:
    saved = loads(payload, str(path))
    if not isinstance(saved, dict) or saved.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a checkpoint of this thrifty train version")
    if saved["workload"] != canonical_name(config.workload):
        raise CheckpointError(f"{path} is a checkpoint of {saved['workload']}, not of {config.workload}")
    return saved


def saved_offset(saved: dict) -> int:
    """The checkpoint's sample offset in its epoch; older checkpoints count whole global batches
    (their `step_in_epoch`)."""
    if "sample_offset" in saved:
        return saved["sample_offset"]
    return saved["step_in_epoch"] * saved["global_batch"]


def adopt_hyperparameters(optimizer: torch.optim.Optimizer, fresh_groups: list[dict]) -> None:
    """Every param group takes the hyperparameters (all but its parameters) of `fresh_groups`,
    another global batch's; the optimizer's state (moments, momentum buffers) stays."""
    for group, fresh in zip(optimizer.param_groups, fresh_groups, strict=True):
        group.update({k: v for k, v in fresh.items() if k != "params"})


def load_optimizer(optimizer: torch.optim.Optimizer, saved_state: dict, moved: bool) -> None:
    """Load the saved optimizer state; after a move to another global batch keep the fresh
    optimizer's (the new B's) hyperparameters in every param group, the saved state otherwise."""
    fresh = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
    optimizer.load_state_dict(saved_state)
    if moved:
        adopt_hyperparameters(optimizer, fresh)


def restore(state: RankState, config: TrainConfig, rank: int, world: int, resume_from: Path | None) -> dict | None:
    """Every rank calls it: continue from rank 0's `resume_from` (nothing happens for None); where
    the checkpoint's log stood (None without one), for resume_log once the run is known to train on."""
    saved, error = None, None
    if rank == 0 and resume_from is not None:
        try:
            path = Path(resume_from)
            saved = _read(path, decode(path.read_bytes(), str(path)), config)
        except (CheckpointError, OSError) as exc:
            error = str(exc)
    if world > 1:
        box = [(saved, error)]
        dist.broadcast_object_list(box, src=0)
        saved, error = box[0]
    if error:
        raise CheckpointError(error)
    if saved is None:
        return None
    moved = saved["global_batch"] != state.policy.global_batch
    state.model.load_state_dict(saved["model"])
    load_optimizer(state.own_optimizer(), saved["optimizer"], moved)
    state.step, state.epoch = saved["step"], saved["epoch"]
    state.sample_offset = saved_offset(saved)
    state.samples_seen = saved.get("samples_seen", saved["step"] * saved["global_batch"])  # older: one B
    state.skipped_updates = saved.get("skipped_updates", 0)
    state.last_metric = saved.get("last_metric")
    if state.scaler is not None and saved.get("scaler"):  # amp continues at its scale
        state.scaler.load_state_dict(saved["scaler"])
    state.end_epoch_if_done()  # the new B may not fit in what is left of the epoch
    state.train_time_s = saved["train_time_s"]
    log.info("resumed from %s at step %d (epoch %d), saved by %d rank(s) at global batch %d%s", resume_from,
             state.step, state.epoch, saved["world_size"], saved["global_batch"],
             f", now {state.policy.global_batch}: the batch policy starts afresh" if moved else "")
    if saved["world_size"] == world and not moved:
        state.policy = BatchPolicy.from_state_dict(saved["policy"])
    # else the fresh policy of _setup stays: B / n (or the static capacities) for the new world
    # and batch, its statistics empty, since the old ranks' speeds say nothing about the new split
    rngs = saved["rng"]
    if rank < len(rngs):  # a rank continues its stream; a new rank gets its own seeded one
        set_rng_state(rngs[rank])
    else:
        seed = config.seed * 1_000_003 + saved["step"] * 1_009 + rank
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        random.seed(seed)
    return {"log_bytes": saved["log_bytes"]} if "log_bytes" in saved else {}  # not the whole checkpoint: memory


def resume_log(state: RankState, config: TrainConfig, rank: int, saved: dict | None) -> None:
    """Rank 0's log continues from where restore's checkpoint left it (`saved`): its files cut back
    to the checkpoint's lengths. Called once the resumed run is known to train on, so that a refused
    resume (check_work_left) leaves the folder as it was."""
    if rank != 0 or saved is None:
        return
    if "log_bytes" in saved:
        state.log = RunLog.resume(config.run_dir, saved["log_bytes"])
    else:  # a checkpoint of an older version: its rows, rewritten at the next checkpoint
        state.log = RunLog.read(config.run_dir)
        state.log.truncate(state.step - 1)
