# SPDX-License-Identifier: MIT
"""The one training loop: step after step of `train_step` on a rank's state until a stop.

The profiler (a fixed split per setting), the calibration run (`train_to_target`), `thrifty
train` (BSP, with a batch policy, evaluation and checkpoints as hooks) and the ASP worker (its
own sample stream and a push/pull instead of the all-reduce) all run `run_steps`.
"""

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch.amp import GradScaler

from thrifty.perf.noise import noise_due
from thrifty.records import NOISE_FIELDS, RunLog, StepRow, TrainResult
from thrifty.train.batches import PrefetchingLoader
from thrifty.train.emulation import Slowdown
from thrifty.train.runtime import Runtime
from thrifty.train.sampler import GlobalBatchSampler
from thrifty.train.split import SplitPolicy
from thrifty.train.step import Exchange, distributed, train_step
from thrifty.workloads.base import Workload
from thrifty.workloads.schedules import Constant, LRSchedule


@dataclass
class FixedSplit:
    """A split that never changes (profiling, calibration): the batch-policy interface, inert."""

    split: list[int]
    adjustments: int = 0

    @property
    def global_batch(self) -> int:
        return sum(self.split)

    def observe(self, step: int, compute_times: Sequence[float]) -> bool:
        return False


@dataclass
class RankState:
    """What one rank carries from step to step (and what a checkpoint saves).

    The learning rate of every step is base_lrs (the workload's for the current global batch)
    times lr_schedule(samples_seen, total_samples), set before the step."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer | None
    policy: SplitPolicy
    sampler: GlobalBatchSampler | None  # None: the batches come from elsewhere (the ASP worker's stream)
    step: int = 0  # steps taken since the run began, whatever their global batch
    epoch: int = 0
    sample_offset: int = 0  # samples of this epoch's permutation used: the sampler's position
    train_time_s: float = 0.0
    log: RunLog = field(default_factory=RunLog)
    runtime: Runtime = field(default_factory=Runtime)
    scaler: GradScaler | None = None  # amp's loss scaler (its scale is checkpointed)
    lr_schedule: LRSchedule = field(default_factory=Constant)
    total_samples: float = 0.0  # the run's length in samples, the schedule's horizon
    samples_seen: int = 0  # since the run began, across epochs and moves: the schedule's position
    base_lrs: list[float] = field(default_factory=list)
    loader: PrefetchingLoader | None = None  # real data sets' prefetching workers (train.batches)
    skipped_updates: int = 0
    last_metric: float | None = None  # the newest evaluation's, on every rank (checkpointed)

    def batch_sampler(self) -> GlobalBatchSampler:
        if self.sampler is None:
            raise RuntimeError("this rank's batches come from a stream, not from a sampler")
        return self.sampler

    def own_optimizer(self) -> torch.optim.Optimizer:
        """The optimizer of a rank that updates its own model (every rank but an ASP worker's)."""
        if self.optimizer is None:
            raise RuntimeError("this rank's updates happen elsewhere (the ASP server)")
        return self.optimizer

    def indices(self, rank: int) -> torch.Tensor:
        """This rank's samples of the current global batch, cut by the current split."""
        return self.batch_sampler().offset_indices(rank, self.epoch, self.sample_offset, self.policy.split)

    def upcoming(self, rank: int, count: int) -> list[torch.Tensor]:
        """This rank's samples of the next `count` steps at the current split, within this epoch."""
        sampler = self.batch_sampler()
        batch, offsets = sampler.global_batch, []
        for k in range(count):
            offset = self.sample_offset + k * batch
            if sampler.epoch_done(offset):
                break
            offsets.append(offset)
        return [sampler.offset_indices(rank, self.epoch, o, self.policy.split) for o in offsets]

    def set_learning_rate(self) -> None:
        """base lr x the schedule's factor at this point of the run, in every param group."""
        if self.optimizer is None:
            return
        factor = self.lr_schedule(self.samples_seen, self.total_samples)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * factor

    def advance(self, step_time_s: float, skipped: bool = False) -> None:
        self.step += 1
        self.train_time_s += step_time_s
        self.skipped_updates += int(skipped)
        if self.sampler is not None:
            self.samples_seen += self.sampler.global_batch
            self.sample_offset += self.sampler.global_batch
            self.end_epoch_if_done()

    def end_epoch_if_done(self) -> None:
        """Start the next epoch when fewer than one global batch of this one is left unused."""
        if self.batch_sampler().epoch_done(self.sample_offset):
            self.epoch, self.sample_offset = self.epoch + 1, 0


def fresh_state(workload: Workload, split: list[int], *, seed: int = 0, policy: SplitPolicy | None = None,
                model: torch.nn.Module | None = None, runtime: Runtime = Runtime(),
                total_samples: float | None = None, loader: PrefetchingLoader | None = None) -> RankState:
    """Identical initial model on every rank (seeded), on the runtime's device, the workload's
    optimizer for B over its parameters there, a sampler. With `total_samples` (the run's
    length) the workload's learning-rate schedule applies; without, the rate stays constant
    (profiling and calibration measure at the workload's base rate)."""
    if model is None:
        torch.manual_seed(seed)
        model = workload.make_model()
    model = model.to(runtime.device)
    global_batch = sum(split)
    optimizer = workload.make_optimizer(model.parameters(), global_batch)
    return RankState(model, optimizer, policy if policy is not None else FixedSplit(list(split)),
                     GlobalBatchSampler(workload.train_size, split, seed=seed), runtime=runtime,
                     scaler=runtime.make_scaler(),
                     lr_schedule=workload.lr_schedule if total_samples is not None else Constant(),
                     total_samples=total_samples or 0.0, loader=loader,
                     base_lrs=[group["lr"] for group in optimizer.param_groups])


def run_steps(state: RankState, workload: Workload, *, steps: int = sys.maxsize,
              on_step: Callable[[list[StepRow]], bool] | None = None,
              measure_noise: Callable[[int], bool] = lambda step: False,
              slowdown: Slowdown | None = None, batches: Callable[[], torch.Tensor] | None = None,
              exchange: Exchange | None = None, world: tuple[int, int] | None = None) -> None:
    """Train until `state.step == steps` or `on_step(rows)` returns True.

    `batches` replaces the sampler (the ASP worker's stream), `exchange` the all-reduce."""
    rank, _ = world or distributed()
    while state.step < steps:
        indices = batches() if batches is not None else state.indices(rank)
        fetch = None
        if state.loader is not None and batches is None:
            fetch = lambda idx: state.loader.get(idx, lambda count: state.upcoming(rank, count))  # noqa: E731
        state.set_learning_rate()
        rows = train_step(state.model, state.optimizer, workload, indices, state.policy.global_batch,
                          step=state.step, epoch=state.epoch, measure_noise=measure_noise(state.step),
                          slowdown=slowdown, policy=state.policy, exchange=exchange, world=world,
                          runtime=state.runtime, scaler=state.scaler, fetch=fetch)
        state.advance(rows[rank].step_time_s, skipped=bool(rows[rank].update_skipped))
        if on_step is not None and on_step(rows):
            break


def train_to_target(workload: Workload, local_batches: list[int], *, max_steps: int = 5000,
                    eval_every: int | None = None, seed: int = 0, target: float | None = None,
                    on_eval=None, noise_every: int = 8) -> TrainResult:
    """Train until `target` (default: the workload's) is reached or max_steps; this process is
    rank r of len(local_batches) (the calibration run for statistical efficiency).

    Every rank evaluates the same (synchronised) model, so all ranks stop at the same step.
    With one rank the noise scale is measured every `noise_every` steps (a micro-batch split that
    leaves the update unchanged); a calibration run uses 1, for the most measurements."""
    target = workload.target_metric if target is None else target
    rank, _ = distributed()
    state = fresh_state(workload, list(local_batches), seed=seed)
    eval_every = eval_every or max(1, state.batch_sampler().steps_per_epoch // 4)
    result = TrainResult(global_batch=sum(local_batches), steps=0, reached_target=False,
                         final_metric=float("nan"), wall_time_s=0.0)

    def on_step(rows: list[StepRow]) -> bool:
        if rows[rank].has_noise:
            for key in NOISE_FIELDS:
                result.noise[key].append(float(getattr(rows[rank], key)))
        if state.step % eval_every and state.step != max_steps:
            return False
        metric = workload.evaluate(state.model, workload.eval_data)
        result.metric_history.append((state.step, metric))
        result.steps, result.final_metric = state.step, metric
        if on_eval is not None:
            on_eval(state.step, metric)
        result.reached_target = workload.reached(metric, target)
        return result.reached_target

    start = time.perf_counter()
    run_steps(state, workload, steps=max_steps, on_step=on_step,
              measure_noise=lambda step: noise_due(step + 1, len(local_batches), noise_every))
    result.wall_time_s = time.perf_counter() - start
    return result
