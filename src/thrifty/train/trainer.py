# SPDX-License-Identifier: MIT
"""Synchronous data-parallel training that keeps unequal workers equally busy (`thrifty train`).

Each step (train.step) rank k computes the loss of its b_k samples scaled by n b_k / B (exact
global-batch gradient), optionally slowed down on purpose (train.emulation), then one all-reduce
carries the gradients and, riding along, every rank's compute time. Every rank feeds the same
times to the same deterministic policy (train.policies), so all reach the same new split without
another collective; the sampler then cuts the next global batch by that split, in place, with no
restart of the process group. The loop is train.loop's; evaluation, checkpoints (train.checkpoint)
and the progress bar are its hooks.

Runs as local processes (`run_training`, via train.launcher) or one rank per process under
torchrun (`train_rank` with the environment's rank and world size). A run holds its run directory
for its life (train.runlock). Under `thrifty run` the local launcher relays the runner's checkpoint
requests and preemption notice to the ranks (train.preemption); on a notice every rank saves and
stops after the same step, and `run_training` raises `Preempted` (the CLI exits with
PREEMPTED_EXIT, and the runner starts it again, which resumes). Under torchrun every rank takes
its own SIGTERM as the notice (a spot VM going away), and rank 0 raises `Preempted`.
"""

import contextlib
import hashlib
import logging
import os
import time
from ctypes import Array
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist

from thrifty.errors import ThriftyError
from thrifty.perf.noise import noise_due
from thrifty.progress import ProgressBar
from thrifty.records import EvalRow, StepRow
from thrifty.train.batch_change import change_in_place, refusal
from thrifty.train.batch_requests import BatchRequest, reply_to, write_reply
from thrifty.train.batches import batch_source
from thrifty.train.checkpoint import (
    check_resumable,
    check_steps_left,
    check_work_left,
    checkpoint_dir,
    checkpoint_store,
    choose_checkpoint,
    nothing_to_do,
    resolved_resume,
    restore,
    resume_log,
    save_checkpoint,
    under_runner,
    with_resumed_batch,
)
from thrifty.train.config import TrainConfig, check_config, global_batch_for, total_steps
from thrifty.train.emulation import Slowdown, remove_cgroups
from thrifty.train.launcher import run_local_workers, torchrun_group
from thrifty.train.loop import RankState, fresh_state, run_steps
from thrifty.train.metrics import cut_step_stream, plot_run, step_line, summarise, write_summary
from thrifty.train.policies import make_policy
from thrifty.train.preemption import AgreedSignals, Preempted, RelayedSignals, notice_on_sigterm, shared_signals
from thrifty.train.probe import probe_b_max
from thrifty.train.runlock import hold_run_dir, join_run_dir
from thrifty.train.runtime import Runtime
from thrifty.train.split import even_split
from thrifty.train.syncbn import convert_sync_batchnorm, has_batchnorm
from thrifty.workloads import load_workload

__all__ = ["Preempted", "TrainConfig", "check_config", "run_training", "total_steps", "train_rank"]

log = logging.getLogger(__name__)


def _all_gather_values(values: list[float], rank: int, world: int, device: torch.device) -> list[list[float]]:
    """Every rank's `values` on every rank (a SUM all-reduce of slots, cheap and order-free)."""
    buffer = torch.zeros(world, len(values), dtype=torch.float64, device=device)
    buffer[rank] = torch.tensor(values, dtype=torch.float64, device=device)
    if world > 1:
        dist.all_reduce(buffer)
    return buffer.tolist()


def _setup(config: TrainConfig, rank: int, world: int, workload,
           resume_from: Path | None) -> tuple[RankState, dict | None]:
    """The rank's state, continued from rank 0's checkpoint `resume_from` if given, and where that
    checkpoint's log stood (restore; the log is resumed later, by resume_log)."""
    global_batch = global_batch_for(config.global_batch, workload)
    runtime = Runtime.for_rank(config.device, config.precision)
    runtime.activate()
    torch.manual_seed(config.seed)  # identical initial model on every rank
    model = workload.make_model().to(runtime.device)
    if config.b_max is not None:
        limits = [config.b_max] * world
    else:  # probe the plain model: each rank alone, before any layer needs its peers
        mine = probe_b_max(model, workload, rule=config.b_max_rule, limit=global_batch,
                           ranks_on_machine=int(os.environ.get("LOCAL_WORLD_SIZE", world)), runtime=runtime)
        limits = [int(row[0]) for row in _all_gather_values([float(mine)], rank, world, runtime.device)]
    if config.sync_bn and has_batchnorm(model):
        model = convert_sync_batchnorm(model)
    policy = make_policy(config.policy, global_batch, world, b_min=config.b_min, b_max=limits,
                         capacities=config.capacities, settings=config.controller)
    state = fresh_state(workload, even_split(global_batch, world), seed=config.seed, policy=policy,
                        model=model, runtime=runtime, total_samples=0.0,
                        loader=batch_source(workload, runtime, config.loader_workers))
    return state, restore(state, config, rank, world, resume_from)


def target_met(config: TrainConfig, state: RankState, workload, target: float) -> str | None:
    """For an --until-target run resumed from a checkpoint whose last evaluation met the target, what
    it met ("accuracy 0.951 against 0.95"); None otherwise (a fresh run, or the target not met)."""
    if not config.until_target or state.step == 0 or state.last_metric is None:
        return None
    if not workload.reached(state.last_metric, target):
        return None
    return f"{workload.metric_name} {state.last_metric:.4g} against {target:.4g}"


def _evaluate(state: RankState, workload, rank: int, world: int) -> float:
    """Rank 0 evaluates (in the run's precision); the metric reaches every rank so all stop at
    the same step."""
    metric = 0.0
    if rank == 0:
        with state.runtime.autocast():
            metric = float(workload.evaluate(state.model, workload.eval_data))
    if world > 1:
        shared = torch.tensor([metric], dtype=torch.float64, device=state.runtime.device)
        dist.broadcast(shared, src=0)
        metric = float(shared[0])
    return metric


def parameter_digests(model: torch.nn.Module, world: int) -> list[str]:
    """Every rank's SHA-256 of its parameters and buffers: equal digests = identical replicas."""
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    digests = [digest.hexdigest()] * world
    if world > 1:
        dist.all_gather_object(digests, digest.hexdigest())
    return digests


def train_rank(rank: int, world_size: int, config: TrainConfig, resume_from: Path | None = None,
               signals: Array | None = None) -> dict:
    """The body of one rank; rank 0 writes the run directory and returns the summary, or
    {"preempted_at_step": S} after a preemption notice. `resume_from` is rank 0's checkpoint to
    continue from; `signals` the launcher's shared counters of the runner's signals."""
    workload = load_workload(config.workload)
    state, saved = _setup(config, rank, world_size, workload, resume_from)
    resumed_at = state.step if resume_from is not None else None  # rank 0 writes the summary
    agreed = AgreedSignals(signals, rank, checkpoint_dir(config))
    store = checkpoint_store(config) if rank == 0 else None
    if store is not None:
        store.working()  # restored: under `thrifty run`, the restart's cost ends here
    finished = False
    target = workload.target_metric if config.target is None else config.target
    # from the state every rank holds (torchrun's other ranks get rank 0's checkpoint through restore,
    # with no resume_from of their own: they had counted a resumed run that moved its batch as a
    # fresh one and stopped at another step); a fresh state, (0, 0, 0), counts as a fresh run
    steps = total_steps(config, workload.train_size, state.policy.global_batch,
                        at=(state.step, state.epoch, state.sample_offset))
    met = target_met(config, state, workload, target)
    check_work_left(config, state.step, steps, met)
    resume_log(state, config, rank, saved)
    # the schedule's horizon: the samples seen so far and those of the steps still to go (a fresh
    # run: steps x B; a resume without a move: the same; after a move, at the new B)
    state.total_samples = float(state.samples_seen + max(steps - state.step, 0) * state.policy.global_batch)
    eval_every = config.eval_every or max(1, state.batch_sampler().steps_per_epoch // 4)
    slowdown = Slowdown(config.slowdown, rank, config.emulate, tag=os.environ.get("THRIFTY_RUN_TAG"))
    progress = (ProgressBar("train", steps, completed=state.step, fields=("rate", "split"))
                if rank == 0 and config.progress else None)
    if rank == 0:
        log.info("training %s on %d worker(s), %s, %s: global batch %d, steps %d to %d, policy %s", workload.name,
                 world_size, state.runtime.device, state.runtime.precision, state.policy.global_batch, state.step,
                 steps, config.policy)

    stream = None
    if rank == 0 and config.step_stream:  # its folder made as --run-dir's is (the CLI checked it can be)
        Path(config.step_stream).parent.mkdir(parents=True, exist_ok=True)
        cut_step_stream(Path(config.step_stream), state.step)
        stream = open(config.step_stream, "a", buffering=1)

    def on_step(rows: list[StepRow]) -> bool:
        nonlocal finished, steps
        if rank == 0:
            state.log.steps.extend(rows)
        if stream is not None:
            stream.write(step_line(rows) + "\n")
        if progress:
            progress.update(state.step, rate=f"{rows[0].samples_per_s:,.0f} samples/s",
                            split="split " + ",".join(map(str, state.policy.split)))
        last = state.step >= steps
        if state.step % eval_every == 0 or last:
            metric = _evaluate(state, workload, rank, world_size)
            state.last_metric = metric
            state.log.evals.append(EvalRow(state.step - 1, state.train_time_s, metric))
            reached = workload.reached(metric, target)
            if rank == 0:
                log.info("step %d: %s %.4g (target %.4g%s), split %s", state.step, workload.metric_name, metric,
                         target, ", reached" if reached else "", ",".join(map(str, state.policy.split)))
            last = last or (config.until_target and reached)
        periodic = config.checkpoint_every and state.step % config.checkpoint_every == 0
        if last or periodic or agreed.checkpoint_due():  # the same decision on every rank
            save_checkpoint(state, config, rank, world_size, store)
            agreed.served()
        finished = last
        request = agreed.take_batch_request()
        if request is not None:
            stopping = "the run stops after this step" if last or agreed.notice else None
            steps = _batch_request(state, workload, request, config, rank, steps, stopping)
            if progress:
                progress.retotal(steps)
        return last or agreed.notice

    wall_start = time.perf_counter()
    failed = True
    try:
        if state.step < steps and met is None:  # a runner's restart of a run at its target trains no more
            # on_step ends the run at `steps`, which an in-place batch change moves
            run_steps(state, workload, on_step=on_step, slowdown=slowdown,
                      exchange=agreed.exchange, measure_noise=noise_steps(config, world_size))
        failed = False
    finally:
        slowdown.close()
        if progress:
            progress.close(failed=failed)
        if stream is not None:
            stream.close()
    if agreed.notice and not finished:  # saved above; the runner starts the job again
        if rank == 0:
            log.info("preemption notice: saved at step %d and stopped", state.step)
        return {"preempted_at_step": state.step} if rank == 0 else {}
    digests = parameter_digests(state.model, world_size)
    if rank != 0:
        return {}
    summary = summarise(state.log, world_size=world_size, global_batch=state.policy.global_batch,
                        split=state.policy.split, adjustments=state.policy.adjustments, target=target,
                        wall_time_s=time.perf_counter() - wall_start, policy=config.policy,
                        workload=workload.name, metric_name=workload.metric_name,
                        train_size=state.batch_sampler().dataset_size,
                        higher_is_better=workload.higher_is_better)
    summary["run_dir"] = str(Path(config.run_dir).resolve())  # absolute: serve and the store find it from anywhere
    summary["device"] = str(state.runtime.device)
    summary["precision"] = state.runtime.precision
    summary["threads_per_rank"] = torch.get_num_threads()  # rank 0's intra-op threads (OMP_NUM_THREADS under torchrun; 1 per rank under --nproc)
    summary["skipped_updates"] = state.skipped_updates
    summary["final_lr"] = [group["lr"] for group in state.own_optimizer().param_groups]
    summary["resumed_at_step"] = resumed_at
    summary["parameter_digests"] = digests
    if resumed_at == state.step and nothing_to_do(config):  # its summary and plot stay as they were (a review)
        return {**summary, "nothing_to_do": True}
    write_summary(config.run_dir, summary)
    plot_run(config.run_dir, state.log, f"{workload.name}, {world_size} workers, policy {config.policy}")
    log.info("finished at step %d: %s %.4g, summary in %s", state.step, workload.metric_name,
             float(summary["final_metric"]), config.run_dir)
    return summary


def _batch_request(state: RankState, workload, request: BatchRequest, config: TrainConfig, rank: int,
                   last_step: int, stopping: str | None) -> int:
    """Every rank takes or refuses the agreed batch request after the same step (refuses it when
    `stopping` says why the run ends here); rank 0 answers in the checkpoint folder
    (train.batch_requests). The run's last step, moved or not."""
    why = stopping or refusal(state, request, last_step)
    old, started = state.policy.global_batch, time.perf_counter()
    if why is None:
        last_step = change_in_place(state, workload, request, config.capacities)
    change_s = time.perf_counter() - started
    if rank == 0:
        if why is None:
            log.info("step %d: global batch %d -> %d in place (request %d), on to step %d", state.step, old,
                     state.policy.global_batch, request.id, last_step)
        else:
            log.warning("batch request %d (global batch %d) refused: %s", request.id, request.global_batch, why)
        write_reply(checkpoint_dir(config), reply_to(request, why, step=state.step, global_batch=state.policy.global_batch,
                                                     steps=last_step, change_s=change_s))
    return last_step


def noise_steps(config: TrainConfig, world_size: int):
    """Which steps measure the gradient noise: those of a streamed run (its supervisor, thrifty
    search, estimates B_noise from them; perf.noise.noise_due), none otherwise."""
    if config.step_stream is None:
        return lambda step: False
    return lambda step: noise_due(step + 1, world_size)


def _local_rank(rank: int, world_size: int, config: TrainConfig, **kwargs) -> dict:
    """A local worker: shares its launcher's hold on the run directory for as long as it lives, and
    counts its own SIGTERM as a notice (train.preemption)."""
    with join_run_dir(config.run_dir), notice_on_sigterm(kwargs.get("signals")):
        return train_rank(rank, world_size, config, **kwargs)


def run_training(config: TrainConfig, *, max_workers: int = 8) -> dict:
    """Train on `config.workers` local processes; returns rank 0's summary. Raises Preempted
    after a notice, `thrifty run`'s or a SIGTERM (the checkpoint is saved; run again to resume)."""
    config = check_config(with_resumed_batch(resolved_resume(config)), max_workers)
    saved_step = check_resumable(config)
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    os.environ["THRIFTY_RUN_TAG"] = tag
    signals = shared_signals()
    with hold_run_dir(config.run_dir), contextlib.ExitStack() as stack:
        check_steps_left(config, saved_step)
        resume_from = choose_checkpoint(config)
        if under_runner():
            relay = RelayedSignals(checkpoint_dir(config), signals)
            stack.callback(relay.close)
        else:  # alone: a SIGTERM is the notice (train.preemption)
            stack.enter_context(notice_on_sigterm(signals, second_stops=True))
        try:
            results = run_local_workers(_local_rank, config.workers, timeout_s=config.timeout_s, config=config,
                                        resume_from=resume_from, signals=signals, device=config.device)
        finally:
            if config.slowdown is not None and config.emulate == "cgroup":
                remove_cgroups(tag)
    if "preempted_at_step" in results[0]:
        raise Preempted(results[0]["preempted_at_step"], resumes_itself=under_runner() or config.resume_if_any)
    return results[0]


def train_torchrun_rank(config: TrainConfig) -> dict | None:
    """This process as one rank of a torchrun launch (single- or multi-node); rank 0's summary.
    Rank 0 holds its run directory and chooses the checkpoint to resume from. After a SIGTERM
    to any rank every rank saves and stops after the same step, and rank 0 raises Preempted."""
    with torchrun_group(config.device) as (rank, world), notice_on_sigterm() as signals:
        if config.resume_if_any:  # rank 0's folder decides, for every node
            resume = [resolved_resume(config).resume if rank == 0 else None]
            if world > 1:
                dist.broadcast_object_list(resume, src=0)
            config = replace(config, resume=bool(resume[0]))
        if config.resume and config.global_batch is None:  # rank 0's checkpoint says it, to every node
            said = [with_resumed_batch(config).global_batch if rank == 0 else None]
            if world > 1:
                dist.broadcast_object_list(said, src=0)
            config = replace(config, global_batch=said[0])
        config = check_config(replace(config, workers=world, progress=config.progress and rank == 0),
                              max_workers=max(world, 1))
        # rank 0 reads the checkpoint and every rank refuses alike: rank 0 refusing alone left the
        # others waiting in restore's broadcast (on NCCL across nodes, until its watchdog)
        refused: list[str | None] = [None]
        if rank == 0:
            try:
                check_resumable(config)
            except ThriftyError as exc:  # checkpoint or log refused
                refused = [str(exc)]
        if world > 1:
            dist.broadcast_object_list(refused, src=0)
        if refused[0] is not None:
            raise ThriftyError(refused[0])
        # a run whose --steps are done is refused by check_work_left, on every rank alike: rank 0
        # refusing alone (check_steps_left) left its peers waiting in restore's broadcast
        with hold_run_dir(config.run_dir) if rank == 0 else contextlib.nullcontext():
            resume_from = choose_checkpoint(config) if rank == 0 else None
            summary = train_rank(rank, world, config, resume_from, signals)
    if rank != 0:
        return None
    if "preempted_at_step" in summary:
        raise Preempted(summary["preempted_at_step"], resumes_itself=under_runner() or config.resume_if_any)
    return summary
