# SPDX-License-Identifier: MIT
"""The largest local batch b_max a rank may be given.

- memory rule, GPU: double the batch until a training step raises out-of-memory (caught).
- memory rule, CPU: resident memory does not fail loudly, so estimate it: the activations one
  sample keeps for backward (forward hooks add up every leaf module's output bytes; x2 for their
  gradients) against this rank's share of the machine's available memory (/proc/meminfo).
- throughput rule: double the batch while samples/s still rises; a batch that lowers samples/s
  (by more than `tolerance`) is not used.
"""

import os
import time

import torch
from torch import nn

from thrifty.train.runtime import Runtime
from thrifty.workloads.base import Workload

MEMORY_FRACTION = 0.8  # of this rank's share of MemAvailable, leaving room for everything else
RULES = ("memory", "throughput")


def _training_step(model: nn.Module, workload: Workload, batch: int, runtime: Runtime) -> None:
    indices = torch.arange(batch) % workload.train_size
    samples = runtime.move(workload.batch(indices, runtime.device))
    model.zero_grad(set_to_none=True)
    with runtime.autocast():
        loss = workload.loss(model, samples)
    loss.backward()
    runtime.synchronize()


def activation_bytes_per_sample(model: nn.Module, workload: Workload, batch: int = 4,
                                runtime: Runtime = Runtime()) -> float:
    total = 0

    def count(_module, _inputs, output):
        nonlocal total
        if isinstance(output, torch.Tensor):
            total += output.numel() * output.element_size()

    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(count) for m in leaves]
    try:
        with torch.no_grad(), runtime.autocast():
            workload.loss(model, runtime.move(workload.batch(torch.arange(batch) % workload.train_size)))
    finally:
        for h in handles:
            h.remove()
    return 2.0 * total / batch


def available_memory_bytes() -> float:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


def cpu_memory_b_max(model: nn.Module, workload: Workload, ranks_on_machine: int,
                     runtime: Runtime = Runtime()) -> int:
    state_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) * 4  # w, grad, 2 moments
    share = available_memory_bytes() / max(ranks_on_machine, 1) * MEMORY_FRACTION - state_bytes
    return max(1, int(share / max(activation_bytes_per_sample(model, workload, runtime=runtime), 1.0)))


def gpu_memory_b_max(model: nn.Module, workload: Workload, limit: int, runtime: Runtime) -> int:
    batch, fits = 1, 0
    while batch <= limit:
        try:
            _training_step(model, workload, batch, runtime)
            fits = batch
            batch *= 2
        except torch.cuda.OutOfMemoryError:
            break
        finally:
            torch.cuda.empty_cache()
    model.zero_grad(set_to_none=True)
    return max(fits, 1)


def throughput_b_max(model: nn.Module, workload: Workload, limit: int, *, start: int = 8,
                     steps: int = 3, tolerance: float = 0.05, runtime: Runtime = Runtime()) -> int:
    best_rate, best_batch, batch = 0.0, min(start, limit), min(start, limit)
    while batch <= limit:
        _training_step(model, workload, batch, runtime)  # warm-up for this shape
        begin = time.perf_counter()
        for _ in range(steps):
            _training_step(model, workload, batch, runtime)
        rate = steps * batch / (time.perf_counter() - begin)
        if rate < best_rate * (1 - tolerance):
            break
        if rate > best_rate:
            best_rate, best_batch = rate, batch
        batch *= 2
    model.zero_grad(set_to_none=True)
    return best_batch if batch <= limit else limit


def probe_b_max(model: nn.Module, workload: Workload, *, rule: str, limit: int,
                ranks_on_machine: int, runtime: Runtime = Runtime()) -> int:
    """b_max for this rank by `rule`, never above `limit` (the global batch), in the runtime's
    device and precision (the model is there already)."""
    if rule == "throughput":
        return min(throughput_b_max(model, workload, limit, runtime=runtime), limit)
    if runtime.device.type == "cuda":
        return min(gpu_memory_b_max(model, workload, limit, runtime), limit)
    return min(cpu_memory_b_max(model, workload, ranks_on_machine, runtime), limit)
