"""Count the work of one training step per kernel: FLOPs with torch's own flop counter, bytes as
the sizes of each kernel's inputs and outputs, kernels as the dispatched operators that compute
(views and metadata operators launch nothing and are skipped).

The step runs on the `meta` device when the model allows it (shapes only, instant even for
BERT-large); otherwise on the CPU at the two small batch sizes. Two batch sizes give each kernel's
fixed and per-sample work (perf.work.linear_work).
"""

from collections.abc import Callable, Iterable, Mapping

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from thrifty.errors import WorkloadError
from thrifty.perf.work import KIND_CONV, KIND_MATMUL, KIND_OTHER, StepWork, linear_work
from thrifty.workloads.base import Workload, call_model, move_batch

aten = torch.ops.aten
MATMUL_OPS = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten._scaled_dot_product_efficient_attention,
              aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_cudnn_attention}
CONV_OPS = {aten.convolution, aten.convolution_backward, aten._convolution}
# Operators skipped as launching no kernel (views say so themselves; _unsafe_view is a view that
# does not, and operators outside the aten namespace, such as the profiler's record_function
# markers, run no device code). Copies and fills such as clone, copy_, fill_ and zeros_like are
# kept: they move bytes without FLOPs.
METADATA_OPS = {aten.detach, aten.detach_, aten.lift_fresh, aten.alias, aten._unsafe_view, aten.set_, aten.empty,
                aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided,
                aten.zeros, aten.ones, aten.full, aten.scalar_tensor, aten._local_scalar_dense}


def _tensor_bytes(tree) -> int:
    leaves, _ = tree_flatten(tree)
    return sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))


class KernelRecorder(TorchDispatchMode):
    """Records (operator, FLOPs, bytes read + written) for every dispatched operator that computes.

    FLOPs come from torch.utils.flop_counter's formulas (the registry FlopCounterMode uses)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[object, float, int]] = []
        self.forward = True  # the step function sets False once the loss is computed
        self.forward_output_bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        if getattr(func, "is_view", False) or packet in METADATA_OPS or func.namespace != "aten":
            return out
        formula = flop_registry.get(packet)
        flops = float(formula(*args, **kwargs, out_val=out)) if formula is not None else 0.0
        self.ops.append((func, flops, _tensor_bytes((args, kwargs)) + _tensor_bytes(out)))
        if self.forward:
            self.forward_output_bytes += _tensor_bytes(out)
        return out


class FusedDropout(TorchFunctionMode):
    """Training-mode dropout as the GPU runs it: one fused kernel (aten.native_dropout) writing the
    output and a 1-byte mask. On CPU and meta tensors torch decomposes it into bernoulli_, div_
    and mul (ATen's dropout takes the fused kernel only for CUDA-like devices), which would count
    three kernels and a 4-byte mask."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout:
            names = ("input", "p", "training", "inplace")
            bound = {**dict(zip(names, args)), **kwargs}
            p, training = bound.get("p", 0.5), bound.get("training", True)
            if training and 0.0 < p < 1.0:
                return torch.ops.aten.native_dropout(bound["input"], p, True)[0]
        return func(*args, **kwargs)


def _kind(func) -> int:
    packet = func.overloadpacket
    if packet in CONV_OPS:
        return KIND_CONV
    if packet in MATMUL_OPS:
        return KIND_MATMUL
    return KIND_OTHER


StepFn = Callable[[int, KernelRecorder | None], None]  # run_step(batch, recorder) marks the backward


def _count_once(run_step: StepFn, batch: int) -> tuple[list, np.ndarray, np.ndarray, int]:
    """Per-kernel (operators, FLOPs, bytes) and forward output bytes of one step at `batch`."""
    recorder = KernelRecorder()
    with FusedDropout(), recorder:
        run_step(batch, recorder)
    funcs = [op[0] for op in recorder.ops]
    return (funcs, np.array([op[1] for op in recorder.ops], float),
            np.array([op[2] for op in recorder.ops], float), recorder.forward_output_bytes)


def count_step(run_step: StepFn, *, param_count: int, gradient_bytes: float,
               state_bytes: Callable[[], float] = lambda: 0.0,
               batches: tuple[int, int] = (2, 4)) -> StepWork:
    """Count one training step at two local batch sizes and fit each kernel's linear work.

    `state_bytes()` is called after the steps: the bytes of tensors that persist across steps."""
    small, big = batches
    run_step(small, None)  # warm-up: optimizers create their state (e.g. momentum buffers) now
    funcs_a, flops_a, bytes_a, kept_a = _count_once(run_step, small)
    funcs_b, flops_b, bytes_b, kept_b = _count_once(run_step, big)
    if [f.overloadpacket for f in funcs_a] != [f.overloadpacket for f in funcs_b]:
        raise WorkloadError("the training step launches different kernels at different batch sizes; "
                            "cannot count its work per kernel")
    flops_fixed, flops_per_sample = linear_work(small, flops_a, big, flops_b)
    bytes_fixed, bytes_per_sample = linear_work(small, bytes_a, big, bytes_b)
    return StepWork(kind=np.array([_kind(f) for f in funcs_a], int), flops_fixed=flops_fixed,
                    flops_per_sample=flops_per_sample, bytes_fixed=bytes_fixed,
                    bytes_per_sample=bytes_per_sample, param_count=param_count,
                    gradient_bytes=float(gradient_bytes),
                    activation_bytes_per_sample=max(kept_b - kept_a, 0) / float(big - small),
                    state_bytes=float(state_bytes()))


def count_model_step(make_model: Callable[[], nn.Module],
                     make_batch: Callable[[int, torch.device], tuple],
                     loss_fn: Callable[..., torch.Tensor],
                     make_optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] | None,
                     *, device: str = "meta", batches: tuple[int, int] = (2, 4)) -> StepWork:
    """Work of forward + backward + optimizer step of a model on `device` (meta: shapes only).

    make_batch(b, device) returns (inputs, targets); inputs may be a tuple of model arguments or a
    mapping of keyword arguments (workloads.base.call_model)."""
    dev = torch.device(device)
    with dev:
        model = make_model()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(params) if make_optimizer is not None else None

    def run_step(b: int, recorder: KernelRecorder | None) -> None:
        inputs, targets = make_batch(b, dev)
        loss = loss_fn(call_model(model, inputs), targets)
        if recorder is not None:
            recorder.forward = False
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)

    def persistent_bytes() -> float:
        """Parameters, buffers, gradients and optimizer state (momentum, Adam moments)."""
        tensors = [*model.parameters(), *model.buffers(), *(p.grad for p in params if p.grad is not None)]
        if optimizer is not None:
            tensors += [v for state in optimizer.state.values() for v in state.values()
                        if isinstance(v, torch.Tensor)]
        return float(sum(t.numel() * t.element_size() for t in tensors))

    param_count = sum(p.numel() for p in params)
    gradient_bytes = sum(p.numel() * p.element_size() for p in params)
    return count_step(run_step, param_count=param_count, gradient_bytes=gradient_bytes,
                      state_bytes=persistent_bytes, batches=batches)


def count_workload(workload: Workload, *, batches: tuple[int, int] = (2, 4)) -> StepWork:
    """Counted step work of a workload: on `meta` if its model and loss allow it, else on the CPU."""
    def make_batch(b: int, device: torch.device) -> tuple:
        batch = move_batch(workload.batch(torch.arange(b) % workload.train_size), device)
        return (batch, batch) if isinstance(batch, Mapping) else tuple(batch)  # a mapping: model(**batch), loss_fn(out, batch)

    def make_optimizer(params):
        return workload.make_optimizer(params, workload.default_global_batch)

    errors = []
    for device in ("meta", "cpu"):
        try:
            return count_model_step(workload.make_model, make_batch, workload.loss_fn, make_optimizer,
                                    device=device, batches=batches)
        except (RuntimeError, NotImplementedError, TypeError, ValueError) as exc:
            errors.append(f"{device}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    raise WorkloadError(f"cannot count the work of {workload.name}'s training step ({'; '.join(errors)})")
