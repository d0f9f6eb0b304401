# SPDX-License-Identifier: MIT
"""Largest local batch that fits in one GPU's memory, calibrated so that every published per-GPU
batch (data/gpu/gpu_training_throughput*.csv: the batch sizes NVIDIA's, Lambda's and Gavel's
recipes ran) is accepted on the GPU it ran on (tests/perf/test_gpu_memory.py).

  need(b) = state + amp_weights + b * activations_per_sample * scale  <=  memory * USABLE - RESERVED
state: parameters, gradients, buffers and optimizer state (perf.work, counted); activations: the
tensors autograd saves for the backward pass (workloads.workcount, counted in fp32); under AMP (and
BF16) they are 16-bit (scale 0.5) and autocast keeps a 16-bit copy of the weights (half the
parameter bytes).
RESERVED is the CUDA context with cuBLAS/cuDNN handles, outside PyTorch's allocator (a few hundred
MB: PyTorch "CUDA semantics", memory management); USABLE leaves room for the caching allocator's
fragmentation. The tightest published row (BERT-large SQuAD, TF32, batch 64 on an 80 GB A100/H100)
needs 0.91 of the memory by this count.
"""

import numpy as np

from thrifty.perf.roofline import HALF_PRECISIONS
from thrifty.perf.work import StepWork

GIB = 2.0**30
USABLE_FRACTION = 0.95
RESERVED_BYTES = 0.5 * GIB
AMP_ACTIVATION_SCALE = 0.5  # FP16 activations are half as large as FP32 ones
AMP_WEIGHT_COPY = 0.5  # FP16 copies of the FP32 weights, in parameter bytes (autocast's cache)


def usable_bytes(memory_bytes) -> np.ndarray:
    """Memory a training step may use on a GPU with `memory_bytes` (arrays broadcast)."""
    return np.asarray(memory_bytes, float) * USABLE_FRACTION - RESERVED_BYTES


def max_local_batch(work: StepWork, memory_bytes, precision: str) -> np.ndarray:
    """Largest local batch whose saved activations fit beside the persistent state."""
    room = usable_bytes(memory_bytes)
    scale = 1.0
    if precision in HALF_PRECISIONS:  # autocast keeps an FP16/BF16 copy of the weights, as AMP
        room = room - AMP_WEIGHT_COPY * work.gradient_bytes
        scale = AMP_ACTIVATION_SCALE
    return work.max_local_batch(room, scale)
