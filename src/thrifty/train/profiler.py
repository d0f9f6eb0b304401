"""Profile a workload on local worker processes at several (workers, local batch) settings.

Each setting runs a few warm-up steps, then `steps` measured steps of real data-parallel training
(thrifty.train.step). Per step and rank it records compute, sync and step time, samples/s, peak
memory and the gradient-noise-scale inputs.
"""

import resource
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field

import torch

from thrifty.errors import WorkloadError
from thrifty.train.launcher import run_local_workers
from thrifty.train.sampler import GlobalBatchSampler
from thrifty.train.step import noise_due, train_step
from thrifty.workloads import load_workload


@dataclass(frozen=True)
class StepSample:
    """One measured step of one rank."""

    num_nodes: int
    num_workers: int
    rank: int
    local_batch: int
    global_batch: int
    step: int
    compute_time_s: float
    sync_time_s: float
    step_time_s: float
    samples_per_s: float
    peak_memory_bytes: int
    small_batch: int
    small_grad_sq: float
    big_batch: int
    big_grad_sq: float


@dataclass
class Profile:
    """Everything one `thrifty profile` run measured, ready for the store and the fitters."""

    workload: str
    samples: list[StepSample]
    param_count: int
    train_size: int
    threads_per_rank: int
    instance_type: str = "local"
    meta: dict = field(default_factory=dict)


def _peak_memory_bytes() -> int:
    if torch.cuda.is_available():
        return int(torch.cuda.max_memory_allocated())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return int(peak if sys.platform == "darwin" else peak * 1024)


@dataclass
class _Setting:
    """The live training state of one local batch size inside a profiling process."""

    local_batch: int
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    batches: Iterator
    measured: int = 0


def _profile_rank(rank: int, world_size: int, workload_spec: str, local_batches: Sequence[int],
                  steps: int, warmup: int, seed: int, rounds: int) -> list[dict]:
    """Measure every batch size in `rounds` interleaved rounds, so slow drift of a shared machine
    (other tenants, frequency scaling) spreads over all batch sizes instead of biasing one."""
    workload = load_workload(workload_spec)
    settings = []
    for local_batch in sorted(local_batches):
        torch.manual_seed(seed)  # identical initial model on every rank
        model = workload.make_model()
        sampler = GlobalBatchSampler(workload.train_size, [local_batch] * world_size, seed=seed)
        settings.append(_Setting(local_batch, model,
                                 workload.make_optimizer(model.parameters(), local_batch * world_size),
                                 sampler.iter_rank(rank)))
    per_round = [steps // rounds + (1 if r < steps % rounds else 0) for r in range(rounds)]
    records = []
    for round_steps in per_round:
        for setting in settings:  # ascending batch, so the peak RSS is reached by the largest
            global_batch = setting.local_batch * world_size
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            for i in range(warmup + round_steps):
                step = setting.measured
                record = train_step(setting.model, setting.optimizer, workload, next(setting.batches),
                                    global_batch, measure_noise=noise_due(step, world_size))
                if i < warmup:
                    continue
                setting.measured += 1
                records.append(asdict(StepSample(
                    num_nodes=1, num_workers=world_size, rank=rank, local_batch=setting.local_batch,
                    global_batch=global_batch, step=step,
                    compute_time_s=record.compute_time_s, sync_time_s=record.sync_time_s,
                    step_time_s=record.step_time_s,
                    samples_per_s=global_batch / record.step_time_s,
                    peak_memory_bytes=_peak_memory_bytes(), small_batch=record.small_batch,
                    small_grad_sq=record.small_grad_sq, big_batch=record.big_batch,
                    big_grad_sq=record.big_grad_sq)))
    return records


def validate_profile_request(train_size: int, workers: Sequence[int], local_batches: Sequence[int],
                             steps: int, max_workers: int) -> None:
    if not workers or not local_batches:
        raise WorkloadError("give at least one worker count and one batch size")
    for n in workers:
        if n < 1 or n > max_workers:
            raise WorkloadError(f"worker count {n} is outside 1..{max_workers} allowed on this machine")
    for b in local_batches:
        if b < 1:
            raise WorkloadError(f"batch size must be a positive integer, got {b}")
    largest = max(workers) * max(local_batches)
    if largest > train_size:
        raise WorkloadError(f"global batch {max(workers)} x {max(local_batches)} = {largest} exceeds "
                            f"the training set ({train_size} samples)")
    if steps < 2:
        raise WorkloadError(f"--steps must be at least 2, got {steps}")


def profile_workload(workload_spec: str, workers: Sequence[int], local_batches: Sequence[int], *,
                     steps: int = 20, warmup: int = 3, seed: int = 0, rounds: int = 2,
                     max_workers: int = 8, timeout_s: float = 600.0, on_setting=None) -> Profile:
    """Measure the workload at every (workers, local batch) pair; raises WorkloadError on bad input.

    Each pair gets `steps` measured steps, split over `rounds` interleaved rounds with `warmup`
    unmeasured steps at the start of each round."""
    workload = load_workload(workload_spec)
    validate_profile_request(workload.train_size, workers, local_batches, steps, max_workers)
    samples: list[StepSample] = []
    for n in sorted(set(workers)):
        results = run_local_workers(_profile_rank, n, timeout_s=timeout_s, workload_spec=workload_spec,
                                    local_batches=list(local_batches), steps=steps, warmup=warmup,
                                    seed=seed, rounds=max(1, min(rounds, steps)))
        samples += [StepSample(**r) for rank_records in results for r in rank_records]
        if on_setting is not None:
            on_setting(n)
    param_count = sum(p.numel() for p in workload.make_model().parameters() if p.requires_grad)
    return Profile(workload=workload.name, samples=samples, param_count=param_count,
                   train_size=workload.train_size, threads_per_rank=1,
                   meta={"steps": steps, "warmup": warmup, "seed": seed, "rounds": rounds})
