"""Train a workload until it reaches its target metric: the calibration run for statistical
efficiency, and the body of `python -m thrifty.train` under torchrun."""

import time
from dataclasses import dataclass, field

import torch

from thrifty.train.sampler import GlobalBatchSampler
from thrifty.train.step import noise_due, train_step
from thrifty.workloads.base import Workload


@dataclass
class TrainResult:
    global_batch: int
    steps: int
    reached_target: bool
    final_metric: float
    wall_time_s: float
    metric_history: list[tuple[int, float]] = field(default_factory=list)
    noise: dict[str, list[float]] = field(default_factory=lambda: {
        "small_batch": [], "small_grad_sq": [], "big_batch": [], "big_grad_sq": []})


def train_to_target(workload: Workload, local_batches: list[int], *, rank: int = 0,
                    max_steps: int = 5000, eval_every: int | None = None, seed: int = 0,
                    target: float | None = None, on_eval=None, noise_every: int = 8) -> TrainResult:
    """Train until `target` (default: the workload's) is reached or max_steps; rank r of len(local_batches).

    Every rank evaluates the same (synchronised) model, so all ranks stop at the same step.
    With one rank the noise scale is measured every `noise_every` steps (a micro-batch split that
    leaves the update unchanged); a calibration run uses 1, for the most measurements.
    """
    target = workload.target_metric if target is None else target
    global_batch = sum(local_batches)
    torch.manual_seed(seed)
    model = workload.make_model()
    optimizer = workload.make_optimizer(model.parameters(), global_batch)
    sampler = GlobalBatchSampler(workload.train_size, local_batches, seed=seed)
    eval_every = eval_every or max(1, sampler.steps_per_epoch // 4)
    batches = sampler.iter_rank(rank)
    result = TrainResult(global_batch=global_batch, steps=0, reached_target=False,
                         final_metric=float("nan"), wall_time_s=0.0)
    start = time.perf_counter()
    for step in range(1, max_steps + 1):
        record = train_step(model, optimizer, workload, next(batches), global_batch,
                            measure_noise=noise_due(step, len(local_batches), noise_every))
        if record.big_grad_sq == record.big_grad_sq and record.small_grad_sq == record.small_grad_sq:
            for key in result.noise:
                result.noise[key].append(float(getattr(record, key)))
        if step % eval_every == 0 or step == max_steps:
            metric = workload.evaluate(model, workload.eval_data)
            result.metric_history.append((step, metric))
            result.steps, result.final_metric = step, metric
            if on_eval is not None:
                on_eval(step, metric)
            if metric >= target:
                result.reached_target = True
                break
    result.wall_time_s = time.perf_counter() - start
    return result
