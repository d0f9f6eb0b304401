"""Checkpoints of a training run: rank 0 writes model, optimizer, batch policy (the controller's
state), sampler position and every rank's RNG state into one checksummed file
(thrifty.checkpoint_file: temp name, fsync, rename), together with the run's CSV log; `restore`
puts a rank back exactly where the checkpoint was taken."""

import random

import numpy as np
import torch
import torch.distributed as dist

from thrifty.checkpoint_file import CheckpointError, load_state, save_state
from thrifty.records import RunLog
from thrifty.train.config import TrainConfig
from thrifty.train.loop import RankState
from thrifty.train.policies import BatchPolicy

CHECKPOINT_NAME = "checkpoint.pt"
CHECKPOINT_FORMAT = "thrifty.train/1"


def rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def save_checkpoint(state: RankState, config: TrainConfig, rank: int, world: int) -> None:
    """Every rank calls it (the RNG states are gathered); rank 0 writes."""
    rngs = [None] * world
    if world > 1:
        dist.all_gather_object(rngs, rng_state())
    else:
        rngs = [rng_state()]
    if rank != 0:
        return
    state.log.write(config.run_dir)  # first: a kill between the two leaves the log ahead, never behind
    save_state(config.run_dir / CHECKPOINT_NAME, {
        "format": CHECKPOINT_FORMAT, "world_size": world, "global_batch": state.policy.global_batch,
        "model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
        "policy": state.policy.state_dict(), "step": state.step, "epoch": state.epoch,
        "step_in_epoch": state.step_in_epoch, "train_time_s": state.train_time_s, "rng": rngs})


def restore(state: RankState, config: TrainConfig, rank: int, world: int) -> None:
    """Continue from the run directory's checkpoint: same world size and global batch only."""
    saved = load_state(config.run_dir / CHECKPOINT_NAME)
    if saved.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{config.run_dir / CHECKPOINT_NAME} is not a thrifty train checkpoint")
    global_batch = state.policy.global_batch
    if saved["world_size"] != world or saved["global_batch"] != global_batch:
        raise CheckpointError(f"the checkpoint is for {saved['world_size']} workers and global batch "
                              f"{saved['global_batch']}, this run has {world} and {global_batch}")
    state.model.load_state_dict(saved["model"])
    state.optimizer.load_state_dict(saved["optimizer"])
    state.policy = BatchPolicy.from_state_dict(saved["policy"])
    state.step, state.epoch, state.step_in_epoch = saved["step"], saved["epoch"], saved["step_in_epoch"]
    state.train_time_s = saved["train_time_s"]
    set_rng_state(saved["rng"][rank])
    if rank == 0:
        state.log = RunLog.read(config.run_dir)
        state.log.truncate(state.step - 1)
