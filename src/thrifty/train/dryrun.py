# SPDX-License-Identifier: MIT
"""A one-step dry run of a workload on a few samples, before anything long starts.

Forward, loss, backward and one optimizer step on `samples` training samples, then `evaluate` on
as many evaluation samples, and the learning-rate schedule at the start, middle and end of a run,
all in the run's device and precision. A workload that fails any of them is a one-line
WorkloadError naming the part (the CLI exits 2) in seconds, not a traceback after minutes of
profiling or training.
"""

import math

import torch
from torch.utils.data import Dataset, Subset, TensorDataset

from thrifty.errors import WorkloadError
from thrifty.train.runtime import Runtime, check_kernels_for
from thrifty.workloads.base import Workload


def head(data: Dataset, count: int) -> Dataset:
    """The first `count` samples of a data set, of a kind its workload's code knows."""
    count = min(count, len(data))  # type: ignore[arg-type]  # torch types Dataset without __len__; ours are sized
    if isinstance(data, TensorDataset):
        return TensorDataset(*(tensor[:count] for tensor in data.tensors))
    return Subset(data, range(count))


def _fail(workload: Workload, part: str, exc: BaseException) -> WorkloadError:
    message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return WorkloadError(f"workload {workload.name}: {part} failed on a dry run: {type(exc).__name__}"
                         + (f": {message}" if message else ""))


def dry_run(workload: Workload, runtime: Runtime = Runtime(), samples: int = 4) -> None:
    """Raise WorkloadError if one training step or one evaluation of `workload` fails (a GPU this
    torch has no kernels for is refused as such first, not blamed on the workload)."""
    if runtime.device.type == "cuda":
        check_kernels_for(runtime.device)
    count = min(samples, workload.train_size)
    indices = torch.arange(count)
    try:
        torch.manual_seed(0)
        model = workload.make_model().to(runtime.device)
        optimizer = workload.make_optimizer(model.parameters(), max(count, 1))
    except Exception as exc:
        raise _fail(workload, "building the model and optimizer", exc) from exc
    try:
        batch = runtime.move(workload.batch(indices, runtime.device))
    except Exception as exc:
        raise _fail(workload, "fetching a batch", exc) from exc
    try:
        with runtime.autocast():
            loss = workload.loss(model, batch)
    except Exception as exc:
        raise _fail(workload, "the forward pass and loss", exc) from exc
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad):
        raise WorkloadError(f"workload {workload.name}: loss_fn must return a scalar tensor that "
                            f"depends on the model's parameters, got {_describe(loss)}")
    try:
        loss.backward()
        optimizer.step()
    except Exception as exc:
        raise _fail(workload, "the backward pass and optimizer step", exc) from exc
    try:
        with runtime.autocast():
            metric = workload.evaluate(model, head(workload.eval_data, samples))
    except Exception as exc:
        raise _fail(workload, "evaluate", exc) from exc
    if not (isinstance(metric, (int, float)) or (isinstance(metric, torch.Tensor) and metric.numel() == 1)) \
            or not math.isfinite(float(metric)):
        raise WorkloadError(f"workload {workload.name}: evaluate must return a finite number, got {_describe(metric)}")
    for fraction in (0.0, 0.5, 1.0):
        try:
            factor = float(workload.lr_schedule(fraction * 1000.0, 1000.0))
        except Exception as exc:
            raise _fail(workload, "lr_schedule", exc) from exc
        if not (math.isfinite(factor) and factor >= 0):
            raise WorkloadError(f"workload {workload.name}: lr_schedule must return a finite factor >= 0, "
                                f"got {factor} at {fraction:.0%} of the run")


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}" + ("" if value.requires_grad else " without gradient")
    return f"{type(value).__name__} {value!r}"[:80]


def _dry_run_rank(rank: int, world_size: int, workload: str, device_spec: str | None, precision: str) -> None:
    from thrifty.workloads import load_workload
    dry_run(load_workload(workload), Runtime.for_rank(device_spec, precision))


def dry_run_in_worker(workload: str, device: str | None, precision: str, timeout_s: float = 600.0) -> None:
    """`dry_run` in a process forked from the local launcher's forkserver (train.launcher), failing
    with the same one-line WorkloadError. The server has imported torch._dynamo, which a torch
    optimizer imports on creation (5-10 s of CPU): a dry run in the launcher itself would import it a
    second time, on the cores where the server is importing it for the ranks."""
    from thrifty.train.launcher import run_local_workers
    run_local_workers(_dry_run_rank, 1, timeout_s=timeout_s, process_group=False, workload=workload,
                      device_spec=device, precision=precision)
