"""One measured data-parallel training step: compute, gradient all-reduce, optimizer update.

With `measure_noise`, the step also returns the squared norms the gradient-noise-scale estimator
needs (thrifty.perf.noise): each rank's local mean gradient (small batch b_k) and the aggregated
one (big batch B). With a single process the batch is split into two micro-batches and the first
half's gradient is the small one.
"""

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from thrifty.train.aggregation import allreduce_mean_gradients, flat_gradient, loss_scale
from thrifty.workloads.base import Workload


@dataclass(frozen=True)
class StepRecord:
    """Timings in seconds of one step on one rank, and the noise-scale inputs (NaN if unmeasured)."""

    compute_time_s: float
    sync_time_s: float
    step_time_s: float
    loss: float
    small_batch: int
    small_grad_sq: float
    big_batch: int
    big_grad_sq: float


def noise_due(step: int, world_size: int, every_single_process: int = 8) -> bool:
    """Whether to measure the noise scale at this step: always with several ranks (two squared
    norms, nearly free), every `every_single_process`-th step with one (micro-batch split)."""
    return world_size > 1 or step % every_single_process == 0


def _distributed() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, workload: Workload,
               local_indices: torch.Tensor, global_batch: int, *, measure_noise: bool = True) -> StepRecord:
    """Run one step on this rank's samples; every rank of the group must call it together.

    With one process, measuring noise splits the batch in two micro-batches, which costs time:
    callers measure it only on some steps (see `noise_due`)."""
    rank, world = _distributed()
    local_batch = len(local_indices)
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=False)
    scale = loss_scale(world, local_batch, global_batch)
    split = measure_noise and world == 1 and local_batch >= 2
    small_batch, small_sq = local_batch, float("nan")
    if split:  # single process: the first micro-batch is the "small" batch (McCandlish App. A)
        half = local_batch // 2
        for part, idx in enumerate((local_indices[:half], local_indices[half:])):
            inputs, targets = workload.batch(idx)
            loss = workload.loss_fn(model(inputs), targets)
            (loss * (len(idx) / local_batch)).backward()
            if part == 0:
                small_batch = half
                small_sq = float(flat_gradient(model).pow(2).sum()) / (half / local_batch) ** 2
                total_loss = float(loss.detach()) * len(idx)
            else:
                total_loss += float(loss.detach()) * len(idx)
        loss_value = total_loss / local_batch
    else:
        inputs, targets = workload.batch(local_indices)
        loss = workload.loss_fn(model(inputs), targets)
        (loss * scale).backward()
        loss_value = float(loss.detach())
    computed = time.perf_counter()

    extras = None
    if measure_noise and world > 1:
        extras = torch.zeros(world, dtype=torch.float64)
        extras[rank] = float(flat_gradient(model).pow(2).sum()) / scale**2
    averaged, summed = allreduce_mean_gradients(model, extras)
    synced = time.perf_counter()
    optimizer.step()
    done = time.perf_counter()

    if summed is not None:
        small_sq = float(summed[rank])
    big_sq = float(averaged.pow(2).sum()) if measure_noise else float("nan")
    big_batch = global_batch if world > 1 else local_batch
    if measure_noise and world == 1 and not split:
        big_sq = float("nan")
    return StepRecord(compute_time_s=computed - start, sync_time_s=synced - computed,
                      step_time_s=done - start, loss=loss_value, small_batch=small_batch,
                      small_grad_sq=small_sq, big_batch=big_batch, big_grad_sq=big_sq)
