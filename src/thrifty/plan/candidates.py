"""Enumerate and evaluate every configuration at once (numpy arrays, one entry per candidate).

Candidate = VM type x nodes x global batch (powers of two) x {on-demand, spot}. Ranks per VM: one
per GPU, or one using all vCPUs of a CPU VM. Predictions:
  step time  measured model on the profiled instance type; elsewhere compute scaled by rank speed
             (catalog.hardware) and ring all-reduce from bandwidth (perf.network)
  steps      S(B) = S_min (1 + B_noise / B)                     (McCandlish et al. 2018)
  time       S(B) * T;  spot: Daly's expected runtime with interruptions (transient.overhead)
  cost       time * nodes * price_per_hour / 3600
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from thrifty.catalog.hardware import Hardware
from thrifty.catalog.vmtype import VMType
from thrifty.errors import PlanError
from thrifty.perf.efficiency import calibrate_s_min, steps_to_target
from thrifty.perf.jobmodel import JobModel
from thrifty.perf.network import INTER_NODE_LATENCY_S, INTRA_NODE_LATENCY_S, ring_allreduce_time_s
from thrifty.perf.steptime import PARAM_NAMES, compute_time, predict_step_time
from thrifty.plan.request import PlanRequest
from thrifty.transient.lifetimes import LifetimeModel
from thrifty.transient.registry import load_model
from thrifty.transient.schedule import expected_overhead_fraction

GIB = 1024**3
# Fixed per-step cost of an eager PyTorch step on a GPU (on the order of a hundred kernel launches
# of ~10 us each); an assumption that keeps projections of tiny models from vanishing to zero.
GPU_STEP_OVERHEAD_S = 1e-3


@dataclass(frozen=True)
class VMArrays:
    """Per-VM-type attributes as arrays, computed once per catalog."""

    vms: list[VMType]
    is_gpu: np.ndarray
    ranks: np.ndarray
    speed: np.ndarray
    memory_bytes: np.ndarray
    inter_gbps: np.ndarray
    intra_gbps: np.ndarray
    price: np.ndarray
    spot_price: np.ndarray  # NaN where the catalog has none

    @classmethod
    def build(cls, vms: Sequence[VMType], hardware: Hardware) -> "VMArrays":
        vms = list(vms)
        return cls(vms=vms, is_gpu=np.array([vm.is_gpu for vm in vms], bool),
                   ranks=np.array([vm.ranks_per_node for vm in vms], float),
                   speed=np.array([hardware.rank_speed(vm) for vm in vms], float),
                   memory_bytes=np.array([hardware.rank_memory_gib(vm) * GIB for vm in vms], float),
                   inter_gbps=np.array([hardware.network_gbps(vm) for vm in vms], float),
                   intra_gbps=np.array([hardware.intra_node_gbps(vm) for vm in vms], float),
                   price=np.array([vm.price_per_hour for vm in vms], float),
                   spot_price=np.array([np.nan if vm.spot_price_per_hour is None
                                        else vm.spot_price_per_hour for vm in vms], float))


@dataclass
class Candidates:
    """Parallel arrays, one entry per candidate configuration."""

    vm_index: np.ndarray
    nodes: np.ndarray
    workers: np.ndarray
    global_batch: np.ndarray
    local_batch: np.ndarray
    spot: np.ndarray
    price_per_hour: np.ndarray
    measured: np.ndarray
    step_time_s: np.ndarray
    steps: np.ndarray
    time_s: np.ndarray
    time_low_s: np.ndarray
    time_high_s: np.ndarray
    cost_usd: np.ndarray
    cost_low_usd: np.ndarray
    cost_high_usd: np.ndarray

    def __len__(self) -> int:
        return int(self.vm_index.size)

    def take(self, index: np.ndarray) -> "Candidates":
        return Candidates(*(getattr(self, f)[index] for f in self.__dataclass_fields__))


def batch_grid(train_size: int) -> np.ndarray:
    """Powers of two from 1 up to the training-set size."""
    return 2.0 ** np.arange(0, int(np.floor(np.log2(train_size))) + 1)


def enumerate_candidates(vmx: VMArrays, job: JobModel, request: PlanRequest) -> tuple[np.ndarray, ...]:
    """Index arrays (vm, nodes, global batch, spot) of the configurations that fit in memory."""
    max_nodes = int(request.max_workers)
    v, k, b, s = np.meshgrid(np.arange(len(vmx.vms)), np.arange(1, max_nodes + 1),
                             batch_grid(job.train_size), np.array([False, True]), indexing="ij")
    v, k, b, s = v.ravel(), k.ravel(), b.ravel(), s.ravel()
    workers = k * vmx.ranks[v]
    local = np.ceil(b / workers)
    keep = (workers <= request.max_workers) & (b >= workers)
    keep &= local <= job.max_local_batch(vmx.memory_bytes[v])
    if request.spot == "never":
        keep &= ~s
    elif request.spot == "only":
        keep &= s
    keep &= ~(s & np.isnan(vmx.spot_price[v]))
    return v[keep], k[keep], b[keep], s[keep]


def evaluate(vmx: VMArrays, job: JobModel, request: PlanRequest,
             spot_model: LifetimeModel | None = None) -> Candidates:
    """Predicted time and cost of every candidate. Spot candidates pay the expected overhead of
    preemptions under `spot_model` (default: the bathtub model fitted on Google's 2019 data) with
    the model-aware checkpoint schedule (transient.schedule): the job on n VMs stops when the
    first of them is preempted."""
    v, nodes, batch, spot = enumerate_candidates(vmx, job, request)
    workers = nodes * vmx.ranks[v]
    local = np.ceil(batch / workers)  # the slowest rank holds the largest share
    model = job.step_time
    measured = np.array([vm.instance_type == job.profiled_instance_type for vm in vmx.vms])[v]

    g = model.params[PARAM_NAMES.index("overlap_g")]
    reference_speed = float(job.threads_per_rank)
    # one rank per VM or per GPU on projected hardware: no co-location contention
    compute = compute_time(model.params, local) * np.where(measured, 1.0, reference_speed / vmx.speed[v])
    compute = compute + np.where(vmx.is_gpu[v] & ~measured, GPU_STEP_OVERHEAD_S, 0.0)
    bandwidth = np.where(nodes > 1, vmx.inter_gbps[v], vmx.intra_gbps[v])
    latency = np.where(nodes > 1, INTER_NODE_LATENCY_S, INTRA_NODE_LATENCY_S)
    network_projected = ring_allreduce_time_s(workers, job.gradient_bytes, bandwidth, latency)
    fitted = predict_step_time(model.params, nodes, workers, local)
    projected = (compute**g + network_projected**g) ** (1.0 / g)
    step_time = np.where(measured, fitted, projected)
    low, high = model.interval(nodes, workers, local)
    step_low, step_high = step_time * low / fitted, step_time * high / fitted

    steps = steps_to_target(batch, job.s_min, job.noise_scale)
    steps_bounds = [steps_to_target(batch, calibrate_s_min(job.calibration_steps,
                                                           job.calibration_batch, bn), bn)
                    for bn in job.noise_scale_interval if 0 < bn < np.inf] or [steps]
    steps_low, steps_high = np.minimum.reduce(steps_bounds), np.maximum.reduce(steps_bounds)

    lifetime = spot_model if spot_model is not None else load_model()[1]

    def runtime(work):
        out = np.array(work, float)
        out[spot] = work[spot] * (1.0 + expected_overhead_fraction(lifetime, work[spot], nodes[spot]))
        return out
    price = np.where(spot, vmx.spot_price[v], vmx.price[v])
    time_s = runtime(steps * step_time)
    time_low, time_high = runtime(steps_low * step_low), runtime(steps_high * step_high)
    dollars_per_s = nodes * price / 3600.0
    return Candidates(vm_index=v, nodes=nodes, workers=workers, global_batch=batch, local_batch=local,
                      spot=spot, price_per_hour=price, measured=measured, step_time_s=step_time,
                      steps=steps, time_s=time_s, time_low_s=time_low, time_high_s=time_high,
                      cost_usd=time_s * dollars_per_s, cost_low_usd=time_low * dollars_per_s,
                      cost_high_usd=time_high * dollars_per_s)


def feasible(c: Candidates, request: PlanRequest) -> np.ndarray:
    ok = np.isfinite(c.time_s) & np.isfinite(c.cost_usd)
    if request.deadline_s is not None:
        ok &= c.time_s <= request.deadline_s
    if request.budget_usd is not None:
        ok &= c.cost_usd <= request.budget_usd
    return ok


def require_any(mask: np.ndarray, what: str) -> None:
    if not np.any(mask):
        raise PlanError(f"no configuration {what}; relax the constraints or widen the filters")
