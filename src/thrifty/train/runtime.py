# SPDX-License-Identifier: MIT
"""Where and how a rank computes: its device and its precision.

- device: `cuda:LOCAL_RANK` where CUDA is, else `cpu`; `--device` overrides (`cpu`, `cuda`,
  `cuda:N`). Model, buffers, optimizer state and every batch live there; batches arrive by
  non-blocking copies from pinned memory.
- precision (`--precision`, the plan's values plus bf16):
  fp32  float32 with PyTorch's defaults, which `thrifty plan` projects (perf.roofline.matrix_peak_flops):
        cuDNN may run convolutions in TF32 on Ampere and later GPUs (torch.backends.cudnn.allow_tf32,
        True by default), matmuls stay float32 (torch.backends.cuda.matmul.allow_tf32 False)
  tf32  fp32 with TF32 matmuls as well; as fp32 on CPU
  amp   torch.autocast to float16 with a dynamic loss scaler (torch.amp.GradScaler; Micikevicius et
        al. 2018, "Mixed Precision Training"): a step whose gradients overflow is skipped, not
        applied, and the scale halves; runs on CPU too (float16 autocast on CPU), slowly
  bf16  torch.autocast to bfloat16, no scaler (bfloat16 has float32's exponent range); runs on CPU
- timers: CUDA runs asynchronously, so a timer reads the clock after `synchronize()`; without
  it the controller would see kernel launch times, not compute times.
"""

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

import torch

from thrifty.catalog.torch_cuda import kernels_run_on
from thrifty.errors import ThriftyError
from thrifty.train.host_memory import reset_peak_rss
from thrifty.workloads.base import move_batch

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
_AUTOCAST_DTYPES = {"amp": torch.float16, "bf16": torch.bfloat16}


def resolve_device(requested: str | None, local_rank: int | None = None) -> torch.device:
    """The device a rank trains on: `requested` (checked), else cuda:LOCAL_RANK where CUDA is."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0)) if local_rank is None else local_rank
    if requested is None:
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank % torch.cuda.device_count())
        return torch.device("cpu")
    try:
        device = torch.device(requested)
    except (RuntimeError, ValueError):
        raise ThriftyError(f"--device {requested!r} is not a device; use cpu, cuda or cuda:N") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise ThriftyError(f"--device {requested!r}: thrifty trains on cpu or cuda")
    if not torch.cuda.is_available():
        raise ThriftyError(f"--device {requested}: no CUDA device on this machine")
    if device.index is None:
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    if device.index >= torch.cuda.device_count():
        raise ThriftyError(f"--device {requested}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def _compiled_archs() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(binary, PTX) architectures of this torch's CUDA kernels, from torch.cuda.get_arch_list()
    ('sm_75', 'sm_90a', 'sm_120', 'compute_120': the last digit is the minor version)."""
    binaries: list[tuple[int, int]] = []
    ptx: list[tuple[int, int]] = []
    for arch in torch.cuda.get_arch_list():
        kind, _, digits = arch.partition("_")
        digits = digits.rstrip("abcdefghijklmnopqrstuvwxyz")
        if digits.isdigit() and len(digits) >= 2:
            (binaries if kind == "sm" else ptx).append((int(digits[:-1]), int(digits[-1])))
    return binaries, ptx


def check_kernels_for(device: torch.device) -> None:
    """A GPU that this torch's CUDA build has no kernels for fails at its first kernel ("no kernel
    image is available for execution on the device", in a rank, mid-launch): refused here in one
    line (catalog.torch_cuda: the rule, and why `thrifty plan` offers no such GPU). A build that
    lists no architecture is not judged. Each rank checks its own device as it activates it (the
    launching process reads no device's properties: that would hold a CUDA context of its own on
    the GPU for the whole run)."""
    binaries, ptx = _compiled_archs()
    capability = torch.cuda.get_device_capability(device)
    if (binaries or ptx) and not kernels_run_on(capability, binaries, ptx):
        built = ", ".join(torch.cuda.get_arch_list())
        raise ThriftyError(
            f"{device} ({torch.cuda.get_device_name(device)}) has compute capability {capability[0]}.{capability[1]}, "
            f"and torch {torch.__version__} (CUDA {torch.version.cuda}) has kernels for {built} only: install a "
            "torch built for this GPU, or train with --device cpu")


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ThriftyError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")


def backend_for(device: torch.device) -> str:
    """NCCL between GPUs, gloo between CPU processes."""
    return "nccl" if device.type == "cuda" else "gloo"


@dataclass(frozen=True)
class Runtime:
    """A rank's device and precision, and what follows from them."""

    device: torch.device = torch.device("cpu")
    precision: str = "fp32"

    def __post_init__(self) -> None:
        check_precision(self.precision)

    @classmethod
    def for_rank(cls, device: str | None, precision: str, local_rank: int | None = None) -> "Runtime":
        return cls(resolve_device(device, local_rank), precision)

    def activate(self) -> None:
        """Process-wide settings: this rank's current CUDA device (refused where this torch has no
        kernels for it), the TF32 flags."""
        if self.device.type == "cuda":
            check_kernels_for(self.device)
            torch.cuda.set_device(self.device)
        # PyTorch's defaults but for tf32's matmuls (module docstring): convolutions in TF32 had been
        # switched off for fp32, while the plan's projection counts them at the TF32 rate (2-4x)
        torch.backends.cuda.matmul.allow_tf32 = self.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = True

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward pass's precision context: autocast for amp and bf16, nothing otherwise."""
        dtype = _AUTOCAST_DTYPES.get(self.precision)
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def make_scaler(self) -> "torch.amp.GradScaler | None":
        """The dynamic loss scaler amp needs (None for the other precisions)."""
        return torch.amp.GradScaler(self.device.type) if self.precision == "amp" else None

    def move(self, batch: Any) -> Any:
        return move_batch(batch, self.device)

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def clock(self) -> float:
        """perf_counter after the device's queued work is done (a synchronised timer)."""
        self.synchronize()
        return time.perf_counter()

    def reset_peak_memory(self) -> None:
        """Start the peak memory reading (train.step.peak_memory_bytes) afresh: the device's, or on
        the CPU the process's peak resident size (train.host_memory)."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            reset_peak_rss()
