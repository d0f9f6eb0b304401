"""Profile-or-reuse: run the profiler and the calibration run once, store them, rebuild the model.

This is the glue between train (measures, needs torch) and perf/plan (pure numpy), shared by the
CLI and the Python API.
"""

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from thrifty.errors import WorkloadError
from thrifty.perf.jobmodel import JobModel, build_job_model
from thrifty.store import Store
from thrifty.train.loop import TrainResult, train_to_target
from thrifty.train.profiler import Profile, profile_workload
from thrifty.workloads import canonical_name, load_workload

DEFAULT_WORKERS = (1, 2)
DEFAULT_LOCAL_BATCHES = (16, 32, 64, 128, 256)
DEFAULT_STEPS = 20


def max_local_workers() -> int:
    """Local ranks allowed on this machine: its cores, and at least 4 for correctness runs."""
    return max(4, os.cpu_count() or 1)


@dataclass(frozen=True)
class ProfileSettings:
    workers: Sequence[int] = DEFAULT_WORKERS
    local_batches: Sequence[int] = DEFAULT_LOCAL_BATCHES
    steps: int = DEFAULT_STEPS
    calibrate: bool = True
    calibration_batch: int | None = None
    instance_type: str = "local"


def run_profile(workload_spec: str, settings: ProfileSettings,
                on_progress: Callable[[str], None] = lambda message: None) -> tuple[Profile, TrainResult | None]:
    """Profile all settings, then (optionally) train once to the target to calibrate S_min."""
    workload = load_workload(workload_spec)
    profile = profile_workload(workload_spec, settings.workers, settings.local_batches,
                               steps=settings.steps, max_workers=max_local_workers(),
                               on_setting=lambda n: on_progress(f"profiled {n} worker(s)"))
    profile.instance_type = settings.instance_type
    calibration = None
    if settings.calibrate:
        batch = settings.calibration_batch or workload.default_global_batch
        calibration = train_to_target(workload, [batch], max_steps=20_000, eval_every=5, noise_every=1,
                                      on_eval=lambda step, metric: on_progress(
                                          f"calibration step {step}: {workload.metric_name} {metric:.3f}"))
        if not calibration.reached_target:
            raise WorkloadError(f"calibration run did not reach {workload.metric_name} "
                                f"{workload.target_metric} in {calibration.steps} steps")
    return profile, calibration


def profile_and_store(store: Store, workload_spec: str, settings: ProfileSettings,
                      on_progress: Callable[[str], None] = lambda message: None) -> int:
    profile, calibration = run_profile(workload_spec, settings, on_progress)
    target = load_workload(workload_spec).target_metric
    return store.save_profile(canonical_name(workload_spec), profile, calibration, target)


def job_model(store: Store, workload_spec: str, *, settings: ProfileSettings = ProfileSettings(),
              reprofile: bool = False, epochs_to_target: float | None = None,
              on_progress: Callable[[str], None] = lambda message: None) -> tuple[JobModel, bool]:
    """The fitted job model from the newest stored profile (profiling first if none or asked).

    Returns (model, reused) where reused tells whether a stored profile was used as it was.
    """
    key = canonical_name(workload_spec)
    stored = None if reprofile else store.latest_profile(key)
    reused = stored is not None
    if stored is None:
        load_workload(workload_spec)  # fail fast, before any process starts
        profile_and_store(store, workload_spec, settings, on_progress)
        stored = store.latest_profile(key)
    profile, calibration = stored  # type: ignore[misc]
    model = build_job_model([asdict(s) for s in profile.samples], param_count=profile.param_count,
                            train_size=profile.train_size, calibration=calibration,
                            epochs_to_target=epochs_to_target,
                            instance_type=profile.instance_type,
                            threads_per_rank=profile.threads_per_rank)
    return model, reused
