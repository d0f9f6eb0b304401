# SPDX-License-Identifier: MIT
"""Count the work of one training step per kernel: FLOPs with torch's own flop counter, bytes as
the sizes of each kernel's inputs and outputs, the elements each kernel writes (its parallel work),
kernels as the dispatched operators that compute (views and metadata operators launch nothing and
are skipped). Embedding lookups and their backward are counted as the GPU runs them
(perf.embedding_traffic), not as the sizes of their arguments, and recurrent layers (nn.GRU,
nn.LSTM) as cuDNN runs them (perf.rnn_kernels), not as their per-time-step decomposition. Activations are the tensors autograd
saves for the backward pass (torch.autograd.graph.saved_tensors_hooks), parameters excluded.

The step runs on the `meta` device when the model allows it (shapes only, instant even for
BERT-large); otherwise on the CPU at the two small batch sizes. Two batch sizes give each kernel's
fixed and per-sample work (perf.work.linear_work).
"""

from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from functools import partial

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import conv_flop_count, flop_registry

from thrifty.errors import WorkloadError
from thrifty.perf.embedding_traffic import dense_backward_kernels, gather_kernel
from thrifty.perf.rnn_kernels import GATES, cell_kernels, rnn_kernels
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


def _tensor_elements(tree) -> int:
    leaves, _ = tree_flatten(tree)
    return sum(t.numel() for t in leaves if isinstance(t, torch.Tensor))


def _parallel_work(kind: int, args, out) -> int:
    """Elements a kernel's thread blocks are spread over: a matmul's or convolution's outputs (one
    tile of outputs per block); for every other kernel the larger of its outputs and its first
    argument (a reduction is spread over its input; an in-place foreach update returns nothing but
    writes its first argument's tensors)."""
    if kind != KIND_OTHER:
        return _tensor_elements(out)
    return max(_tensor_elements(out), _tensor_elements(args[0]) if args else 0)


def _embedding_kernels(func, args, out) -> list[tuple[float, float]] | None:
    """(bytes, output elements) of the kernels an embedding operator runs on a GPU, or None."""
    packet = func.overloadpacket
    if packet is aten.embedding:
        weight, indices = args[0], args[1]
        return [gather_kernel(indices.numel(), weight.shape[-1], weight.element_size())]
    if packet is aten.embedding_dense_backward:
        grad, indices, num_weights = args[0], args[1], int(args[2])
        return dense_backward_kernels(indices.numel(), num_weights, grad.shape[-1], grad.element_size())
    return None


def _flops(func, args, kwargs, out) -> float:
    """FLOPs of one operator by torch.utils.flop_counter's formulas, except a grouped (depthwise)
    convolution's backward, whose torch formula ignores the groups (torch 2.13 conv_backward_flop
    takes `_groups` and drops it: a depthwise backward counted as a dense one, 256x too much at 256
    channels). Each input or weight gradient of a convolution costs what its forward does
    (grad_input is a transposed convolution over the same weights, grad_weight a correlation of the
    input with grad_output), and the forward formula reads the groups from the weight's shape."""
    packet = func.overloadpacket
    if packet is aten.convolution_backward and int(args[9]) != 1:
        grad_out, x, weight, transposed, output_mask = args[0], args[1], args[2], bool(args[7]), args[10]
        forward = conv_flop_count(list(x.shape), list(weight.shape), list(grad_out.shape), transposed)
        return float(forward * (int(output_mask[0]) + int(output_mask[1])))
    formula = flop_registry.get(packet)
    return float(formula(*args, **kwargs, out_val=out)) if formula is not None else 0.0


class KernelRecorder(TorchDispatchMode):
    """Records (name, kind, FLOPs, bytes read + written, elements written) for every dispatched
    operator that computes; an embedding operator may stand for several GPU kernels, and a
    recurrent layer's kernels are added by CudnnRNN while the recorder is paused.

    FLOPs come from torch.utils.flop_counter's formulas (the registry FlopCounterMode uses)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, int, float, float, float]] = []
        self.activation_bytes = 0.0  # the step function sets it: bytes saved for the backward pass
        self.paused = False

    @contextmanager
    def pause(self):
        """Record nothing inside (the kernels of the block are added another way)."""
        before, self.paused = self.paused, True
        try:
            yield
        finally:
            self.paused = before

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        if self.paused or getattr(func, "is_view", False) or packet in METADATA_OPS or func.namespace != "aten":
            return out
        flops, kind = _flops(func, args, kwargs, out), _kind(func, args)
        kernels = _embedding_kernels(func, args, out)
        if kernels is None:
            kernels = [(_tensor_bytes((args, kwargs)) + _tensor_bytes(out), _parallel_work(kind, args, out))]
        for k, (nbytes, outputs) in enumerate(kernels):
            self.ops.append((str(packet), kind, flops if k == 0 else 0.0, float(nbytes), float(outputs)))
        return out


class _CountedBlock(torch.autograd.Function):
    """A block (a recurrent layer or cell) run op by op with the recorder paused (shapes and
    gradients exact), its forward and backward recorded as the kernels a GPU runs for it."""

    @staticmethod
    def forward(ctx, recorder, run, kernels, *tensors):
        inner = [t.detach().requires_grad_(t.requires_grad) for t in tensors]
        with torch.enable_grad(), recorder.pause():
            out = run(*inner)
        out = out if isinstance(out, tuple) else (out,)
        recorder.ops += kernels(backward=False)
        ctx.recorder, ctx.kernels, ctx.inner, ctx.out = recorder, kernels, inner, out
        return tuple(o.detach() for o in out)

    @staticmethod
    def backward(ctx, *grads):
        wanted = [t for t in ctx.inner if t.requires_grad]
        pairs = [(o, g) for o, g in zip(ctx.out, grads, strict=True) if g is not None and o.requires_grad]
        with ctx.recorder.pause():
            found = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs],
                                             allow_unused=True))
        ctx.recorder.ops += ctx.kernels(backward=True)
        return (None,) * 3 + tuple(next(found) if t.requires_grad else None for t in ctx.inner)


CELLS = {"lstm_cell": "lstm", "gru_cell": "gru"}


class CudnnRNN(TorchFunctionMode):
    """Counts torch's recurrent layers (the _VF.gru / _VF.lstm / _VF.rnn_* calls nn.GRU, nn.LSTM and
    nn.RNN make with a full sequence) as cuDNN's kernels, and recurrent cells (the _VF.lstm_cell /
    _VF.gru_cell calls of nn.LSTMCell, nn.GRUCell) as ATen's fused CUDA cell kernels."""

    def __init__(self, recorder: KernelRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        mode = getattr(func, "__name__", "")
        if mode in CELLS and not kwargs and len(args) == 6 and args[4] is not None:
            return self._cell(func, CELLS[mode], *args)
        if mode not in GATES or kwargs or len(args) != 9 or not isinstance(args[2], (list, tuple)):
            return func(*args, **kwargs)  # packed sequences are counted op by op
        x, hx, weights, has_bias, layers, dropout, train, bidirectional, batch_first = args
        hx = tuple(hx) if isinstance(hx, (list, tuple)) else (hx,)
        steps, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
        shape = (mode, int(steps), int(batch), int(x.shape[-1]), int(weights[1].shape[-1]), int(layers),
                 2 if bidirectional else 1)
        rest = (has_bias, layers, dropout, train, bidirectional, batch_first)
        count = len(hx)

        def run(x, *tensors):
            state = tensors[:count]
            return func(x, state[0] if count == 1 else state, tensors[count:], *rest)

        with torch._C.DisableTorchFunction():
            return _CountedBlock.apply(self.recorder, run, partial(rnn_kernels, *shape), x, *hx, *weights)

    def _cell(self, func, mode, x, hx, w_ih, w_hh, b_ih, b_hh):
        pair = isinstance(hx, (list, tuple))
        state = tuple(hx) if pair else (hx,)
        count = len(state)

        def run(x, *tensors):
            return func(x, tensors[:count] if pair else tensors[0], *tensors[count:])

        kernels = partial(cell_kernels, mode, int(x.shape[0]), int(x.shape[-1]), int(w_hh.shape[-1]))
        with torch._C.DisableTorchFunction():
            out = _CountedBlock.apply(self.recorder, run, kernels, x, *state, w_ih, w_hh, b_ih, b_hh)
        return out if pair else out[0]


class SavedActivations:
    """Bytes of the tensors autograd saves for the backward pass (what a step keeps in memory
    beyond its persistent state), each storage once, parameters and buffers excluded."""

    def __init__(self, persistent: Iterable[torch.Tensor]) -> None:
        self.skip = {t.untyped_storage()._cdata for t in persistent}
        self.seen: set[int] = set()
        self.bytes = 0

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        key = storage._cdata
        if key not in self.skip and key not in self.seen:
            self.seen.add(key)
            self.bytes += storage.nbytes()
        return tensor

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)


class FusedDropout(TorchFunctionMode):
    """Training-mode dropout as the GPU runs it: one fused kernel (aten.native_dropout) writing the
    output and a 1-byte mask. On CPU and meta tensors torch decomposes it into bernoulli_, div_
    and mul (ATen's dropout takes the fused kernel only for CUDA-like devices), which would count
    three kernels and a 4-byte mask."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout:
            names = ("input", "p", "training", "inplace")
            bound = {**dict(zip(names, args, strict=False)), **kwargs}
            p, training = bound.get("p", 0.5), bound.get("training", True)
            if training and 0.0 < p < 1.0:
                return torch.ops.aten.native_dropout(bound["input"], p, True)[0]
        return func(*args, **kwargs)


# A grouped convolution with fewer input channels per group than this (a depthwise one: 1) is no
# GEMM: cuDNN runs it on the CUDA cores, not the tensor cores, as an elementwise-like kernel.
GEMM_MIN_GROUP_CHANNELS = 8


def _kind(func, args) -> int:
    packet = func.overloadpacket
    if packet in CONV_OPS:
        backward = packet is aten.convolution_backward
        groups, weight = (int(args[9]), args[2]) if backward else (int(args[8]), args[1])
        depthwise = groups > 1 and not bool(args[7 if backward else 6]) and weight.shape[1] < GEMM_MIN_GROUP_CHANNELS
        return KIND_OTHER if depthwise else KIND_CONV
    if packet in MATMUL_OPS:
        return KIND_MATMUL
    return KIND_OTHER


StepFn = Callable[[int, KernelRecorder | None], None]  # run_step(batch, recorder) marks the backward


def _count_once(run_step: StepFn, batch: int) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Per-kernel (names, kinds, FLOPs, bytes, elements written) and saved activation bytes of one
    step at `batch`."""
    recorder = KernelRecorder()
    with FusedDropout(), CudnnRNN(recorder), recorder:
        run_step(batch, recorder)
    names = [op[0] for op in recorder.ops]
    kinds = np.array([op[1] for op in recorder.ops], int)
    flops, traffic, written = (np.array([op[i] for op in recorder.ops], float) for i in (2, 3, 4))
    return names, kinds, flops, traffic, written, recorder.activation_bytes


def count_step(run_step: StepFn, *, param_count: int, gradient_bytes: float,
               state_bytes: Callable[[], float] = lambda: 0.0,
               batches: tuple[int, int] = (2, 4)) -> StepWork:
    """Count one training step at two local batch sizes and fit each kernel's linear work
    (identical kernels folded into one with their launch count: StepWork.merged).

    `state_bytes()` is called after the steps: the bytes of tensors that persist across steps."""
    small, big = batches
    run_step(small, None)  # warm-up: optimizers create their state (e.g. momentum buffers) now
    names_a, kinds, flops_a, bytes_a, outputs_a, kept_a = _count_once(run_step, small)
    names_b, _, flops_b, bytes_b, outputs_b, kept_b = _count_once(run_step, big)
    if names_a != names_b:
        raise WorkloadError("the training step launches different kernels at different batch sizes; "
                            "cannot count its work per kernel")
    flops_fixed, flops_per_sample = linear_work(small, flops_a, big, flops_b)
    bytes_fixed, bytes_per_sample = linear_work(small, bytes_a, big, bytes_b)
    outputs_fixed, outputs_per_sample = linear_work(small, outputs_a, big, outputs_b)
    return StepWork(kind=kinds, flops_fixed=flops_fixed,
                    flops_per_sample=flops_per_sample, bytes_fixed=bytes_fixed,
                    bytes_per_sample=bytes_per_sample, outputs_fixed=outputs_fixed,
                    outputs_per_sample=outputs_per_sample, param_count=param_count,
                    gradient_bytes=float(gradient_bytes),
                    activation_bytes_per_sample=max(kept_b - kept_a, 0) / float(big - small),
                    state_bytes=float(state_bytes())).merged()


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
        saved = SavedActivations([*model.parameters(), *model.buffers()])
        with saved.hooks():
            loss = loss_fn(call_model(model, inputs), targets)
        if recorder is not None:
            recorder.activation_bytes = float(saved.bytes)
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
