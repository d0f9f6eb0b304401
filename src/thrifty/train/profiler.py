# SPDX-License-Identifier: MIT
"""Profile a workload on local worker processes at several (workers, local batch) settings.

Each setting runs a few warm-up steps, then `steps` measured steps of real data-parallel training
(thrifty.train.loop, thrifty.train.step). Per step and rank it records one thrifty.records.StepRow:
compute, wait, sync and step time, samples/s, peak memory and the gradient-noise-scale inputs.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict

import torch

from thrifty.errors import WorkloadError
from thrifty.perf.cpu import ThreadScaling
from thrifty.perf.noise import noise_due
from thrifty.perf.samples import steps_per_round
from thrifty.perf.work import COUNT_VERSION, StepWork
from thrifty.records import Profile, StepRow
from thrifty.train.host_memory import reset_peak_rss
from thrifty.train.launcher import run_local_workers
from thrifty.train.loop import fresh_state, run_steps
from thrifty.train.runtime import Runtime
from thrifty.train.sampler import GlobalBatchSampler
from thrifty.workloads import load_workload
from thrifty.workloads.workcount import count_workload

# A profile measures this machine's CPUs: the plan projects CPU VMs from it (perf.cpu) and GPU VMs
# from the counted work (perf.roofline), never from a step measured on a GPU, so the ranks stay on
# the CPU on a GPU machine too (where they had run on cuda:rank, and CPU VMs were then projected
# from GPU step times).
PROFILED_DEVICE = "cpu"
log = logging.getLogger(__name__)


def _profile_rank(rank: int, world_size: int, workload_spec: str, local_batches: Sequence[int],
                  steps: int, warmup: int, seed: int, rounds: int) -> list[dict]:
    """Measure every batch size in `rounds` interleaved rounds, so slow drift of a shared machine
    (other tenants, frequency scaling) spreads over all batch sizes instead of biasing one.
    Each round starts with `warmup` unrecorded steps; rows are numbered by the setting's step."""
    workload = load_workload(workload_spec)
    runtime = Runtime.for_rank(PROFILED_DEVICE, "fp32")
    runtime.activate()
    states = [fresh_state(workload, [b] * world_size, seed=seed, runtime=runtime) for b in sorted(local_batches)]
    per_round = steps_per_round(steps, rounds)
    records: list[dict] = []
    for round_steps in per_round:
        for state in states:  # each setting's peak memory read afresh (train.host_memory)
            runtime.reset_peak_memory()
            measured_from = state.step + warmup

            def keep(rows: list[StepRow], start: int = measured_from) -> bool:
                if rows[rank].step >= start:
                    records.append(asdict(rows[rank]))
                return False  # never stops the run early

            run_steps(state, workload, steps=measured_from + round_steps,
                      measure_noise=lambda step: noise_due(step, world_size), on_step=keep)
    return records


def _thread_scaling_rank(rank: int, world_size: int, workload_spec: str, local_batches: Sequence[int],
                         steps: int, seed: int) -> dict:
    """Compute time of one rank at 1 and at 2 threads, alternating per step so drift of a shared
    machine hits both alike; and the time to make one input sample (workload.batch)."""
    workload = load_workload(workload_spec)
    torch.manual_seed(seed)
    model = workload.make_model()
    optimizer = workload.make_optimizer(model.parameters(), max(local_batches))
    sampler = GlobalBatchSampler(workload.train_size, [max(local_batches)], seed=seed).iter_rank(0)
    times: dict[tuple[int, int], list[float]] = {}
    input_s, input_samples = 0.0, 0
    for local_batch in sorted(local_batches):
        for step in range(2 * (steps + 1)):
            threads = 1 + step % 2
            torch.set_num_threads(threads)
            indices = next(sampler)[:local_batch]
            started = time.perf_counter()
            batch = workload.batch(indices)
            fetched = time.perf_counter()
            loss = workload.loss(model, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            if step >= 2:  # one warm-up step per thread count
                times.setdefault((local_batch, threads), []).append(time.perf_counter() - fetched)
                input_s, input_samples = input_s + fetched - started, input_samples + local_batch
    batches = sorted(local_batches)
    return {"local_batch": batches,
            "one_thread_steps_s": [times[(b, 1)] for b in batches],
            "two_threads_steps_s": [times[(b, 2)] for b in batches],
            "input_s_per_sample": input_s / max(input_samples, 1)}


def measure_thread_scaling(workload_spec: str, local_batches: Sequence[int], *, steps: int = 6,
                           seed: int = 0, timeout_s: float = 600.0) -> dict:
    """Profile meta entries for CPU projection: the Amdahl serial fraction per local batch with its
    bootstrap sd (perf.cpu) and the per-sample input cost, measured in one process allowed 2 threads."""
    measured = run_local_workers(_thread_scaling_rank, 1, timeout_s=timeout_s, threads_per_rank=2, device=PROFILED_DEVICE,
                                 workload_spec=workload_spec, local_batches=list(local_batches),
                                 steps=steps, seed=seed)[0]
    scaling = ThreadScaling.from_measurements(measured["local_batch"], measured["one_thread_steps_s"],
                                              measured["two_threads_steps_s"], seed=seed)
    return {"thread_scaling": scaling.to_dict(), "thread_times": measured,
            "input_s_per_sample": measured["input_s_per_sample"]}


def validate_profile_request(train_size: int | None, workers: Sequence[int], local_batches: Sequence[int] | None,
                             steps: int | None, max_workers: int) -> None:
    """The request's own sense; `train_size`, `local_batches` or `steps` None: not known yet (checked
    before the workload is loaded, and again once it is)."""
    if not workers or (local_batches is not None and not local_batches):
        raise WorkloadError("give at least one worker count and one batch size")
    for n in workers:
        if n < 1 or n > max_workers:
            raise WorkloadError(f"worker count {n} is outside 1..{max_workers} allowed on this machine")
    if local_batches is None:
        return
    for b in local_batches:
        if b < 1:
            raise WorkloadError(f"batch size must be a positive integer, got {b}")
    if len(set(local_batches)) < 2:  # one was stored, and every plan of it refused afterwards
        raise WorkloadError(f"give at least two different local batch sizes (the step-time fit needs two), got "
                            f"{', '.join(map(str, local_batches))}")
    largest = max(workers) * max(local_batches)
    if train_size is not None and largest > train_size:
        raise WorkloadError(f"global batch {max(workers)} x {max(local_batches)} = {largest} exceeds "
                            f"the training set ({train_size} samples)")
    if steps is not None and steps < 2:
        raise WorkloadError(f"--steps must be at least 2, got {steps}")


def profile_workload(workload_spec: str, workers: Sequence[int], local_batches: Sequence[int], *,
                     steps: int = 20, warmup: int = 3, seed: int = 0, rounds: int = 2,
                     max_workers: int = 8, timeout_s: float = 600.0, on_setting=None,
                     step_work: StepWork | None = None) -> Profile:
    """Measure the workload at every (workers, local batch) pair; raises WorkloadError on bad input.

    The profile's meta also holds the counted work of one step (`step_work`, counted here unless
    given), the 1- vs 2-thread compute times and the input cost per sample.

    Each pair gets `steps` measured steps, split over `rounds` interleaved rounds with `warmup`
    unmeasured steps at the start of each round."""
    workload = load_workload(workload_spec)
    validate_profile_request(workload.train_size, workers, local_batches, steps, max_workers)
    batches = sorted(set(local_batches))
    per_setting_memory = reset_peak_rss()  # the ranks run on this system too
    if not per_setting_memory:
        log.warning("this system cannot reset a process's peak memory (/proc/self/clear_refs): each batch size "
                    "reads the peak so far, so the plan's memory per sample is too low")
    samples: list[StepRow] = []
    for n in sorted(set(workers)):
        results = run_local_workers(_profile_rank, n, timeout_s=timeout_s, workload_spec=workload_spec,
                                    device=PROFILED_DEVICE, local_batches=batches, steps=steps,
                                    warmup=warmup,
                                    seed=seed, rounds=len(steps_per_round(steps, rounds)))
        samples += [StepRow(**r) for rank_records in results for r in rank_records]
        if on_setting is not None:
            on_setting(n)
    param_count = sum(p.numel() for p in workload.make_model().parameters() if p.requires_grad)
    meta = {"steps": steps, "warmup": warmup, "seed": seed, "rounds": len(steps_per_round(steps, rounds)),
            "peak_memory_per_setting": per_setting_memory,
            "step_work": (step_work or count_workload(workload)).to_dict(),
            "step_work_version": COUNT_VERSION}
    meta.update(measure_thread_scaling(workload_spec, batches, steps=max(2, steps // 3),
                                       seed=seed, timeout_s=timeout_s))
    return Profile(workload=workload.name, samples=samples, param_count=param_count,
                   train_size=workload.train_size, threads_per_rank=1, meta=meta)
