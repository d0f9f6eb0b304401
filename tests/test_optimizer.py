"""The vectorised planner agrees with a plain-Python brute force over the same small grid."""

import itertools
import math

import numpy as np
import pytest

from thrifty.catalog import Hardware
from thrifty.catalog.vmtype import VMType
from thrifty.errors import PlanError
from thrifty.perf.cpu import ThreadScaling
from thrifty.perf.jobmodel import JobModel
from thrifty.perf.roofline import compute_time_s as roofline_compute_s
from thrifty.perf.roofline import load_params
from thrifty.perf.steptime import StepTimeModel
from thrifty.perf.work import StepWork
from thrifty.plan import PlanRequest, VMArrays, plan
from thrifty.plan.candidates import GIB
from thrifty.plan.pareto import knee_index, pareto_front
from thrifty.transient.registry import load_model
from thrifty.transient.overhead import expected_overhead_fraction

VMS = [
    VMType("aws", "c5.2xlarge", "us-east-1", "", 8, 16, None, 0, 0.34, 0.1144),
    VMType("gcp", "n2-standard-4", "us-central1", "", 4, 16, None, 0, 0.19, None),
    VMType("aws", "g4dn.xlarge", "us-east-1", "", 4, 16, "T4", 1, 0.526, 0.2132),
]
# a_c, b_c, p, intra (a, b), inter (a, b), contention k (local machine only), overlap g
PARAMS = np.array([0.002, 1e-4, 1.1, 0.004, 5e-4, 0.004, 5e-4, 0.2, 1.5])


WORK = StepWork(kind=np.array([0, 1, 2]), flops_fixed=np.array([0.0, 0.0, 1e6]),
                flops_per_sample=np.array([2e7, 5e7, 1e5]), bytes_fixed=np.array([4e6, 1e6, 4e6]),
                bytes_per_sample=np.array([1e5, 4e5, 8e5]), param_count=1_000_000, gradient_bytes=4e6,
                activation_bytes_per_sample=2e7, state_bytes=1e9)
SCALING = ThreadScaling(np.array([16.0, 64.0]), np.array([0.3, 0.1]))
INPUT_S = 2e-5
STARTUP_S = 120.0


def _job() -> JobModel:
    return JobModel(step_time=StepTimeModel(params=PARAMS, sigma_log=0.05), noise_scale=100.0,
                    noise_scale_interval=(100.0, 100.0), s_min=1000.0, memory_base_bytes=1e8,
                    memory_per_sample_bytes=1e6, gradient_bytes=4e6, train_size=1000,
                    profiled_instance_type="local", threads_per_rank=1, calibration_batch=64,
                    calibration_steps=1000 * (1 + 100 / 64), work=WORK, thread_scaling=SCALING,
                    input_s_per_sample=INPUT_S, profiled_max_local_batch=256)


def _brute_force(request: PlanRequest):
    hw, job, rows = Hardware.load(), _job(), []
    for vm, nodes, exp, spot in itertools.product(VMS, range(1, request.max_workers + 1), range(11), (False, True)):
        batch = 2**exp
        workers = nodes * vm.ranks_per_node
        local = math.ceil(batch / workers)
        memory = hw.rank_memory_gib(vm) * GIB
        if workers > request.max_workers or batch > job.train_size or batch < workers:
            continue
        if vm.is_gpu:  # counted activations beside the state, in 90% of the GPU less 1 GiB
            fits = math.floor((memory * 0.9 - GIB - WORK.state_bytes) / WORK.activation_bytes_per_sample)
        else:  # the profiled peak-memory line
            fits = math.floor((memory - job.memory_base_bytes) / job.memory_per_sample_bytes)
        if local > fits:
            continue
        if spot and (vm.spot_price_per_hour is None or request.spot == "never"):
            continue
        if not spot and request.spot == "only":
            continue
        roofline = load_params()[0]
        if vm.is_gpu:  # counted work on the calibrated roofline, or the input pipeline
            compute = max(float(roofline_compute_s(WORK, hw.gpu(vm), [local], "fp32", roofline)[0]),
                          INPUT_S * local / vm.vcpus)  # input pipeline on the host's vCPUs, overlapped
            bw = hw.network_gbps(vm) if nodes > 1 else hw.intra_node_gbps(vm) * roofline.allreduce_efficiency
            g = roofline.overlap_g
        else:  # 1-thread compute x Amdahl over the VM's vCPUs / the family's speed
            serial = float(np.interp(math.log(local), np.log(SCALING.local_batch), SCALING.serial_fraction))
            inside = min(local, 256)  # beyond the largest profiled batch: linear in the batch
            one_thread = (PARAMS[0] + PARAMS[1] * inside ** PARAMS[2]) * local / inside
            compute = one_thread * (serial + (1 - serial) / vm.vcpus) / hw.cpu_factor(vm)
            bw = hw.network_gbps(vm) if nodes > 1 else hw.intra_node_gbps(vm)
            g = PARAMS[-1]
        lat = 30e-6 if nodes > 1 else 5e-6
        net = 0.0 if workers == 1 else 2 * (workers - 1) / workers * job.gradient_bytes * 8 / (bw * 1e9) + 2 * (workers - 1) * lat
        step = (compute**g + net**g) ** (1 / g)
        time = job.s_min * (1 + job.noise_scale / batch) * step
        if spot:
            time = time * (1 + float(expected_overhead_fraction(load_model()[1], time, nodes)))
        time += STARTUP_S
        price = vm.spot_price_per_hour if spot else vm.price_per_hour
        cost = max(time, 60.0) * nodes * price / 3600  # per-second billing, one-minute minimum
        if request.deadline_s and time > request.deadline_s or request.budget_usd and cost > request.budget_usd:
            continue
        rows.append((vm.instance_type, nodes, batch, spot, time, cost))
    return rows


@pytest.mark.parametrize("request_", [PlanRequest(max_workers=4, startup_s=STARTUP_S),
                                      PlanRequest(max_workers=6, objective="time", startup_s=STARTUP_S),
                                      PlanRequest(max_workers=4, deadline_s=300.0, spot="never",
                                                  startup_s=STARTUP_S)])
def test_matches_brute_force(request_):
    result = plan(VMArrays.build(VMS, Hardware.load()), _job(), request_)
    rows = _brute_force(request_)
    assert int(result.feasible_mask.sum()) == len(rows)
    # every feasible candidate's time and cost, not only the best one
    got_all = {(d["instance_type"], d["nodes"], d["global_batch"], d["spot"]):
               (d["predicted_time_s"], d["predicted_cost_usd"])
               for d in map(result.describe, np.flatnonzero(result.feasible_mask))}
    for row in rows:
        assert got_all[row[:4]] == pytest.approx(row[4:], rel=1e-9), row
    key = (lambda r: (r[5], r[4])) if request_.objective == "cost" else (lambda r: (r[4], r[5]))
    expected = min(rows, key=key)
    best = result.describe(result.best)
    assert (best["instance_type"], best["nodes"], best["global_batch"], best["spot"]) == expected[:4]
    assert best["predicted_time_s"] == pytest.approx(expected[4], rel=1e-9)
    assert best["predicted_cost_usd"] == pytest.approx(expected[5], rel=1e-9)
    front = {(r[0], r[1], r[2], r[3]) for r in rows
             if not any(o[4] <= r[4] and o[5] <= r[5] and (o[4] < r[4] or o[5] < r[5]) for o in rows)}
    got = {(d["instance_type"], d["nodes"], d["global_batch"], d["spot"])
           for d in map(result.describe, result.front)}
    assert got == front


def test_infeasible_constraints_raise():
    with pytest.raises(PlanError, match="deadline and budget"):
        plan(VMArrays.build(VMS, Hardware.load()), _job(), PlanRequest(deadline_s=1e-3))


def test_pareto_and_knee():
    t = np.array([1.0, 2.0, 3.0, 4.0, 2.5])
    c = np.array([10.0, 3.0, 2.5, 2.4, 5.0])
    assert list(pareto_front(t, c)) == [0, 1, 2, 3]
    assert knee_index(t[:4], c[:4]) == 1
