# SPDX-License-Identifier: MIT
"""Counted work of one training step, per kernel: what a device has to do, independent of the device.

Each kernel of a forward + backward + optimizer step has FLOPs, bytes and output elements that
grow linearly with the local batch b:  flops_i(b) = flops_fixed_i + flops_per_sample_i * b  (the
same for bytes and outputs). Counted by thrifty.workloads.workcount with torch.utils.flop_counter
(FLOPs) and a dispatch mode that adds up the sizes of every kernel's input and output tensors
(bytes, an upper bound on DRAM traffic; embeddings as perf.embedding_traffic) and the elements it
writes (its parallel work: how many SMs it can keep busy). Pure numpy: the planner reads it without
torch.
"""

from dataclasses import dataclass, field

import numpy as np

from thrifty.errors import ModelError

# Kernel kinds: matrix engines (tensor cores) can run MATMUL and CONV; everything else runs on the
# vector units and is usually bound by memory bandwidth.
KIND_MATMUL, KIND_CONV, KIND_OTHER = 0, 1, 2
COUNT_VERSION = 4  # of workloads.workcount's counting (older profiles are recounted): 2 added activation and
# state bytes; 3 skips _unsafe_view and profiler markers and counts dropout as the fused GPU kernel;
# 4 adds output elements, embedding traffic as a GPU runs it, activations as autograd's saved tensors


@dataclass(frozen=True)
class StepWork:
    """Per-kernel linear work model of one training step on one rank (arrays of equal length)."""

    kind: np.ndarray  # KIND_* per kernel
    flops_fixed: np.ndarray
    flops_per_sample: np.ndarray
    bytes_fixed: np.ndarray
    bytes_per_sample: np.ndarray
    outputs_fixed: np.ndarray  # elements the kernel writes: its parallel work
    outputs_per_sample: np.ndarray
    param_count: int
    gradient_bytes: float  # what one all-reduce moves: the trainable parameters' gradients
    # Memory of one rank: activations kept for the backward pass grow with the batch (the tensors
    # autograd saves); parameters, gradients and optimizer state do not (they persist across steps).
    activation_bytes_per_sample: float = 0.0
    state_bytes: float = 0.0
    # launches of each distinct kernel per step (empty: once each); `merged` folds repeats into it
    count: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        if self.count.size == 0:
            object.__setattr__(self, "count", np.ones(self.kind.shape))
        sizes = {a.shape for a in (self.kind, self.flops_fixed, self.flops_per_sample, self.bytes_fixed,
                                   self.bytes_per_sample, self.outputs_fixed, self.outputs_per_sample, self.count)}
        if len(sizes) != 1 or self.kind.ndim != 1 or self.kind.size == 0:
            raise ModelError("step work needs equally long, non-empty per-kernel arrays")

    @property
    def kernels(self) -> int:
        """Kernel launches per step."""
        return int(round(float(self.count.sum())))

    def flops(self, local_batch) -> np.ndarray:
        """Total FLOPs of one step at local batch b (broadcasts over b)."""
        b = np.asarray(local_batch, float)
        return self.count @ self.flops_fixed + (self.count @ self.flops_per_sample) * b

    def bytes(self, local_batch) -> np.ndarray:
        b = np.asarray(local_batch, float)
        return self.count @ self.bytes_fixed + (self.count @ self.bytes_per_sample) * b

    def scaled(self, samples_per_unit: float) -> "StepWork":
        """The same step with `samples_per_unit` of our samples counted as one (e.g. tokens)."""
        return StepWork(self.kind, self.flops_fixed, self.flops_per_sample * samples_per_unit,
                        self.bytes_fixed, self.bytes_per_sample * samples_per_unit,
                        self.outputs_fixed, self.outputs_per_sample * samples_per_unit, self.param_count, self.gradient_bytes,
                        self.activation_bytes_per_sample * samples_per_unit, self.state_bytes, self.count)

    def merged(self) -> "StepWork":
        """The same work with identical kernels (kind, FLOPs, bytes and outputs alike) kept once
        with their launch count: a loop over time steps or layers repeats the same kernels, and a
        step's time is a sum over kernels, so the order does not matter."""
        rows = np.column_stack([self.kind, self.flops_fixed, self.flops_per_sample, self.bytes_fixed,
                                self.bytes_per_sample, self.outputs_fixed, self.outputs_per_sample])
        unique, inverse = np.unique(rows, axis=0, return_inverse=True)
        count = np.bincount(inverse.ravel(), weights=self.count, minlength=len(unique))
        columns = [unique[:, j].copy() for j in range(1, 7)]
        return StepWork(unique[:, 0].astype(int), columns[0], columns[1], columns[2], columns[3], columns[4],
                        columns[5], param_count=self.param_count, gradient_bytes=self.gradient_bytes,
                        activation_bytes_per_sample=self.activation_bytes_per_sample,
                        state_bytes=self.state_bytes, count=count)

    def max_local_batch(self, device_bytes, activation_scale: float = 1.0) -> np.ndarray:
        """Largest local batch whose activations fit beside the persistent state on a device
        (activation_scale 0.5 for FP16 activations)."""
        room = np.asarray(device_bytes, float) - self.state_bytes
        per_sample = max(self.activation_bytes_per_sample * activation_scale, 1.0)
        return np.floor(np.maximum(room, 0.0) / per_sample)

    def summary(self) -> dict:
        return {"kernels_per_step": self.kernels,
                "flops_per_sample": float(self.count @ self.flops_per_sample),
                "flops_fixed_per_step": float(self.count @ self.flops_fixed),
                "bytes_per_sample": float(self.count @ self.bytes_per_sample),
                "bytes_fixed_per_step": float(self.count @ self.bytes_fixed),
                "param_count": self.param_count, "gradient_bytes": self.gradient_bytes,
                "activation_bytes_per_sample": self.activation_bytes_per_sample,
                "state_bytes": self.state_bytes}

    def to_dict(self) -> dict:
        return {"kind": self.kind.astype(int).tolist(), "flops_fixed": self.flops_fixed.tolist(),
                "flops_per_sample": self.flops_per_sample.tolist(),
                "bytes_fixed": self.bytes_fixed.tolist(), "bytes_per_sample": self.bytes_per_sample.tolist(),
                "outputs_fixed": self.outputs_fixed.tolist(), "outputs_per_sample": self.outputs_per_sample.tolist(),
                "param_count": int(self.param_count), "gradient_bytes": float(self.gradient_bytes),
                "activation_bytes_per_sample": float(self.activation_bytes_per_sample),
                "state_bytes": float(self.state_bytes), "count": self.count.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> "StepWork":
        try:
            return cls(kind=np.asarray(data["kind"], int),
                       flops_fixed=np.asarray(data["flops_fixed"], float),
                       flops_per_sample=np.asarray(data["flops_per_sample"], float),
                       bytes_fixed=np.asarray(data["bytes_fixed"], float),
                       bytes_per_sample=np.asarray(data["bytes_per_sample"], float),
                       outputs_fixed=np.asarray(data["outputs_fixed"], float),
                       outputs_per_sample=np.asarray(data["outputs_per_sample"], float),
                       param_count=int(data["param_count"]),
                       gradient_bytes=float(data["gradient_bytes"]),
                       activation_bytes_per_sample=float(data.get("activation_bytes_per_sample", 0.0)),
                       state_bytes=float(data.get("state_bytes", 0.0)),
                       count=np.asarray(data.get("count", []), float))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"counted step work is incomplete or malformed: {exc}") from None


def linear_work(batch_small: int, counts_small: np.ndarray, batch_big: int,
                counts_big: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fixed, per_sample) from per-kernel counts at two batch sizes: two points fix the line.

    Negative parts (rounding in a counter) are clipped to zero."""
    per_sample = (counts_big - counts_small) / float(batch_big - batch_small)
    fixed = counts_small - per_sample * batch_small
    return np.maximum(fixed, 0.0), np.maximum(per_sample, 0.0)
