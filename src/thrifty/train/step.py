# SPDX-License-Identifier: MIT
"""The one training step: compute, gradient exchange, optimizer update, measured.

The profiler, the calibration run, `thrifty train` (BSP) and the ASP workers all call
`train_step`. Rank k computes the mean loss of its b_k samples scaled by n b_k / B
(train.aggregation), so the averaging all-reduce gives the global batch's gradient whatever the
split. Every rank's compute time, local batch and (if measured) local squared gradient norm ride
along in that one all-reduce, so each rank returns the same rows for every rank, and the batch
policy, fed the same times on every rank, decides the same next split without a collective.

With `measure_noise`, the rows carry the squared norms the gradient-noise-scale estimator needs
(thrifty.perf.noise): each rank's local mean gradient (small batch b_k) and the aggregated one
(big batch B). With one process the batch is split into two micro-batches and the first half's
gradient is the small one.

Under amp the loss is scaled by the dynamic loss scaler before backward and the update is its
`step` (skipped when the averaged gradients overflow: the row says so, and measures no noise);
the noise inputs are divided by the scale.

Each rank's loss rides along too, so a non-finite loss on any rank stops every rank at the same
step, before the update, with one message naming the rank and the step (`NonFiniteLoss`).
"""

import math
import resource
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.amp import GradScaler

from thrifty.errors import ThriftyError
from thrifty.records import StepRow
from thrifty.train.aggregation import allreduce_mean_gradients, flat_gradient, loss_scale
from thrifty.train.emulation import Slowdown
from thrifty.train.runtime import Runtime
from thrifty.train.split import SplitPolicy
from thrifty.workloads.base import Batch, Workload

# (model, extras) -> (flat averaged gradient or None, summed extras): the gradient exchange
Exchange = Callable[[nn.Module, torch.Tensor], tuple[torch.Tensor | None, torch.Tensor]]
_EXTRAS = 4  # per rank: compute time, local batch, local squared gradient norm, loss


class NonFiniteLoss(ThriftyError):
    """A rank's loss was NaN or infinite: the run stops (a learning rate too high, bad data)."""


def distributed() -> tuple[int, int]:
    """(rank, world size) of the default process group; (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def peak_memory_bytes(device: torch.device | None = None) -> int:
    if device is not None and device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return int(peak if sys.platform == "darwin" else peak * 1024)


def slice_batch(batch: Any, start: int, stop: int) -> Any:
    """Samples start..stop of a batch (tensors cut along their first dimension, others kept)."""
    if isinstance(batch, torch.Tensor):
        return batch[start:stop]
    if isinstance(batch, Mapping):
        return {key: slice_batch(value, start, stop) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        items = [slice_batch(item, start, stop) for item in batch]
        return tuple(items) if isinstance(batch, tuple) else items
    return batch


def _backward(loss: torch.Tensor, factor: float, scaler: GradScaler | None) -> None:
    (scaler.scale(loss * factor) if scaler is not None else loss * factor).backward()


def _compute(model: nn.Module, workload: Workload, batch: Batch, local_batch: int, scale: float,
             split: bool, runtime: Runtime, scaler: GradScaler | None) -> tuple[int, float, float]:
    """Forward (in the runtime's precision) and backward of this rank's samples; with `split`,
    two micro-batches whose first gradient is measured (McCandlish App. A). Returns (small batch,
    its squared gradient norm, the mean loss of the rank's samples). Gradients stay multiplied
    by the loss scaler's scale."""
    if not split:
        with runtime.autocast():
            loss = workload.loss(model, batch)
        _backward(loss, scale, scaler)
        return local_batch, float("nan"), float(loss.detach())
    half = local_batch // 2
    small_sq, loss_sum = float("nan"), 0.0
    for part, (begin, end) in enumerate(((0, half), (half, local_batch))):
        with runtime.autocast():
            loss = workload.loss(model, slice_batch(batch, begin, end))
        _backward(loss, scale * (end - begin) / local_batch, scaler)
        loss_sum += float(loss.detach()) * (end - begin)
        if part == 0:
            small_sq = float(flat_gradient(model).pow(2).sum()) / (scale * half / local_batch * _grad_scale(scaler)) ** 2
    return half, small_sq, loss_sum / local_batch


def _grad_scale(scaler: GradScaler | None) -> float:
    """What the gradients are multiplied by (the loss scaler's current scale; 1 without one)."""
    return 1.0 if scaler is None else float(scaler.get_scale())


def _update(optimizer: torch.optim.Optimizer, scaler: GradScaler | None) -> bool:
    """Apply the averaged gradients; True when the loss scaler skipped the update because they
    overflowed. Every rank holds the same averaged gradients, so every rank decides alike."""
    if scaler is None:
        optimizer.step()
        return False
    scale_before = scaler.get_scale()
    scaler.step(optimizer)  # unscales; skips the update when a gradient is inf or NaN
    scaler.update()  # halves the scale after an overflow (backoff), grows it after a quiet spell
    return scaler.get_scale() < scale_before


def _check_losses(losses: list[float], step: int) -> None:
    bad = [k for k, loss in enumerate(losses) if not math.isfinite(loss)]
    if bad:
        ranks = ", ".join(str(k) for k in bad)
        raise NonFiniteLoss(f"the loss is {losses[bad[0]]} on rank{'s' if len(bad) > 1 else ''} {ranks} "
                            f"at step {step}: training stopped before that step's update")


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer | None, workload: Workload,
               indices: torch.Tensor, global_batch: int, *, step: int = 0, epoch: int = 0,
               measure_noise: bool = False, slowdown: Slowdown | None = None, policy: SplitPolicy | None = None,
               exchange: Exchange | None = None, world: tuple[int, int] | None = None,
               runtime: Runtime = Runtime(), scaler: GradScaler | None = None,
               fetch: Callable[[torch.Tensor], Batch] | None = None) -> list[StepRow]:
    """Run one step on this rank's samples; every rank of the group calls it together.

    Returns one row per rank (as this rank saw the step). `slowdown` stretches compute on purpose
    (train.emulation); `policy` observes every rank's compute time after the update; `exchange`
    replaces the all-reduce (the ASP worker's push and pull, with `optimizer` None and
    `world` (0, 1): its gradient is its own batch's mean). `runtime` is the rank's device and
    precision, `scaler` amp's loss scaler; `fetch` gives the samples of `indices` on the device
    (a prefetching loader's; by default the workload's, moved there). Fetching is part of the
    compute time: a rank whose input pipeline lags is a slow rank. Times are read after the device's
    queued work is done, so they are compute times on a GPU too."""
    rank, size = world or distributed()
    local_batch = len(indices)
    if slowdown is not None:
        slowdown.before_step(step)
    start = runtime.clock()
    if optimizer is not None:
        optimizer.zero_grad(set_to_none=False)
    else:
        model.zero_grad(set_to_none=False)
    batch = fetch(indices) if fetch is not None else runtime.move(workload.batch(indices, runtime.device))
    scale = loss_scale(size, local_batch, global_batch)
    split = measure_noise and size == 1 and local_batch >= 2
    small_batch, small_sq, loss = _compute(model, workload, batch, local_batch, scale, split, runtime, scaler)
    if slowdown is not None:
        slowdown.after_compute(step, runtime.clock() - start)
    computed = runtime.clock()
    extras = torch.zeros(size, _EXTRAS, dtype=torch.float64)
    grad_scale = _grad_scale(scaler)
    own_sq = (float(flat_gradient(model).pow(2).sum()) / (scale * grad_scale) ** 2
              if measure_noise and size > 1 else small_sq)
    extras[rank] = torch.tensor([computed - start, local_batch, own_sq, loss], dtype=torch.float64)
    averaged, summed = (exchange or allreduce_mean_gradients)(model, extras.view(-1))
    everyone = summed.view(size, _EXTRAS).tolist()
    _check_losses([row[3] for row in everyone], step)
    synced = runtime.clock()
    skipped = _update(optimizer, scaler) if optimizer is not None else False
    updated = runtime.clock()
    computes = [row[0] for row in everyone]
    if policy is not None:
        policy.observe(step + 1, computes)
    done = time.perf_counter()

    big_sq = float("nan")
    if measure_noise and averaged is not None and (size > 1 or split) and not skipped:
        big_sq = float(averaged.pow(2).sum()) / grad_scale**2
    slowest = max(computes)
    collective = max(synced - computed - (slowest - computes[rank]), 0.0)
    factors = slowdown.schedule.at(step) if slowdown is not None and slowdown.schedule else (1.0,) * size
    memory = peak_memory_bytes(runtime.device)
    nan = float("nan")  # an overflowed step measures no gradient noise

    def small_sq_of(k: int) -> float:
        return nan if skipped else (everyone[k][2] if size > 1 else small_sq)

    return [StepRow(step=step, rank=k, num_workers=size, local_batch=int(everyone[k][1]),
                    global_batch=global_batch, epoch=epoch, slowdown=float(factors[k]),
                    compute_time_s=computes[k], wait_time_s=slowest - computes[k],
                    sync_time_s=slowest - computes[k] + collective, update_time_s=done - synced,
                    controller_time_s=done - updated, step_time_s=done - start,
                    samples_per_s=global_batch / (done - start), peak_memory_bytes=memory,
                    small_batch=small_batch if k == rank else int(everyone[k][1]),
                    small_grad_sq=small_sq_of(k),
                    big_batch=global_batch if size > 1 else local_batch, big_grad_sq=big_sq,
                    update_skipped=int(skipped))
            for k in range(size)]
