"""Synchronous data-parallel training that keeps unequal workers equally busy (`thrifty train`).

Each step, rank k computes the loss of its b_k samples scaled by n b_k / B (exact global-batch
gradient, train.aggregation), optionally slowed down on purpose (train.emulation), then one
all-reduce carries the gradients and, riding along, every rank's compute time and loss. Every rank
feeds the same times to the same deterministic policy (train.policies), so all reach the same new
split without another collective; the sampler then cuts the next global batch by that split, in
place, with no restart of the process group.

Runs as local processes (`run_training`, via train.launcher) or one rank per process under
torchrun (`train_rank` with the environment's rank and world size).
"""

import math
import os
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from thrifty.checkpoint_file import CheckpointError, load_state, save_state
from thrifty.errors import ThriftyError
from thrifty.train.aggregation import allreduce_mean_gradients, loss_scale
from thrifty.train.emulation import Slowdown, remove_cgroups
from thrifty.train.hetero import SlowdownSchedule
from thrifty.train.launcher import run_local_workers
from thrifty.train.metrics import EvalRow, RunLog, StepRow, plot_run, summarise, write_summary
from thrifty.train.policies import BatchPolicy, ControllerSettings, make_policy
from thrifty.train.probe import probe_b_max
from thrifty.train.sampler import GlobalBatchSampler
from thrifty.train.split import even_split
from thrifty.train.syncbn import convert_sync_batchnorm, has_batchnorm
from thrifty.workloads import DEFAULT_WORKLOAD, load_workload

CHECKPOINT_NAME = "checkpoint.pt"
CHECKPOINT_FORMAT = "thrifty.train/1"


@dataclass(frozen=True)
class TrainConfig:
    """One training run. `steps` wins over `epochs`; `global_batch` None = the workload's default."""

    workload: str = DEFAULT_WORKLOAD
    workers: int = 2
    global_batch: int | None = None
    policy: str = "dynamic"
    steps: int | None = None
    epochs: float | None = 10.0
    slowdown: SlowdownSchedule | None = None
    emulate: str = "sleep"
    capacities: tuple[float, ...] | None = None
    b_min: int = 1
    b_max: int | None = None  # same limit for every rank; None = probe by `b_max_rule`
    b_max_rule: str = "memory"
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    eval_every: int | None = None  # steps; None = four times per epoch
    until_target: bool = False
    target: float | None = None
    checkpoint_every: int = 50  # steps; 0 = only at the end
    run_dir: Path = Path(".thrifty/runs/train")
    resume: bool = False
    sync_bn: bool = True
    seed: int = 0
    progress: bool = True
    timeout_s: float = 3600.0


@dataclass
class _RankState:
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    policy: BatchPolicy
    sampler: GlobalBatchSampler
    step: int = 0
    epoch: int = 0
    step_in_epoch: int = 0
    train_time_s: float = 0.0
    log: RunLog = field(default_factory=RunLog)


def total_steps(config: TrainConfig, train_size: int, global_batch: int) -> int:
    if config.steps is not None:
        return config.steps
    return max(1, math.ceil((config.epochs or 1.0) * (train_size // global_batch)))


def _exchange(values: list[float], rank: int, world: int) -> list[list[float]]:
    """Every rank's `values` on every rank (a SUM all-reduce of slots, cheap and order-free)."""
    buffer = torch.zeros(world, len(values), dtype=torch.float64)
    buffer[rank] = torch.tensor(values, dtype=torch.float64)
    if world > 1:
        dist.all_reduce(buffer)
    return buffer.tolist()


def _rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def _setup(config: TrainConfig, rank: int, world: int, workload) -> _RankState:
    global_batch = config.global_batch or workload.default_global_batch
    torch.manual_seed(config.seed)  # identical initial model on every rank
    model = workload.make_model()
    if config.b_max is not None:
        limits = [config.b_max] * world
    else:  # probe the plain model: each rank alone, before any layer needs its peers
        mine = probe_b_max(model, workload, rule=config.b_max_rule, limit=global_batch,
                           ranks_on_machine=int(os.environ.get("LOCAL_WORLD_SIZE", world)))
        limits = [int(row[0]) for row in _exchange([float(mine)], rank, world)]
    if config.sync_bn and has_batchnorm(model):
        model = convert_sync_batchnorm(model)
    optimizer = workload.make_optimizer(model.parameters(), global_batch)
    sampler = GlobalBatchSampler(workload.train_size, even_split(global_batch, world), seed=config.seed)
    policy = make_policy(config.policy, global_batch, world, b_min=config.b_min, b_max=limits,
                         capacities=config.capacities, settings=config.controller)
    state = _RankState(model, optimizer, policy, sampler)
    if config.resume:
        _restore(state, config, rank, world, global_batch)
    return state


def _restore(state: _RankState, config: TrainConfig, rank: int, world: int, global_batch: int) -> None:
    saved = load_state(config.run_dir / CHECKPOINT_NAME)
    if saved.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{config.run_dir / CHECKPOINT_NAME} is not a thrifty train checkpoint")
    if saved["world_size"] != world or saved["global_batch"] != global_batch:
        raise CheckpointError(f"the checkpoint is for {saved['world_size']} workers and global batch "
                              f"{saved['global_batch']}, this run has {world} and {global_batch}")
    state.model.load_state_dict(saved["model"])
    state.optimizer.load_state_dict(saved["optimizer"])
    state.policy = BatchPolicy.from_state_dict(saved["policy"])
    state.step, state.epoch, state.step_in_epoch = saved["step"], saved["epoch"], saved["step_in_epoch"]
    state.train_time_s = saved["train_time_s"]
    _set_rng_state(saved["rng"][rank])
    if rank == 0:
        state.log = RunLog.read(config.run_dir)
        state.log.truncate(state.step - 1)


def _checkpoint(state: _RankState, config: TrainConfig, rank: int, world: int, global_batch: int) -> None:
    rngs = [None] * world
    if world > 1:
        dist.all_gather_object(rngs, _rng_state())
    else:
        rngs = [_rng_state()]
    if rank != 0:
        return
    save_state(config.run_dir / CHECKPOINT_NAME, {
        "format": CHECKPOINT_FORMAT, "world_size": world, "global_batch": global_batch,
        "model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
        "policy": state.policy.state_dict(), "step": state.step, "epoch": state.epoch,
        "step_in_epoch": state.step_in_epoch, "train_time_s": state.train_time_s, "rng": rngs})
    state.log.write(config.run_dir)


def _train_step(state: _RankState, workload, slowdown: Slowdown, rank: int, world: int,
                global_batch: int) -> list[StepRow]:
    policy, split = state.policy, list(state.policy.split)
    slowdown.before_step(state.step)
    indices = state.sampler.split_indices(rank, state.epoch, state.step_in_epoch, split)
    start = time.perf_counter()
    state.optimizer.zero_grad(set_to_none=False)
    inputs, targets = workload.batch(indices)
    loss = workload.loss_fn(state.model(inputs), targets)
    (loss * loss_scale(world, len(indices), global_batch)).backward()
    slowdown.after_compute(state.step, time.perf_counter() - start)
    compute = time.perf_counter() - start
    extras = torch.zeros(world, dtype=torch.float64)
    extras[rank] = compute
    _, summed = allreduce_mean_gradients(state.model, extras)
    synced = time.perf_counter()
    state.optimizer.step()
    computes = summed.tolist() if summed is not None else [compute]
    before = time.perf_counter()
    policy.observe(state.step + 1, computes)
    done = time.perf_counter()
    step_s, controller_s = done - start, done - before
    slowest = max(computes)
    allreduce_s = max(synced - start - slowest, 0.0)  # the collective after the last arrival
    factors = slowdown.schedule.at(state.step) if slowdown.schedule else (1.0,) * world
    return [StepRow(step=state.step, rank=k, epoch=state.epoch, local_batch=split[k],
                    slowdown=float(factors[k]), compute_s=computes[k], wait_s=slowest - computes[k],
                    allreduce_s=allreduce_s, update_s=done - synced, controller_s=controller_s, step_s=step_s,
                    samples_per_s=split[k] / computes[k]) for k in range(world)]


def _advance(state: _RankState) -> None:
    state.step += 1
    state.step_in_epoch += 1
    if state.step_in_epoch == state.sampler.steps_per_epoch:
        state.epoch, state.step_in_epoch = state.epoch + 1, 0


def _evaluate(state: _RankState, workload, rank: int, world: int) -> float:
    """Rank 0 evaluates; the metric reaches every rank so all stop at the same step."""
    metric = workload.evaluate(state.model, workload.eval_data) if rank == 0 else 0.0
    if world > 1:
        shared = torch.tensor([metric], dtype=torch.float64)
        dist.broadcast(shared, src=0)
        metric = float(shared[0])
    return metric


def train_rank(rank: int, world_size: int, config: TrainConfig) -> dict:
    """The body of one rank; rank 0 writes the run directory and returns the summary."""
    workload = load_workload(config.workload)
    state = _setup(config, rank, world_size, workload)
    global_batch = state.policy.global_batch
    target = workload.target_metric if config.target is None else config.target
    steps = total_steps(config, workload.train_size, global_batch)
    eval_every = config.eval_every or max(1, state.sampler.steps_per_epoch // 4)
    slowdown = Slowdown(config.slowdown, rank, config.emulate, tag=os.environ.get("THRIFTY_RUN_TAG"))
    progress = _Progress(config, steps, state.step) if rank == 0 and config.progress else None
    wall_start = time.perf_counter()
    try:
        while state.step < steps:
            rows = _train_step(state, workload, slowdown, rank, world_size, global_batch)
            state.train_time_s += rows[0].step_s
            if rank == 0:
                state.log.steps.extend(rows)
            _advance(state)
            if progress:
                progress.update(state, rows)
            last = state.step == steps
            if state.step % eval_every == 0 or last:
                metric = _evaluate(state, workload, rank, world_size)
                state.log.evals.append(EvalRow(state.step - 1, state.train_time_s, metric))
                if config.until_target and metric >= target:
                    last = True
            if last or (config.checkpoint_every and state.step % config.checkpoint_every == 0):
                _checkpoint(state, config, rank, world_size, global_batch)
            if last:
                break
    finally:
        slowdown.close()
        if progress:
            progress.close()
    if rank != 0:
        return {}
    summary = summarise(state.log, world_size=world_size, global_batch=global_batch,
                        split=state.policy.split, adjustments=state.policy.adjustments, target=target,
                        wall_time_s=time.perf_counter() - wall_start, policy=config.policy,
                        workload=workload.name, metric_name=workload.metric_name)
    summary["run_dir"] = str(config.run_dir)
    write_summary(config.run_dir, summary)
    plot_run(config.run_dir, state.log, f"{workload.name}, {world_size} workers, policy {config.policy}")
    return summary


class _Progress:
    """Rank 0's live bar: steps done, throughput and the current split."""

    def __init__(self, config: TrainConfig, steps: int, done: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        self.bar = Progress(TextColumn("[bold]train[/]"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                            TextColumn("{task.fields[rate]}"), TextColumn("split {task.fields[split]}"),
                            TimeElapsedColumn(), console=Console(stderr=True), transient=False)
        self.task = self.bar.add_task("train", total=steps, completed=done, rate="", split="")
        self.bar.start()

    def update(self, state: _RankState, rows: list[StepRow]) -> None:
        rate = sum(r.local_batch for r in rows) / rows[0].step_s
        self.bar.update(self.task, completed=state.step, rate=f"{rate:,.0f} samples/s",
                        split=",".join(map(str, state.policy.split)))

    def close(self) -> None:
        self.bar.stop()


def check_config(config: TrainConfig, max_workers: int) -> TrainConfig:
    """Validate what can be checked before any process starts; fill in the global batch."""
    from thrifty.train.split import check_split_bounds
    if not 1 <= config.workers <= max_workers:
        raise ThriftyError(f"--nproc {config.workers} is outside 1..{max_workers} allowed on this machine")
    workload = load_workload(config.workload)
    global_batch = config.global_batch or workload.default_global_batch
    if global_batch > workload.train_size:
        raise ThriftyError(f"global batch {global_batch} exceeds the training set ({workload.train_size})")
    limits = [config.b_max or global_batch] * config.workers
    check_split_bounds(global_batch, config.workers, config.b_min, limits)
    if config.steps is not None and config.steps < 1:
        raise ThriftyError(f"--steps must be at least 1, got {config.steps}")
    if config.steps is None and config.epochs is not None and not config.epochs > 0:
        raise ThriftyError(f"--epochs must be positive, got {config.epochs}")
    if config.slowdown is not None:
        config.slowdown.check_workers(config.workers)
    if config.resume:
        load_state(config.run_dir / CHECKPOINT_NAME)  # missing or corrupt: fail before starting
    return replace(config, global_batch=global_batch)


def run_training(config: TrainConfig, *, max_workers: int = 8) -> dict:
    """Train on `config.workers` local processes; returns rank 0's summary."""
    config = check_config(config, max_workers)
    config.run_dir.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    os.environ["THRIFTY_RUN_TAG"] = tag
    try:
        results = run_local_workers(train_rank, config.workers, timeout_s=config.timeout_s, config=config)
    finally:
        if config.slowdown is not None and config.emulate == "cgroup":
            remove_cgroups(tag)
    return results[0]

