# SPDX-License-Identifier: MIT
"""Enumerate and evaluate every configuration at once (numpy arrays, one entry per candidate).

Candidate = VM type x nodes x global batch (powers of two) x {on-demand, spot}. Ranks per VM: one
per GPU, or one using all vCPUs of a CPU VM. Predictions:
  step time  the fitted model on the profiled CPU machine ("measured"); a configuration a stored
             `thrifty search` window ran (same VM type, nodes, workers and global batch; spot or
             not alike): the windows' step-weighted mean ("measured", source "search");
             elsewhere ("projected")
             CPU VMs: 1-thread compute x Amdahl over the VM's vCPUs / family speed (perf.cpu;
             the interval holds the serial fraction's sd, the profile's launch spread and,
             beyond the profiled local batches, 0.10 in log a doubling, as the fit's own),
             GPU VMs: max(counted work on the calibrated roofline (perf.roofline), input cost
             spread over the host's vCPUs),
             both with a ring all-reduce over the VM's interconnect or network (perf.allreduce)
  steps      JobModel.steps: S(B) = S_min (1 + B_noise / B) (McCandlish et al. 2018) or a recipe
  time       start-up + steps x step time; spot: x (1 + expected preemption overhead)
  cost       per-second billing with a one-minute minimum: max(time, 60 s) x nodes x $/h / 3600
Every interval contains its point: the bounds combine the step-time model's interval, the
projection's calibrated error, and the bounds on steps.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtri

from thrifty.catalog.hardware import Hardware
from thrifty.catalog.torch_cuda import task_torch_build
from thrifty.catalog.vmtype import MINIMUM_BILLED_S, VMType
from thrifty.errors import PlanError
from thrifty.perf.allreduce import INTER_NODE_LATENCY_S, INTRA_NODE_LATENCY_S, ring_allreduce_time_s
from thrifty.perf.cpu import nondecreasing_in_batch
from thrifty.perf.gpu_memory import max_local_batch as gpu_max_local_batch
from thrifty.perf.jobmodel import JobModel
from thrifty.perf.roofline import GPUSpec, RooflineParams, load_params
from thrifty.perf.roofline import compute_time_s as gpu_compute_time_s
from thrifty.perf.steptime import PARAM_NAMES
from thrifty.perf.uncertainty import EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING, doublings_away
from thrifty.plan.request import PlanRequest
from thrifty.transient.lifetimes import LifetimeModel
from thrifty.transient.overhead import expected_overhead_fraction
from thrifty.transient.registry import load_model

GIB = 1024**3
# What a training process can use of a GPU's memory: the CUDA context, cuDNN/cuBLAS workspaces and
# allocator fragmentation take the rest (our assumption, about 1 GiB and 10%).
# Deviation of log step time for CPU projections: the per-vCPU family factors (data/HARDWARE.md)
# are indicative, not measured; a 90% interval of x/÷ 1.5 is our stated assumption.
CPU_PROJECTION_SIGMA_LOG = float(np.log(1.5) / 1.6449)
# A measured configuration (search windows): the 90% interval is the mean +- 1.645 x its standard
# error combined with the spread between windows, never narrower than +-2% (a rerun on another VM
# of the same type differs by about that), or +-10% when no window had a standard error (single
# steps). Our stated floors.
SEARCH_FLOOR = 0.02
SEARCH_FLOOR_WITHOUT_SE = 0.10


@dataclass(frozen=True)
class VMArrays:
    """Per-VM-type attributes as arrays, computed once per catalog."""

    vms: list[VMType]
    is_gpu: np.ndarray
    ranks: np.ndarray
    vcpus_per_rank: np.ndarray
    cpu_factor: np.ndarray
    gpu_specs: list[GPUSpec]  # distinct GPU types
    gpu_index: np.ndarray  # into gpu_specs, -1 for CPU VMs
    gpu_die: np.ndarray  # one id per GPU die (catalog.gpus.GPUSpec.die), -1 for CPU VMs
    memory_bytes: np.ndarray
    inter_gbps: np.ndarray
    intra_gbps: np.ndarray
    price: np.ndarray
    spot_price: np.ndarray  # NaN where the catalog has none
    # the torch the plan's task installs has kernels for the VM's GPU (catalog.torch_cuda); CPU VMs: True
    trainable: np.ndarray

    @classmethod
    def build(cls, vms: Sequence[VMType], hardware: Hardware) -> "VMArrays":
        """The arrays of `vms`; `trainable` for the torch installed here (plan.launch pins it)."""
        vms = list(vms)
        specs = {(vm.accelerator or "").lower(): hardware.gpu(vm) for vm in vms if vm.is_gpu}
        names = sorted(specs)
        build = task_torch_build()
        trainable = [not vm.is_gpu or build is None or build.runs_on(specs[(vm.accelerator or "").lower()])
                     for vm in vms]
        return cls(vms=vms, is_gpu=np.array([vm.is_gpu for vm in vms], bool), trainable=np.array(trainable, bool),
                   ranks=np.array([vm.ranks_per_node for vm in vms], float),
                   vcpus_per_rank=np.array([vm.vcpus / vm.ranks_per_node for vm in vms], float),
                   cpu_factor=np.array([hardware.cpu_factor(vm) for vm in vms], float),
                   gpu_specs=[specs[n] for n in names],
                   gpu_index=np.array([names.index((vm.accelerator or "").lower()) if vm.is_gpu else -1
                                       for vm in vms], int),
                   gpu_die=_die_ids([specs[(vm.accelerator or "").lower()] if vm.is_gpu else None for vm in vms]),
                   memory_bytes=np.array([hardware.rank_memory_gib(vm) * GIB for vm in vms], float),
                   inter_gbps=np.array([hardware.network_gbps(vm) for vm in vms], float),
                   intra_gbps=np.array([hardware.intra_node_gbps(vm) for vm in vms], float),
                   price=np.array([vm.price_per_hour for vm in vms], float),
                   spot_price=np.array([np.nan if vm.spot_price_per_hour is None
                                        else vm.spot_price_per_hour for vm in vms], float))


def _die_ids(specs: Sequence[GPUSpec | None]) -> np.ndarray:
    """One id per distinct GPU die (GPUSpec.die) in order of appearance, -1 for None."""
    ids: dict[tuple, int] = {}
    return np.array([-1 if spec is None else ids.setdefault(spec.die, len(ids)) for spec in specs], int)


@dataclass(frozen=True)
class Bounds:
    """90% intervals of time and cost, one entry per candidate."""

    time_low_s: np.ndarray
    time_high_s: np.ndarray
    cost_low_usd: np.ndarray
    cost_high_usd: np.ndarray


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
    measured: np.ndarray  # the profiled machine's fitted model or a stored search window
    searched: np.ndarray  # a stored search window (a subset of measured)
    threads_per_rank: np.ndarray
    step_time_s: np.ndarray
    steps: np.ndarray
    time_s: np.ndarray
    time_low_s: np.ndarray
    time_high_s: np.ndarray
    cost_usd: np.ndarray
    cost_low_usd: np.ndarray
    cost_high_usd: np.ndarray
    # What the tie resolution (plan.ties) reads: the intervals less what candidates share, which
    # blurs no difference between them. `unshared`: without the low-end widening that every CPU VM
    # of a contended profile shares (perf.cpu). GPU projections share the calibrated error of the
    # job's mean on every GPU and of each GPU's mean (perf.gpu_calibration): their error group (the
    # GPU's die, VMArrays.gpu_die; -1 for the rest) and the intervals against a projection
    # onto another GPU and onto the same one (the unshared intervals for the rest)
    unshared: Bounds
    error_group: np.ndarray
    against_other_gpu: Bounds
    against_same_gpu: Bounds

    def __len__(self) -> int:
        return int(self.vm_index.size)


def batch_grid(job: JobModel, request: PlanRequest) -> np.ndarray:
    """Global batches: the user's list, else powers of two in the job's allowed range."""
    low, high = job.batch_range()
    if request.batches is not None:
        grid = np.asarray(request.batches, float)
        outside = grid[(grid < low) | (grid > high)]
        if outside.size:
            why = (f"the recipe's steps hold for global batches {low:.0f}-{high:.0f} only"
                   if job.recipe is not None else f"the training set has {job.train_size} samples")
            raise PlanError(f"--batch {int(outside[0])} is outside {low:.0f}-{high:.0f}: {why}")
        return grid
    grid = 2.0 ** np.arange(0, int(np.floor(np.log2(high))) + 1)
    return grid[grid >= low]


def max_local_batch(vmx: VMArrays, job: JobModel, precision: str) -> np.ndarray:
    """Largest local batch per VM type: on a GPU the counted activations beside the persistent
    state (FP16 activations under AMP take half), none under BF16 on a GPU without BF16 tensor
    cores (PyTorch's bfloat16 autocast refuses it); on a CPU VM the profiled peak-memory line."""
    cpu_limit = job.max_local_batch(vmx.memory_bytes)
    if job.work is None:
        return cpu_limit
    gpu_limit = gpu_max_local_batch(job.work, vmx.memory_bytes, precision)
    if precision == "bf16":
        has_bf16 = np.array([vm_gpu >= 0 and vmx.gpu_specs[vm_gpu].has_bf16 for vm_gpu in vmx.gpu_index])
        gpu_limit = np.where(has_bf16, gpu_limit, 0)
    return np.where(vmx.is_gpu, gpu_limit, cpu_limit)


def enumerate_candidates(vmx: VMArrays, job: JobModel, request: PlanRequest) -> tuple[np.ndarray, ...]:
    """Index arrays (vm, nodes, global batch, spot) of the configurations that fit in memory, on
    VM types the task's torch can train on (VMArrays.trainable)."""
    max_nodes = int(request.max_workers)
    v, k, b, s = np.meshgrid(np.arange(len(vmx.vms)), np.arange(1, max_nodes + 1),
                             batch_grid(job, request), np.array([False, True]), indexing="ij")
    v, k, b, s = v.ravel(), k.ravel(), b.ravel(), s.ravel()
    workers = k * vmx.ranks[v]
    local = np.ceil(b / workers)
    keep = (workers <= request.max_workers) & (b >= workers) & vmx.trainable[v]
    keep &= local <= max_local_batch(vmx, job, request.precision)[v]
    if request.spot == "never":
        keep &= ~s
    elif request.spot == "only":
        keep &= s
    keep &= ~(s & np.isnan(vmx.spot_price[v]))
    return v[keep], k[keep], b[keep], s[keep]


def _gpu_compute_s(vmx: VMArrays, job: JobModel, v: np.ndarray, local: np.ndarray, precision: str,
                   params: RooflineParams) -> np.ndarray:
    """Roofline compute time per candidate, evaluated once per distinct (GPU type, host share, local
    batch). Each kernel's launch floor is the rank's host thread dispatching it (perf.roofline), so
    a rank with less than one vCPU (GCP's n1-standard-2 with 4 T4s: half a vCPU a rank) dispatches
    at that share of a core's rate: the floor over min(vCPUs per rank, 1)."""
    out = np.full(v.shape, np.nan)
    gpu = vmx.gpu_index[v]
    host_share = np.minimum(vmx.vcpus_per_rank[v], 1.0)
    if job.work is None:
        raise PlanError("the stored profile has no counted work for GPU projection: run "
                        "`thrifty plan --reprofile`")
    for g, spec in enumerate(vmx.gpu_specs):
        for share in np.unique(host_share[gpu == g]):
            rows = np.flatnonzero((gpu == g) & (host_share == share))
            batches, inverse = np.unique(local[rows], return_inverse=True)
            dispatch = replace(params, launch_s=params.launch_s / float(share))
            out[rows] = gpu_compute_time_s(job.work, spec, batches, precision, dispatch)[inverse]
    return out


def contended_low_factor(vmx: VMArrays, job: JobModel, v: np.ndarray, local: np.ndarray,
                         exempt: np.ndarray) -> np.ndarray:
    """Per candidate, what the low end of its step-time interval is multiplied by: a contended
    profile's T(p; 0) / T(p; s) on CPU VMs at p threads a rank (its serial fraction is an upper
    bound, perf.cpu; 1 at the profile's one thread), 1 elsewhere and where `exempt` (GPUs, measured
    configurations)."""
    factor = np.ones(v.shape)
    cpu = ~vmx.is_gpu[v] & ~exempt
    if np.any(cpu) and job.thread_scaling is not None:
        factor[cpu] = job.thread_scaling.low_end_factor(local[cpu], vmx.vcpus_per_rank[v][cpu])
    return factor


def predict_step_times(vmx: VMArrays, job: JobModel, v: np.ndarray, nodes: np.ndarray,
                       workers: np.ndarray, local: np.ndarray,
                       request: PlanRequest) -> tuple[np.ndarray, ...]:
    """(step time, low, high, measured, threads per rank, roofline share) per candidate, 90%
    intervals. The roofline share is d log T / d log T_gpu: how much of a relative error in the GPU's
    kernel time (the calibrated roofline's) moves the step; 0 where the step is not the roofline's
    (CPU VMs, the profiled machine, an input-bound GPU rank), below 1 by the all-reduce's part."""
    model = job.step_time
    measured = np.array([vm.instance_type == job.profiled_instance_type and not vm.is_gpu
                         for vm in vmx.vms])[v]
    params, calibration = load_params()
    is_gpu = vmx.is_gpu[v]
    # OMP threads per rank: the VM's vCPUs per rank (on the profiled machine too, its fit stretched
    # below; a profile without thread scaling keeps the profile's threads there)
    threads = np.maximum(np.floor(vmx.vcpus_per_rank[v]), 1.0)
    if job.thread_scaling is None:
        threads = np.where(measured, job.threads_per_rank, threads)
    compute = np.zeros(v.shape)  # the measured machine's entries use the fitted model instead
    roofline_bound = np.zeros(v.shape, bool)  # a GPU rank whose kernels, not its inputs, set its compute
    cpu = ~is_gpu & ~measured
    if np.any(cpu):
        if job.thread_scaling is None:
            raise PlanError("the stored profile has no thread-scaling measurement for CPU projection: "
                            "run `thrifty plan --reprofile`")
        # T = T_1thread(b) x (s + (1 - s) / vCPUs) / family factor (perf.cpu, Amdahl 1967), held
        # non-decreasing in the batch on one VM (perf.cpu.nondecreasing_in_batch)
        scaling = job.thread_scaling
        compute[cpu] = nondecreasing_in_batch(
            lambda b, p: job.single_thread_compute_s(b) * scaling.slowdown(b, p), local[cpu],
            vmx.vcpus_per_rank[v][cpu]) / vmx.cpu_factor[v][cpu]
    if np.any(is_gpu):
        # the input pipeline runs on the host's vCPUs beside the GPU (DataLoader-style workers
        # prefetching), so a step takes the longer of the two; cost per sample measured here, on
        # the rank's share of the vCPUs (half a vCPU a rank makes inputs at half a core's rate)
        inputs = job.input_s_per_sample * local[is_gpu] / vmx.vcpus_per_rank[v][is_gpu]
        kernels = _gpu_compute_s(vmx, job, v[is_gpu], local[is_gpu], request.precision, params)
        compute[is_gpu] = np.maximum(kernels, inputs)
        roofline_bound[is_gpu] = kernels >= inputs
    bandwidth = np.where(nodes > 1, vmx.inter_gbps[v],
                         vmx.intra_gbps[v] * np.where(is_gpu, params.allreduce_efficiency, 1.0))
    latency = np.where(nodes > 1, INTER_NODE_LATENCY_S, INTRA_NODE_LATENCY_S)
    network = ring_allreduce_time_s(workers, job.gradient_bytes, bandwidth, latency)
    g = np.where(is_gpu, params.overlap_g, model.params[PARAM_NAMES.index("overlap_g")])
    projected = (compute**g + network**g) ** (1.0 / g)
    roofline_share = np.zeros(v.shape)  # d log T / d log T_c = T_c^g / (T_c^g + T_n^g); a kernel takes >= its launch
    gb = g[roofline_bound]
    roofline_share[roofline_bound] = compute[roofline_bound] ** gb / projected[roofline_bound] ** gb
    # projections: the calibrated held-out error (GPU); on CPU VMs the stated family-factor
    # assumption, the serial fraction's sd (delta method, perf.cpu) and the measured times' launch spread
    sigma = np.full(v.shape, float(calibration["held_out_sigma_log"]))
    if np.any(cpu):
        if job.thread_scaling is None:
            raise PlanError("the job model has no thread scaling to project CPU VMs with: profile again")
        serial = job.thread_scaling.slowdown_sd_log(local[cpu], vmx.vcpus_per_rank[v][cpu])
        # the profiled one-rank compute extrapolated in local batch: as the fit's own interval widens
        # (perf.uncertainty, per doubling away from the nearest profiled local batch)
        batches = None if model.profiled is None else np.asarray(model.profiled, float)[:, 2]
        away: float | np.ndarray = 0.0
        if batches is not None:  # a few distinct local batches among many candidates: each once
            distinct, inverse = np.unique(local[cpu], return_inverse=True)
            away = doublings_away(np.column_stack([np.ones_like(batches), np.ones_like(batches), batches]),
                                  1.0, 1.0, distinct)[inverse]
        sigma[cpu] = np.sqrt(CPU_PROJECTION_SIGMA_LOG**2 + model.launch_sigma_log**2 + serial**2
                             + (EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING * away) ** 2)
    z = float(ndtri(0.95))
    step, high = projected, projected * np.exp(z * sigma)
    low = projected * np.exp(-z * sigma) * contended_low_factor(vmx, job, v, local, ~cpu)
    on = np.flatnonzero(measured)  # the profiled machine: the fitted model and its own interval
    if on.size:
        step[on], low[on], high[on] = profiled_machine_step(job, nodes[on], workers[on], local[on], threads[on])
    return step, np.minimum(low, step), np.maximum(high, step), measured, threads, roofline_share


def profiled_machine_step(job: JobModel, nodes: np.ndarray, workers: np.ndarray, local: np.ndarray,
                          threads: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step time, low, high) on the profiled machine: the fitted model and its interval, measured
    at the profile's threads per rank, at `threads` (all the VM's vCPUs: a plan that ran one thread
    a rank on an 8-vCPU profiled VM left seven idle). The compute is stretched by the measured
    thread scaling T(p) / T(p_profile) (perf.cpu), the interval widened by the serial fraction's sd
    (delta method) and, for a contended profile, its low end moved as on every projected CPU VM
    (perf.cpu.ThreadScaling.low_end_factor)."""
    model, scaling = job.step_time, job.thread_scaling
    fitted = model.predict(nodes, workers, local)
    low, high = model.interval(nodes, workers, local)
    if scaling is None:
        return fitted, low, high
    more = threads > job.threads_per_rank
    step = model.predict(nodes, workers, local, compute_slowdown=scaling.slowdown(local, threads)
                         / scaling.slowdown(local, job.threads_per_rank))
    serial = float(ndtri(0.95)) * scaling.slowdown_sd_log(local, threads) * more
    low = step * np.exp(-np.hypot(np.log(fitted / low), serial)) * np.where(
        more, scaling.low_end_factor(local, threads), 1.0)
    return step, low, step * np.exp(np.hypot(np.log(high / fitted), serial))


@dataclass(frozen=True)
class MeasuredStep:
    """A configuration's step time from search windows: the step-weighted mean and its 90% interval."""

    step_time_s: float
    low_s: float
    high_s: float
    windows: int
    steps: int


def measured_steps(probes: Iterable[dict]) -> dict[tuple[str, int, int, int], MeasuredStep]:
    """Stored search windows (Store.workload_probes rows) grouped by (instance type, nodes, workers,
    global batch); spot and on-demand windows pool (spot changes the price, not the step time).
    Windows without steps or a finite step time are skipped."""
    groups: dict[tuple[str, int, int, int], list[dict]] = {}
    for p in probes:
        if not p["steps"] or p["steps"] <= 0 or p["step_time_s"] is None or not math.isfinite(p["step_time_s"]):
            continue
        key = (str(p["instance_type"]), int(p["num_nodes"]), int(p["num_workers"]), int(p["global_batch"]))
        groups.setdefault(key, []).append(p)
    z = float(ndtri(0.95))
    out = {}
    for key, rows in groups.items():
        n = np.array([r["steps"] for r in rows], float)
        t = np.array([r["step_time_s"] for r in rows], float)
        se = np.array([np.nan if r["step_time_se_s"] is None else r["step_time_se_s"] for r in rows], float)
        w = n / n.sum()
        mean = float(w @ t)
        spread = float(np.sqrt(w @ (t - mean) ** 2))  # between windows: 0 for one window
        known = np.isfinite(se)
        sigma = float(np.hypot(np.sqrt(np.sum((w[known] * se[known]) ** 2)), spread))
        floor = SEARCH_FLOOR if known.any() else SEARCH_FLOOR_WITHOUT_SE
        half = max(z * sigma, floor * mean)
        out[key] = MeasuredStep(mean, max(mean - half, 0.0), mean + half, len(rows), int(n.sum()))
    return out


def vm_names(vmx: VMArrays) -> dict[str, list[int]]:
    """The VM indices a probe's instance-type name denotes. A VM's label (`gcp:n1-standard-4 (1x
    T4)`) names it; `cloud:type` and the plain type name name the type's VMs without attached GPUs
    (a GCP N1 machine type is the host alone), else its VMs if they are one hardware (AWS
    p3.2xlarge), else none (ambiguous). Several regions of one VM type are one hardware."""
    names: dict[str, set[int]] = {}
    by_type: dict[str, list[int]] = {}
    for i, vm in enumerate(vmx.vms):
        names.setdefault(vm.label, set()).add(i)
        for name in vm.type_names:
            by_type.setdefault(name, []).append(i)
    for name, indices in by_type.items():
        bare = [i for i in indices if not vmx.vms[i].is_gpu] or indices
        kinds = {(vmx.vms[i].cloud, vmx.vms[i].instance_type, (vmx.vms[i].accelerator or "").lower(),
                  vmx.vms[i].accelerator_count) for i in bare}
        if len(kinds) == 1:
            names.setdefault(name, set()).update(bare)
    return {name: sorted(indices) for name, indices in names.items()}


def apply_search_probes(vmx: VMArrays, probes: Iterable[dict], v: np.ndarray, nodes: np.ndarray,
                        workers: np.ndarray, batch: np.ndarray, step: np.ndarray, low: np.ndarray,
                        high: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Replace projected step times (in place) by what stored search windows measured on the same
    VM type, nodes, workers and global batch; the candidates replaced (a bool mask). The profiled
    machine keeps its fitted model; a window at a batch the plan does not enumerate matches nothing."""
    searched = np.zeros(v.shape, bool)
    table = measured_steps(probes)
    if not table:
        return searched
    names = vm_names(vmx)
    for (name, k, w, b), m in table.items():
        for i in names.get(name, ()):
            hit = (v == i) & (nodes == k) & (workers == w) & (batch == b) & ~measured
            step[hit], low[hit], high[hit] = m.step_time_s, m.low_s, m.high_s
            searched |= hit
    return searched


def evaluate(vmx: VMArrays, job: JobModel, request: PlanRequest,
             spot_model: LifetimeModel | None = None, probes: Iterable[dict] = ()) -> Candidates:
    """Predicted time and cost of every candidate. Spot candidates pay the expected overhead of
    preemptions under `spot_model` (default: the bathtub model fitted on Google's 2019 data) with
    the model-aware checkpoint schedule (transient.schedule): the job on n VMs stops when the
    first of them is preempted. `probes`: stored search windows of this workload
    (Store.workload_probes), which replace the projections of the configurations they ran."""
    v, nodes, batch, spot = enumerate_candidates(vmx, job, request)
    workers = nodes * vmx.ranks[v]
    local = np.ceil(batch / workers)  # the slowest rank holds the largest share
    step, step_low, step_high, measured, threads, roofline_share = predict_step_times(
        vmx, job, v, nodes, workers, local, request)
    searched = apply_search_probes(vmx, probes, v, nodes, workers, batch, step, step_low, step_high, measured)
    measured = measured | searched
    step_low_unshared = step_low / contended_low_factor(vmx, job, v, local, searched)
    error_group = np.where(vmx.is_gpu[v] & ~measured, vmx.gpu_die[v], -1)
    steps = job.steps(batch)
    steps_low, steps_high = job.steps_interval(batch)

    lifetime = spot_model if spot_model is not None else load_model()[1]
    startup = np.array([request.startup_s_for(vm.cloud) for vm in vmx.vms])[v]

    def wall_time(work, rows=slice(None)):
        """Start-up, work and, on spot, the expected restarts of `work` (the candidates at `rows`)."""
        out, on_spot = np.array(work, float), spot[rows]
        out[on_spot] = work[on_spot] * (1.0 + expected_overhead_fraction(lifetime, work[on_spot], nodes[rows][on_spot]))
        return startup[rows] + out
    price = np.where(spot, vmx.spot_price[v], vmx.price[v])
    time_s = wall_time(steps * step)
    time_low, time_high = wall_time(steps_low * step_low), wall_time(steps_high * step_high)
    dollars_per_s = nodes * price / 3600.0

    def billed(seconds, rows=slice(None)):
        return np.maximum(seconds, MINIMUM_BILLED_S) * dollars_per_s[rows]

    def bounds(base: Bounds, rows: np.ndarray, low: np.ndarray, high: np.ndarray) -> Bounds:
        """`base` with the step interval (low, high) at `rows` (the rest as in `base`: only they change)."""
        out = Bounds(*(np.array(a) for a in (base.time_low_s, base.time_high_s, base.cost_low_usd, base.cost_high_usd)))
        out.time_low_s[rows] = wall_time(steps_low[rows] * low[rows], rows)
        out.time_high_s[rows] = wall_time(steps_high[rows] * high[rows], rows)
        out.cost_low_usd[rows], out.cost_high_usd[rows] = billed(out.time_low_s[rows], rows), billed(out.time_high_s[rows], rows)
        return out
    full = Bounds(time_low, time_high, billed(time_low), billed(time_high))
    unshared = bounds(full, step_low_unshared != step_low, step_low_unshared, step_high)

    projected = error_group >= 0

    def against_gpu(name):
        """Bounds with a GPU projection's step interval less the error shared with `name`: the
        roofline's part of the step (roofline_share) at `name`'s deviation, the rest (all-reduce,
        inputs: the calibration's rows, single machines, did not measure them apart) at the whole."""
        calibration = load_params()[1]
        share = roofline_share[projected]
        half = float(ndtri(0.95)) * np.hypot(float(calibration[name]) * share,
                                             float(calibration["held_out_sigma_log"]) * (1.0 - share))
        low, high = step.copy(), step.copy()
        low[projected], high[projected] = step[projected] * np.exp(-half), step[projected] * np.exp(half)
        return bounds(unshared, projected, low, high)
    return Candidates(vm_index=v, nodes=nodes, workers=workers, global_batch=batch, local_batch=local,
                      spot=spot, price_per_hour=price, measured=measured, searched=searched,
                      threads_per_rank=threads,
                      step_time_s=step, steps=steps, time_s=time_s, time_low_s=time_low,
                      time_high_s=time_high, cost_usd=billed(time_s), cost_low_usd=full.cost_low_usd,
                      cost_high_usd=full.cost_high_usd, unshared=unshared,
                      error_group=error_group, against_other_gpu=against_gpu("other_gpu_sigma_log"),
                      against_same_gpu=against_gpu("same_gpu_sigma_log"))


def refusals(c: Candidates, request: PlanRequest) -> dict[str, np.ndarray]:
    """Per reason, the candidates it refuses (a candidate may fail several)."""
    reasons = {"no finite time or cost": ~(np.isfinite(c.time_s) & np.isfinite(c.cost_usd))}
    if request.deadline_s is not None:
        reasons["over the deadline"] = c.time_s > request.deadline_s
    if request.budget_usd is not None:
        reasons["over the budget"] = c.cost_usd > request.budget_usd
    return reasons



def require_any(mask: np.ndarray, what: str) -> None:
    if not np.any(mask):
        raise PlanError(f"no configuration {what}; relax the constraints or widen the filters")
