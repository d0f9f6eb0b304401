# SPDX-License-Identifier: MIT
"""The GPUs the plan's torch can train on (catalog.torch_cuda): CUDA's binary compatibility rule,
the recorded build of PyPI's torch 2.13.0, and the plan and `model project` that follow from them."""

import numpy as np
import pytest

from thrifty.catalog import Hardware, load_catalog
from thrifty.catalog.torch_cuda import kernels_run_on, recorded_builds, task_torch_build
from thrifty.errors import PlanError
from thrifty.plan import PlanRequest, VMArrays
from thrifty.plan.candidates import enumerate_candidates
from thrifty.plan.optimizer import plan


def test_a_cubin_runs_on_its_major_at_its_minor_or_above_and_ptx_on_anything_newer():
    binaries = [(7, 5), (8, 0), (8, 6), (9, 0)]
    assert kernels_run_on((7, 5), binaries) and kernels_run_on((8, 9), binaries)  # T4; L4 on sm_86
    assert not kernels_run_on((7, 0), binaries) and not kernels_run_on((6, 1), binaries)  # V100, P4
    assert not kernels_run_on((10, 0), binaries)  # a newer major needs its own binary or PTX
    assert kernels_run_on((10, 0), binaries, ptx=[(9, 0)]) and not kernels_run_on((8, 6), [], ptx=[(9, 0)])


def test_pypis_torch_2_13_trains_on_turing_and_later_only():
    """Mutations caught: a build record that lists 7.0 (the V100 offered again), a rule that takes
    any arch at or below the GPU's (a V100 counted as able to run sm_75's binaries... or a P100
    sm_60 counted for sm_61 P4: both wrong ways round)."""
    build = recorded_builds()["2.13.0"]
    assert build.cuda == "13.0"
    gpus = Hardware.load().gpus
    runs = {name: build.runs_on(spec) for name, spec in gpus.items()}
    assert {name for name, ok in runs.items() if not ok} == {"v100", "v100-32gb", "p100", "p4"}
    assert task_torch_build("2.13.0") == build and task_torch_build("2.5.1") is None  # older: not judged
    # a newer torch than any recorded, or none installed (the task then installs the newest): at
    # least 2.13.0's build (a review: 2.13.1 had offered the V100 again; mutation caught: exact match)
    assert task_torch_build("2.13.1") == task_torch_build("2.14.0rc1") == build
    import thrifty.catalog.torch_cuda as torch_cuda
    original = torch_cuda.installed_torch
    try:
        torch_cuda.installed_torch = lambda: None
        assert task_torch_build() == build
    finally:
        torch_cuda.installed_torch = original


def test_the_plan_offers_no_gpu_its_task_cannot_train_on(profiled_db, monkeypatch):
    """Every candidate left is on a VM the task's torch trains on, and a catalog of V100 VMs alone
    is refused naming why. Mutations
    caught: enumerate_candidates without VMArrays.trainable (p3 plans offered); the record not
    consulted (every GPU trainable)."""
    from thrifty.pipeline import job_model
    from thrifty.store import Store
    monkeypatch.setattr("thrifty.catalog.torch_cuda.installed_torch", lambda: "2.13.0")
    with Store(profiled_db) as store:
        job, _ = job_model(store, "builtin:digits")
    hw = Hardware.load()
    vms = [vm for vm in load_catalog() if vm.cloud == "aws" and vm.is_gpu]
    vmx = VMArrays.build(vms, hw)
    assert {vms[i].accelerator for i in np.flatnonzero(~vmx.trainable)} == {"V100", "V100-32GB"}
    offered = {vms[i].accelerator for i in np.unique(enumerate_candidates(vmx, job, PlanRequest())[0])}
    assert "T4" in offered and not offered & {"V100", "V100-32GB"}
    v100 = [vm for vm in vms if vm.accelerator == "V100"]
    with pytest.raises(PlanError, match="V100 left out: torch 2.13.0's CUDA 13.0 build has kernels for compute "
                                        "capability 7.5 and later"):
        plan(VMArrays.build(v100, hw), job, PlanRequest())
