# SPDX-License-Identifier: MIT
"""Exact weighted gradient aggregation for unequal local batches.

Rank k computes the mean loss over its b_k samples and scales it by n * b_k / B before the
averaging all-reduce (sum / n). The result is sum_k (b_k / B) g_k: the mean gradient over the whole
global batch B = sum b_k, exactly as one process would compute it (docs/design.md, "Weighted
aggregation"; OmniLearn, Tyagi & Sharma 2025).
"""

from typing import overload

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def loss_scale(world_size: int, local_batch: int, global_batch: int) -> float:
    """Factor for rank k's mean loss so that averaging gradients gives the global-batch mean."""
    return world_size * local_batch / global_batch


def gradients(model: nn.Module) -> list[torch.Tensor]:
    """The gradient tensors of all trainable parameters (zeros where backward left none)."""
    grads = []
    for p in model.parameters():
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
    return grads


def flat_gradient(model: nn.Module) -> torch.Tensor:
    return _flatten_dense_tensors(gradients(model))


@overload
def allreduce_mean_gradients(model: nn.Module, extras: torch.Tensor,
                             group: dist.ProcessGroup | None = None) -> tuple[torch.Tensor, torch.Tensor]: ...
@overload
def allreduce_mean_gradients(model: nn.Module, extras: None = None,
                             group: dist.ProcessGroup | None = None) -> tuple[torch.Tensor, None]: ...
def allreduce_mean_gradients(model: nn.Module, extras: torch.Tensor | None = None,
                             group: dist.ProcessGroup | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Average gradients over ranks in one collective; `extras` ride along and are summed.

    Returns the flat averaged gradient and the summed extras. With one process (no process group)
    the gradient is returned unchanged.
    """
    grads = gradients(model)
    flat = _flatten_dense_tensors(grads)
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return flat, extras
    world = dist.get_world_size(group)
    buffer = flat if extras is None else torch.cat([flat, extras.to(device=flat.device, dtype=flat.dtype)])
    dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=group)
    averaged = buffer[: flat.numel()] / world
    for grad, synced in zip(grads, _unflatten_dense_tensors(averaged, grads), strict=True):
        grad.copy_(synced)
    return averaged, (None if extras is None else buffer[flat.numel():])
