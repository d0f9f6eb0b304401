# SPDX-License-Identifier: MIT
"""The plan's log: its choice at INFO, at DEBUG how many candidates each constraint refused."""

import logging

import numpy as np

from thrifty.catalog import Hardware
from thrifty.catalog.vmtype import VMType
from thrifty.perf.cpu import ThreadScaling
from thrifty.perf.jobmodel import JobModel
from thrifty.perf.steptime import StepTimeModel
from thrifty.perf.work import StepWork
from thrifty.plan import PlanRequest, VMArrays, plan

VMS = [VMType("aws", "c5.2xlarge", "us-east-1", "", 8, 16, None, 0, 0.34, 0.1144),
       VMType("gcp", "e2-standard-2", "us-central1", "", 2, 8, None, 0, 0.067, 0.0201)]
WORK = StepWork(kind=np.array([0, 2]), flops_fixed=np.array([0.0, 1e6]), flops_per_sample=np.array([2e7, 1e5]),
                bytes_fixed=np.array([4e6, 4e6]), bytes_per_sample=np.array([1e5, 8e5]),
                outputs_fixed=np.array([0.0, 1e3]), outputs_per_sample=np.array([2e3, 2e4]), param_count=1_000_000,
                gradient_bytes=4e6, activation_bytes_per_sample=1e6, state_bytes=1e8)


def _job() -> JobModel:
    params = np.array([0.002, 1e-4, 1.1, 0.004, 5e-4, 0.004, 5e-4, 0.2, 1.5])
    return JobModel(step_time=StepTimeModel(params=params, sigma_log=0.05), noise_scale=100.0,
                    noise_scale_interval=(100.0, 100.0), s_min=1000.0, memory_base_bytes=1e8,
                    memory_per_sample_bytes=1e6, gradient_bytes=4e6, train_size=1000,
                    profiled_instance_type="e2-standard-2", threads_per_rank=1, calibration_batch=64,
                    calibration_steps=2000.0, work=WORK,
                    thread_scaling=ThreadScaling(np.array([16.0, 64.0]), np.array([0.3, 0.1]),
                                                 np.array([0.02, 0.02]), np.zeros(2, bool)),
                    input_s_per_sample=2e-5, profiled_max_local_batch=256)


def test_the_choice_at_info_and_the_refusals_at_debug(caplog):
    vmx, job = VMArrays.build(VMS, Hardware.load()), _job()
    everything = plan(vmx, job, PlanRequest(max_workers=4))
    deadline = float(np.median(everything.candidates.time_s[everything.feasible_mask]))
    with caplog.at_level(logging.DEBUG, logger="thrifty.plan"):
        result = plan(vmx, job, PlanRequest(max_workers=4, deadline_s=deadline))
    best = result.describe(result.best)
    chosen = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(chosen) == 1 and chosen[0].startswith(f"chose {best['cloud']}:{best['instance_type']} x ")
    assert f"global batch {best['global_batch']}" in chosen[0]
    refused = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    over = int((result.candidates.time_s > deadline).sum())
    assert over > 0 and len(refused) == 2
    assert refused[0].startswith(f"{over} of {result.feasible_mask.size} candidates")
    assert f"{over} over the deadline" in refused[0], refused[0]
    # and those meeting the deadline at their predicted time only (plan.optimizer._confident)
    at_point_only = int((~result.feasible_mask).sum()) - over
    assert at_point_only > 0 and refused[1].startswith(f"{at_point_only} more meet the constraints at their predicted")


def test_profile_progress_reaches_the_log_off_a_terminal_at_most_every_ten_seconds(monkeypatch, caplog):
    # mutation caught: progress to the spinner only (shown on a terminal alone: a plan whose
    # calibration could not reach its target ran 3 minutes without a line, -vv included)
    from types import SimpleNamespace

    import thrifty.cli.workload_job_model as jm
    import thrifty.pipeline as pipeline
    clock = iter([0.0, 0.0, 4.0, 11.0, 11.0, 15.0])
    monkeypatch.setattr(jm, "time", SimpleNamespace(monotonic=lambda: next(clock)))

    def fake_job_model(store, workload, *, on_progress, **_):
        for step in (5, 10, 15, 20):
            on_progress(f"calibration step {step}")
        return "model", False
    monkeypatch.setattr(pipeline, "job_model", fake_job_model)
    with caplog.at_level(logging.INFO, logger="thrifty.cli.workload_job_model"):
        assert jm.workload_job_model(None, "w.py") == ("model", False)
    assert [r.getMessage() for r in caplog.records] == ["calibration step 5", "calibration step 15"]
