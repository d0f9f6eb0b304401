"""`thrifty train` under `thrifty run`: checkpoint when the runner asks, stop when warned.

The runner signals the process it started, the launcher: SIGUSR1 = a checkpoint is due, SIGTERM
= preemption notice (transient.protocol). The workers must act on it together, at one step
boundary, since saving gathers every rank's RNG state and stopping must not leave a rank waiting
in an all-reduce. So the launcher does not forward the signals (a signal lands at a different
point of each rank's step, and in the middle of a gloo call); its handlers count them into shared
memory (`RelayedSignals`), rank 0 reads that memory just before each step's gradient all-reduce,
and the two numbers ride along in it (`AgreedSignals.exchange`, the train loop's gradient
exchange). After the all-reduce every rank holds rank 0's numbers: all checkpoint, and all stop,
after the same step, at no cost beyond two more floats in a collective that runs anyway.
"""

import multiprocessing as mp
from ctypes import Array
from pathlib import Path

import torch
from torch import nn

from thrifty.errors import ThriftyError
from thrifty.transient.protocol import JobCheckpoints
from thrifty.train.aggregation import allreduce_mean_gradients

REQUESTS, NOTICE = 0, 1  # slots of the shared memory: checkpoint requests so far, notice given


class Preempted(ThriftyError):
    """`thrifty run` gave notice: every rank saved a checkpoint after the same step and stopped."""

    def __init__(self, step: int) -> None:
        super().__init__(f"preempted after step {step}: checkpoint saved; the same command resumes")
        self.step = step


def shared_signals() -> Array:
    """The launcher's and workers' shared counters (passed to spawned workers by handle)."""
    return mp.get_context("spawn").RawArray("q", 2)


class RelayedSignals(JobCheckpoints):
    """The launcher's side: the runner's signals counted into `flags` as they arrive; the ready
    file tells the runner that requests are heard from now on."""

    def __init__(self, directory: Path, flags: Array) -> None:
        self.flags = flags
        super().__init__(directory)

    def _on_request(self, *_) -> None:
        super()._on_request()
        self.flags[REQUESTS] += 1

    def _on_notice(self, *_) -> None:
        super()._on_notice()
        self.flags[NOTICE] = 1


class AgreedSignals:
    """A rank's side: what every rank agreed on after the last step's all-reduce."""

    def __init__(self, flags: Array | None, rank: int) -> None:
        self.flags = flags if rank == 0 else None  # only rank 0 reads; the others add zeros
        self.requests = self.handled = 0
        self.notice = False

    def exchange(self, model: nn.Module, extras: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The gradient all-reduce with rank 0's counters riding along (train.step's Exchange)."""
        mine = torch.zeros(2, dtype=extras.dtype)
        if self.flags is not None:
            mine[0], mine[1] = float(self.flags[REQUESTS]), float(self.flags[NOTICE])
        averaged, summed = allreduce_mean_gradients(model, torch.cat([extras, mine]))
        self.requests, self.notice = round(float(summed[-2])), float(summed[-1]) > 0
        return averaged, summed[:-2]

    def checkpoint_due(self) -> bool:
        """A request not yet served, or a notice (save before stopping)."""
        return self.requests > self.handled or self.notice

    def served(self) -> None:
        self.handled = self.requests
