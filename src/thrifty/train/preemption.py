# SPDX-License-Identifier: MIT
"""`thrifty train` under `thrifty run` or torchrun: checkpoint when asked, stop when warned.

The runner signals the process it started, the launcher: SIGUSR1 = a checkpoint is due, SIGTERM
= preemption notice (transient.protocol). The workers must act on it together, at one step
boundary, since saving gathers every rank's RNG state and stopping must not leave a rank waiting
in an all-reduce. So the launcher does not forward the signals (a signal lands at a different
point of each rank's step, and in the middle of a gloo call); its handlers count them into shared
memory (`RelayedSignals`), the ranks read that memory just before each step's gradient
all-reduce, and the two numbers ride along in it (`AgreedSignals.exchange`, the train loop's
gradient exchange). After the all-reduce every rank holds the same numbers: all checkpoint, and
all stop, after the same step, at no cost beyond two more floats in a collective that runs anyway.

Under torchrun (a SkyPilot task) there is no runner: the spot VM's termination notice is a SIGTERM
(GCP about 30 s before the VM stops, AWS at its shutdown after the 2-minute warning), which
torchrun forwards to the ranks of its node, then waits 30 s before SIGKILL. Each rank counts its
own SIGTERM (`notice_on_sigterm`); the notice of any rank rides along the same way, so a node that
goes away, rank 0's or another, stops every rank after the same step with a checkpoint saved.

Alone (no runner, no torchrun) the launcher takes its own SIGTERM (a scheduler's stop) as the
notice the same way (`notice_on_sigterm` with the workers' counters), and so does each local rank
(a VM's shutdown or `timeout` signals every process, the ranks too): every rank saves after the
same step and `thrifty train` exits 75; `--resume` goes on. A SIGTERM had ended it at once, with
nothing saved since the last periodic checkpoint. A second SIGTERM to the launcher ends it as before.
"""

import contextlib
import logging
import multiprocessing as mp
import signal
import threading
from collections.abc import Iterator
from ctypes import Array
from pathlib import Path
from typing import Any

import torch
from torch import nn

from thrifty.errors import ThriftyError
from thrifty.train.aggregation import allreduce_mean_gradients
from thrifty.train.batch_requests import BatchRequest, read_request, reply_to, write_reply
from thrifty.train.launcher import act_as
from thrifty.transient.protocol import JobCheckpoints

# slots of the shared memory: checkpoint requests so far, notice given, batch requests signalled so far
REQUESTS, NOTICE, BATCH_REQUESTS = 0, 1, 2
log = logging.getLogger(__name__)


class Preempted(ThriftyError):
    """A notice (`thrifty run`'s, or a SIGTERM): every rank saved a checkpoint after the same step
    and stopped."""

    def __init__(self, step: int, resumes_itself: bool = True) -> None:
        # itself: under thrifty run or --resume-if-any (the plan's lines: a new user's pass was told to add --resume)
        then = "the same command resumes" if resumes_itself else "the same command with --resume goes on"
        super().__init__(f"preempted after step {step}: checkpoint saved; {then}")
        self.step = step


def shared_signals() -> Array:
    """The launcher's and workers' shared counters (passed to the forked workers by handle)."""
    return mp.get_context("forkserver").RawArray("q", 3)


class RelayedSignals(JobCheckpoints):
    """The launcher's side: the runner's signals counted into `flags` as they arrive (SIGUSR2: a
    batch request, train.batch_requests); the ready file tells the runner that requests are heard
    from now on."""

    def __init__(self, directory: Path, flags: Array) -> None:
        self.flags = flags
        signal.signal(signal.SIGUSR2, self._on_batch_request)  # before the ready file (JobCheckpoints)
        super().__init__(directory)

    def _on_batch_request(self, *_) -> None:
        self.flags[BATCH_REQUESTS] += 1

    def close(self) -> None:
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        super().close()

    def _on_request(self, *_) -> None:
        super()._on_request()
        self.flags[REQUESTS] += 1

    def _on_notice(self, *_) -> None:
        super()._on_notice()
        self.flags[NOTICE] = 1


@contextlib.contextmanager
def notice_on_sigterm(flags: Array | None = None, *, second_stops: bool = False) -> Iterator[Array]:
    """Counters (this torchrun rank's own, or the given ones: the local workers'), this process's
    SIGTERM counted into them as a notice, for the block's duration. With `second_stops` (the
    local launcher) a second one acts as before the block, so a hung run still stops on `kill`;
    not for a rank, which a VM's shutdown and torchrun's forwarding both signal (a rank that took
    the second as a stop died before saving). Off the main thread, where Python takes no signal
    handler, nothing is installed."""
    flags = shared_signals() if flags is None else flags
    if threading.current_thread() is not threading.main_thread():
        yield flags
        return
    received = []  # this process's own SIGTERMs (the shared notice may be another process's)

    def on_notice(signum: int, frame: Any) -> None:
        received.append(signum)
        if len(received) == 1 or not second_stops:
            flags[NOTICE] = 1
            return
        act_as(previous, signal.SIGTERM)
    previous = signal.signal(signal.SIGTERM, on_notice)
    try:
        yield flags
    finally:
        signal.signal(signal.SIGTERM, previous)


class AgreedSignals:
    """A rank's side: what every rank agreed on after the last step's all-reduce. Requests are
    rank 0's count (local workers share one count: the others add zeros, else one request would
    count once per rank as their reads fall on different steps); a notice is any rank's. A batch
    request (train.batch_requests) is rank 0's, read from `requests_dir` when the count of its
    signals moves, and rides along once."""

    RIDING = 6  # checkpoint requests, notice, and a batch request's four numbers

    def __init__(self, flags: Array | None, rank: int, requests_dir: Path | None = None) -> None:
        self.flags = flags
        self.rank = rank
        self.requests_dir = requests_dir
        self.requests = self.handled = 0
        self.notice = False
        self.batch_signals = 0  # rank 0: batch-request signals already read
        self.batch_request: BatchRequest | None = None  # agreed, not yet taken

    def exchange(self, model: nn.Module, extras: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The gradient all-reduce with the counters riding along (train.step's Exchange)."""
        mine = torch.zeros(self.RIDING, dtype=extras.dtype)
        if self.flags is not None:
            mine[0] = float(self.flags[REQUESTS]) if self.rank == 0 else 0.0
            mine[1] = float(self.flags[NOTICE])
            request = self._new_batch_request(model)
            if request is not None:
                mine[2:] = torch.tensor(request.as_extras(), dtype=extras.dtype)
        averaged, summed = allreduce_mean_gradients(model, torch.cat([extras, mine]))
        riding = summed[-self.RIDING:].tolist()
        self.requests, self.notice = round(riding[0]), riding[1] > 0
        self.batch_request = BatchRequest.from_extras(riding[2:]) or self.batch_request
        return averaged, summed[:-self.RIDING]

    def _new_batch_request(self, model: nn.Module) -> BatchRequest | None:
        """Rank 0: the request behind a batch-request signal not yet read, if the all-reduce can
        carry it exactly (refused here otherwise: no rank would know it had been rounded)."""
        if self.rank != 0 or self.flags is None or self.requests_dir is None:
            return None
        signalled = int(self.flags[BATCH_REQUESTS])
        if signalled <= self.batch_signals:
            return None
        self.batch_signals = signalled
        request = read_request(self.requests_dir)
        dtype = next((p.dtype for p in model.parameters() if p.requires_grad), torch.float64)
        if request is not None and not request.exact_in(dtype):
            why = f"its numbers ({request.global_batch}, {request.steps}) do not ride a {dtype} all-reduce exactly"
            log.warning("batch request %d refused: %s", request.id, why)
            write_reply(self.requests_dir, reply_to(request, why))
            return None
        return request

    def take_batch_request(self) -> BatchRequest | None:
        """The batch request every rank agreed on, once."""
        request, self.batch_request = self.batch_request, None
        return request

    def checkpoint_due(self) -> bool:
        """A request not yet served, or a notice (save before stopping)."""
        return self.requests > self.handled or self.notice

    def served(self) -> None:
        self.handled = self.requests
