# SPDX-License-Identifier: MIT
"""Batch normalisation over the whole global batch when ranks hold unequal local batches.

Plain BatchNorm normalises each rank's b_k samples by their own statistics, so with a dynamic split
the slow rank's few samples get noisier statistics and the result depends on the split. Here every
rank all-reduces (count, sum, sum of squares) per channel, so the statistics are those of all
B = sum b_k samples, weighted by count, and training is split-independent. torch's SyncBatchNorm
does the same but only on GPUs; this one runs on CPU with gloo too. Backward is the standard
synchronised form (Ioffe & Szegedy 2015, eq. for dL/dx, with global sums):
  dx = w * invstd * (dy - sum(dy)/N - xhat * sum(dy * xhat)/N)
while dw, db stay local sums (the gradient all-reduce adds them up).
"""

import torch
import torch.distributed as dist
from torch import nn


def _group_active(group) -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps, group):
        channels = x.shape[1]
        dims = [d for d in range(x.dim()) if d != 1]
        x64 = x.double()
        stats = torch.cat([torch.tensor([x.numel() / channels], dtype=torch.float64, device=x.device),
                           x64.sum(dims), (x64 * x64).sum(dims)])
        dist.all_reduce(stats, group=group)
        count = stats[0]
        mean = stats[1:channels + 1] / count
        var = (stats[channels + 1:] / count - mean * mean).clamp_min(0.0)
        invstd = torch.rsqrt(var + eps)
        shape = [1, channels] + [1] * (x.dim() - 2)
        xhat = ((x64 - mean.view(shape)) * invstd.view(shape)).to(x.dtype)
        y = xhat * weight.view(shape) + bias.view(shape)
        ctx.save_for_backward(xhat, weight, invstd.to(x.dtype))
        ctx.count, ctx.group, ctx.dims, ctx.shape = float(count), group, dims, shape
        mean, var = mean.to(x.dtype), var.to(x.dtype)
        ctx.mark_non_differentiable(mean, var, count)
        return y, mean, var, count

    @staticmethod
    def backward(ctx, grad_y, _mean, _var, _count):
        xhat, weight, invstd = ctx.saved_tensors
        sum_dy = grad_y.sum(ctx.dims)
        sum_dy_xhat = (grad_y * xhat).sum(ctx.dims)
        both = torch.cat([sum_dy, sum_dy_xhat]).double()
        dist.all_reduce(both, group=ctx.group)
        channels = sum_dy.numel()
        mean_dy = (both[:channels] / ctx.count).to(grad_y.dtype).view(ctx.shape)
        mean_dy_xhat = (both[channels:] / ctx.count).to(grad_y.dtype).view(ctx.shape)
        grad_x = (weight.view(ctx.shape) * invstd.view(ctx.shape)
                  * (grad_y - mean_dy - xhat * mean_dy_xhat))
        return grad_x, sum_dy_xhat, sum_dy, None, None


class CountWeightedSyncBatchNorm(nn.modules.batchnorm._BatchNorm):
    """BatchNorm{1,2,3}d whose training statistics cover the global batch of all ranks."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if not (self.training and _group_active(self.process_group)):
            return super().forward(x)
        if not self.affine:
            raise ValueError("CountWeightedSyncBatchNorm needs affine=True in training")
        y, mean, var, count = _SyncBatchNormFunction.apply(x, self.weight, self.bias, self.eps,
                                                           self.process_group)
        tracked, running_mean, running_var = self.num_batches_tracked, self.running_mean, self.running_var
        if tracked is not None and running_mean is not None and running_var is not None:  # track_running_stats
            with torch.no_grad():
                tracked.add_(1)
                momentum = 1.0 / float(tracked) if self.momentum is None else self.momentum
                unbiased = var * (count / max(count - 1.0, 1.0))  # running_var is unbiased
                running_mean.mul_(1 - momentum).add_(momentum * mean)
                running_var.mul_(1 - momentum).add_(momentum * unbiased)
        return y


def convert_sync_batchnorm(module: nn.Module, process_group=None) -> nn.Module:
    """Replace every BatchNorm layer of `module` by a CountWeightedSyncBatchNorm (state kept)."""
    if isinstance(module, nn.modules.batchnorm._BatchNorm) and not isinstance(module, CountWeightedSyncBatchNorm):
        sync = CountWeightedSyncBatchNorm(module.num_features, module.eps, module.momentum,
                                          module.affine, module.track_running_stats, process_group)
        sync.load_state_dict(module.state_dict())
        sync.train(module.training)
        return sync
    for name, child in module.named_children():
        module.add_module(name, convert_sync_batchnorm(child, process_group))
    return module


def has_batchnorm(module: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())

