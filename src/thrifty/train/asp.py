# SPDX-License-Identifier: MIT
"""Asynchronous data parallelism (`thrifty train --mode asp`): a parameter server over
torch.distributed.rpc and workers that pull, compute on b_k samples, push.

Process 0 is the server; processes 1..n are workers. One RPC per iteration carries the gradient
in and the fresh parameters, the worker's next local batch and a stop flag out. The server
records each update's staleness (updates applied since the worker pulled its parameters), scales
each gradient with the update's share of the samples (update_weight), and runs the same batch policy
as synchronous training on the workers' iteration (compute) times, once every worker has reported
since its last decision; sum b_k stays B. `--policy uniform` is plain ASP.
"""

import contextlib
import math
import os
import threading
import time
import warnings
from dataclasses import astuple, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed.rpc as rpc
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from thrifty.errors import ThriftyError
from thrifty.io import write_text_atomic
from thrifty.progress import ProgressBar
from thrifty.records import EvalRow, RunLog
from thrifty.train.aggregation import flat_gradient
from thrifty.train.checkpoint import under_runner
from thrifty.train.config import TrainConfig, check_config, global_batch_for, total_steps
from thrifty.train.emulation import Slowdown
from thrifty.train.launcher import loopback_init_method, run_local_workers
from thrifty.train.loop import FixedSplit, RankState, run_steps
from thrifty.train.metrics import write_summary
from thrifty.train.policies import make_policy
from thrifty.train.runlock import hold_run_dir
from thrifty.workloads import load_workload

SERVER = "ps"
_server: "ParameterServer | None" = None  # the instance living in the server process


@dataclass(frozen=True)
class Update:
    update: int
    worker: int
    local_batch: int
    staleness: int
    lr: float
    compute_s: float
    time_s: float


class ParameterServer:
    def __init__(self, config: TrainConfig, workers: int) -> None:
        self.workload = load_workload(config.workload)
        torch.manual_seed(config.seed)
        self.model = self.workload.make_model()
        self.global_batch = global_batch_for(config.global_batch, self.workload)  # check_config's
        self.workers = workers
        self.lr = float(self._workload_group(max(1, round(self.global_batch / workers)))["lr"])  # lr(B/n)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.lr,
                                         momentum=self.explicit_momentum(workers))
        self.policy = make_policy(config.policy, self.global_batch, workers,
                                  b_min=self.batch_floor(config.b_min, config.controller.asp_min_share, workers),
                                  b_max=[config.b_max or self.global_batch] * workers,
                                  capacities=config.capacities, settings=config.controller)
        self.target_samples = total_steps(config, self.workload.train_size, self.global_batch) * self.global_batch
        self.eval_every = max(1, (config.eval_every or 10) * workers)
        self.lock = threading.Lock()
        self.version, self.samples, self.rounds = 0, 0, 0
        self.latest: dict[int, float] = {}
        self.updates: list[Update] = []
        self.log = RunLog()
        self.start = time.perf_counter()
        self.progress = (ProgressBar("asp", self.target_samples, fields=("rate", "split"), show_count=False)
                         if config.progress else None)

    def _workload_group(self, batch: int) -> dict:
        return self.workload.make_optimizer([torch.zeros(1, requires_grad=True)], batch).param_groups[0]

    def update_weight(self, local_batch: int) -> float:
        """b_k / (B/n): the share of the samples an update carries. The server scales the gradient
        by it and keeps the workload's rate for an even share, lr(B/n), so every sample moves the
        model equally, in the step and in the momentum that carries it on (the asynchronous form of
        the weighted aggregation, docs/design.md "Dynamic batching"); plain ASP (b_k = B/n) is unchanged.
        Scaling the learning rate instead, lr(B/n) b_k / (B/n), is the same step without momentum,
        but SGD's buffer holds raw gradients and applies them at later updates' rates: at HL8
        (1-4 samples for the slow workers, 57-61 for the fast one) a 1-sample gradient entered
        it at full weight and moved the model about 4x its fair share at momentum 0.15 (0.15 x
        61/16 on the fast worker's next update against 1/16); at momentum 0.8 (HL8, no floor,
        seeds 0-2) the scaled rate diverged (final accuracy 0.08-0.21), the weighted gradient
        trained (0.87-0.98). Before that, the workload's rule per local batch,
        lr(b_k) = lr(B) sqrt(b_k / B) for digits, weighed the slow worker's tiny batches
        (3 of 64 at 1x/4x) 4.5x the fast worker's per sample."""
        return local_batch * self.workers / self.global_batch

    def batch_floor(self, b_min: int, share: float, workers: int) -> int:
        """The smallest local batch in ASP: max(b_min, ceil(share x B / n)), share 0.5 by default.
        Nobody waits in ASP, but every update has a cost that does not depend on what it carries:
        the worker's fixed cost per iteration (times its slowdown), the RPC, the server's step.
        Balancing moves samples to the fast worker, which amortises its fixed cost; without a
        floor, equal iteration times pinned the slow workers at 1-6 of 64 samples at HL8, so
        three quarters of the updates paid that cost for almost nothing. With every update
        carrying at least half an even share ([8, 8, 8, 40] at HL8): +2% to +28% samples/s
        against no floor over the runs of benchmarks/bench_asp.py, within the scatter of 5
        processes on 2 shared cores (docs/training.md). At HL4 the floor hardly changes the split."""
        return max(b_min, math.ceil(share * self.global_batch / workers))

    def explicit_momentum(self, workers: int) -> float:
        """Asynchrony with n workers acts as momentum 1 - 1/n (Mitliagkas et al., "Asynchrony
        begets momentum", 2016); the server keeps the workload's total by using
        max(0, mu - (1 - 1/n)), since the full mu on top of stale gradients oscillates."""
        mu = float(self._workload_group(self.global_batch).get("momentum", 0.0) or 0.0)
        return max(0.0, mu - (1.0 - 1.0 / workers))

    def exchange(self, worker: int, grad: torch.Tensor | None, pulled: int, local_batch: int,
                 compute_s: float):
        with self.lock:
            if grad is not None and self.samples < self.target_samples:
                self._apply(worker, grad, pulled, local_batch, compute_s)
            stop = self.samples >= self.target_samples
            params = parameters_to_vector(self.model.parameters()).detach().clone()
            return params, self.version, self.policy.split[worker], stop, self.samples // self.global_batch

    def _apply(self, worker: int, grad: torch.Tensor, pulled: int, local_batch: int, compute_s: float) -> None:
        weight = self.update_weight(local_batch)
        offset = 0
        for p in self.model.parameters():
            p.grad = grad[offset:offset + p.numel()].view_as(p) * weight
            offset += p.numel()
        self.optimizer.step()
        self.updates.append(Update(self.version, worker, local_batch, self.version - pulled, self.lr * weight,
                                   compute_s, time.perf_counter() - self.start))
        self.version += 1
        self.samples += local_batch
        if local_batch == self.policy.split[worker]:  # timed at an older split, it says nothing of this one
            self.latest[worker] = compute_s
        if self.progress:
            elapsed_s = max(time.perf_counter() - self.start, 1e-9)
            self.progress.update(self.samples, rate=f"{self.samples / elapsed_s:,.0f} samples/s",
                                 split="split " + ",".join(map(str, self.policy.split)))
        if len(self.latest) == self.workers:  # everyone reported since the last decision
            self.rounds += 1
            self.policy.observe(self.rounds, [self.latest[k] for k in range(self.workers)])
            self.latest.clear()
        if self.version % self.eval_every == 0 or self.samples >= self.target_samples:
            metric = self.workload.evaluate(self.model, self.workload.eval_data)
            self.log.evals.append(EvalRow(self.version, time.perf_counter() - self.start, metric))


def _exchange(worker: int, grad, pulled: int, local_batch: int, compute_s: float):
    assert _server is not None
    return _server.exchange(worker, grad, pulled, local_batch, compute_s)


def _sample_stream(train_size: int, seed: int, worker: int):
    """Worker k's own endless stream of sample indices (one seeded permutation per pass)."""
    epoch = 0
    while True:
        generator = torch.Generator().manual_seed(seed * 100_003 + 7919 * (worker + 1) + epoch)
        yield from torch.randperm(train_size, generator=generator).tolist()
        epoch += 1


def _worker_loop(config: TrainConfig, worker: int) -> dict:
    """train.loop's loop with this worker's own sample stream, and a push of the gradient and
    pull of fresh parameters (and the next local batch) in place of the all-reduce."""
    workload = load_workload(config.workload)
    model = workload.make_model()
    stream = _sample_stream(workload.train_size, config.seed, worker)
    slowdown = Slowdown(config.slowdown, worker, config.emulate, tag=os.environ.get("THRIFTY_RUN_TAG"))
    params, version, local_batch, stop, progress = rpc.rpc_sync(SERVER, _exchange, args=(worker, None, -1, 0, 0.0))
    vector_to_parameters(params, model.parameters())
    state = RankState(model, None, FixedSplit([local_batch]), None, step=progress)
    pulled = {"version": version, "stop": stop, "progress": progress, "busy": 0.0, "talk": 0.0}

    def push_pull(model: torch.nn.Module, extras: torch.Tensor):
        compute = float(extras[0])
        sent = time.perf_counter()
        params, pulled["version"], batch, pulled["stop"], pulled["progress"] = rpc.rpc_sync(
            SERVER, _exchange, args=(worker, flat_gradient(model), pulled["version"], state.policy.split[0], compute))
        vector_to_parameters(params, model.parameters())
        state.policy.split = [batch]
        pulled["busy"] += compute
        pulled["talk"] += time.perf_counter() - sent
        return None, extras

    def on_step(rows) -> bool:
        state.step = pulled["progress"]  # the emulated slowdown follows the server's progress
        return pulled["stop"]

    try:
        if not stop:
            run_steps(state, workload, on_step=on_step, slowdown=slowdown, exchange=push_pull, world=(0, 1),
                      batches=lambda: torch.tensor([next(stream) for _ in range(state.policy.split[0])]))
    finally:
        slowdown.close()
    return {"compute_s": pulled["busy"], "exchange_s": pulled["talk"]}


def _asp_rank(rank: int, world_size: int, config: TrainConfig) -> dict:
    global _server
    port = os.environ["MASTER_PORT"]
    options = rpc.TensorPipeRpcBackendOptions(init_method=loopback_init_method(int(port)), rpc_timeout=600,
                                              _transports=["uv"], _channels=["basic"])
    if rank == 0:
        _server = ParameterServer(config, world_size - 1)
    with _quiet_rpc_agent():
        rpc.init_rpc(SERVER if rank == 0 else f"worker{rank - 1}", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
    try:
        result = {} if rank == 0 else _worker_loop(config, rank - 1)
    finally:
        with _quiet_rpc_agent():
            rpc.shutdown()  # waits for every worker's outstanding calls
    return _server_report(config) if rank == 0 else result


@contextlib.contextmanager
def _quiet_rpc_agent():
    """torch.distributed.rpc's own agent passes its gloo Backend where c10d now wants a ProcessGroup,
    and c10d warns about it (a UserWarning, or a FutureWarning in other torch versions): three
    blocks a run on stderr, --json too, and nothing a user can change."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using a Backend")
        yield


def _server_report(config: TrainConfig) -> dict:
    assert _server is not None
    ps = _server
    staleness = np.array([u.staleness for u in ps.updates], float)
    wall = ps.updates[-1].time_s if ps.updates else 0.0
    counts = np.bincount(staleness.astype(int)) if staleness.size else np.array([])
    target = ps.workload.target_metric if config.target is None else config.target
    reached = next((e for e in ps.log.evals if ps.workload.reached(e.metric, target)), None)
    write_text_atomic(config.run_dir / "updates.csv", "update,worker,local_batch,staleness,lr,compute_s,time_s\n"
                      + "".join(",".join(str(v) for v in astuple(u)) + "\n" for u in ps.updates))
    return {
        "mode": "asp", "workload": ps.workload.name, "policy": config.policy, "workers": ps.workers,
        "global_batch": ps.global_batch, "updates": len(ps.updates), "wall_time_s": wall,
        "samples_per_s": ps.samples / wall if wall else 0.0,
        "metric_name": ps.workload.metric_name, "target_metric": target,
        "final_metric": ps.log.evals[-1].metric if ps.log.evals else float("nan"),
        "time_to_target_s": reached.train_time_s if reached else None,
        "final_batch_sizes": list(ps.policy.split), "adjustments": ps.policy.adjustments,
        "staleness_mean": float(staleness.mean()) if staleness.size else 0.0,
        "staleness_p50": float(np.percentile(staleness, 50)) if staleness.size else 0.0,
        "staleness_p90": float(np.percentile(staleness, 90)) if staleness.size else 0.0,
        "staleness_max": int(staleness.max()) if staleness.size else 0,
        "staleness_histogram": counts.astype(int).tolist(),
        "updates_per_worker": np.bincount([u.worker for u in ps.updates], minlength=ps.workers).tolist(),
        "evals": [[e.step, e.train_time_s, e.metric] for e in ps.log.evals],
        "run_dir": str(Path(config.run_dir).resolve()),  # absolute: serve and the store find it from anywhere
    }


def run_asp(config: TrainConfig, *, max_workers: int = 8) -> dict:
    """Train asynchronously with `config.workers` workers and one server process. It keeps no
    checkpoints, so `thrifty run` would restart it from scratch after every preemption: refused."""
    config = check_config(config, max_workers)
    if under_runner():
        raise ThriftyError("--mode asp keeps no checkpoints and cannot run under thrifty run; use --mode bsp")
    os.environ["THRIFTY_RUN_TAG"] = f"{os.getpid()}-{time.monotonic_ns()}"
    with hold_run_dir(config.run_dir):
        results = run_local_workers(_asp_rank, config.workers + 1, timeout_s=config.timeout_s,
                                    process_group=False, config=config)
    summary = results[0]
    workers = results[1:]
    busy = sum(w["compute_s"] for w in workers)
    talk = sum(w["exchange_s"] for w in workers)
    summary["wait_fraction"] = talk / (busy + talk) if busy + talk else 0.0
    write_summary(config.run_dir, summary)
    return summary

