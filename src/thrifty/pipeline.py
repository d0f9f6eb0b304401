# SPDX-License-Identifier: MIT
"""Profile-or-reuse: run the profiler and the calibration run once, store them, rebuild the model.

This is the glue between train (measures, needs torch) and perf/plan (pure numpy), shared by the
CLI and the Python API.
"""

import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

from thrifty.errors import WorkloadError
from thrifty.perf.jobmodel import JobModel, build_job_model
from thrifty.perf.samples import round_means
from thrifty.perf.uncertainty import busy_sigma_log, launch_sigma_log, readings_busy, relative_spread
from thrifty.perf.work import COUNT_VERSION
from thrifty.store import Store
from thrifty.workloads.names import workload_key

log = logging.getLogger(__name__)

DEFAULT_WORKERS = (1, 2)
DEFAULT_LOCAL_BATCHES = (16, 32, 64, 128, 256)
DEFAULT_STEPS = 20
HEAVY_STEP_FLOPS = 5e10  # a profiled step costs at most about this (about 0.5 s on one core here)
HEAVY_STEPS = 6
CALIBRATION_MAX_STEPS = 20_000  # a calibration run that has not reached its target by then fails


def max_local_workers() -> int:
    """Local ranks allowed on this machine: its cores, and at least 4 for correctness runs."""
    return max(4, os.cpu_count() or 1)


@dataclass(frozen=True)
class ProfileSettings:
    """None for local_batches or steps: chosen from the workload (default_batches_and_steps)."""

    workers: Sequence[int] = DEFAULT_WORKERS
    local_batches: Sequence[int] | None = None
    steps: int | None = None
    calibrate: bool = True
    calibration_batch: int | None = None
    instance_type: str = "local"
    allow_busy: bool = False  # profile on a busy machine anyway (train.busy); intervals widen


def default_batches_and_steps(workload, workers: Sequence[int],
                              flops_per_sample: float) -> tuple[tuple[int, ...], int]:
    """Local batches to profile: the defaults that fit the training set (max workers x batch <= N),
    and for heavy models (ResNet-50: 24 GFLOP per sample) the largest powers of two whose step
    costs about HEAVY_STEP_FLOPS, measured over fewer steps."""
    largest = max(1, workload.train_size // max(workers))
    heavy = flops_per_sample * DEFAULT_LOCAL_BATCHES[0] > HEAVY_STEP_FLOPS
    if heavy:
        largest = min(largest, max(2, 2 ** int(math.log2(max(HEAVY_STEP_FLOPS / flops_per_sample, 1)))))
    fitting = tuple(b for b in DEFAULT_LOCAL_BATCHES if b <= largest)
    if len(fitting) < 3:  # fall back to the three largest powers of two that fit
        top = 2 ** int(math.log2(largest))
        fitting = tuple(sorted({max(1, top // 4), max(1, top // 2), top}))
    if len(fitting) < 2:  # a new user's pass: "give at least two different local batch sizes", unasked
        raise WorkloadError(f"the training set has {workload.train_size} sample(s): too few for two local batch "
                            f"sizes on {max(workers)} worker(s) (the step-time fit needs two); profile fewer "
                            "--workers or give the workload more data")
    return fitting, HEAVY_STEPS if heavy else DEFAULT_STEPS


def run_profile(workload_spec: str, settings: ProfileSettings,
                on_progress: Callable[[str], None] = lambda message: None):
    """Profile all settings, then train once to the target to calibrate S_min (unless the
    workload takes its steps from a published recipe, or calibration is off). Returns the
    Profile, with what planning needs from the workload itself in its meta, and the calibration."""
    from thrifty.train.busy import PROFILE_CORES, check_quiet, measure_quietly, read_before_profile
    from thrifty.train.config import global_batch_for
    from thrifty.train.dryrun import dry_run
    from thrifty.train.launcher import start_worker_server
    from thrifty.train.loop import train_to_target
    from thrifty.train.profiler import profile_workload, validate_profile_request
    from thrifty.workloads import load_workload
    from thrifty.workloads.workcount import count_workload
    # the options first, then the machine (a new user's pass: a busy refusal after 8-18 s, and only then
    # "give at least two different local batch sizes"), then the workload (the refusal had waited for it, 21 s)
    validate_profile_request(None, settings.workers, settings.local_batches, settings.steps, max_local_workers())
    before = read_before_profile(max(PROFILE_CORES, *settings.workers))  # before our own work loads the machine
    check_quiet(before, settings.allow_busy)
    start_worker_server()  # the profile's ranks fork from it; its imports overlap the dry run
    workload = load_workload(workload_spec)
    dry_run(workload)  # a broken workload fails here in seconds, not after the profile
    batches, steps = settings.local_batches, settings.steps
    work = count_workload(workload)
    if batches is None or steps is None:
        chosen = default_batches_and_steps(workload, settings.workers, work.summary()["flops_per_sample"])
        batches = chosen[0] if batches is None else batches
        steps = chosen[1] if steps is None else steps

    def measure():
        measured = profile_workload(workload_spec, settings.workers, batches,
                                    steps=steps, max_workers=max_local_workers(), step_work=work,
                                    on_setting=lambda n: on_progress(f"profiled {n} worker(s)"))
        runs = round_means([asdict(s) for s in measured.samples], measured.meta["steps"], measured.meta["rounds"])
        measured.meta["run_spread"] = relative_spread(runs)
        measured.meta["run_sigma_log"] = launch_sigma_log(runs)
        return measured, measured.meta["run_spread"]
    profile, readings = measure_quietly(measure, settings.allow_busy, before=lambda: before)
    # launch-to-launch spread: what the rounds differed by, and the load beside the profile
    profile.meta["machine"] = readings
    # the other tasks' load: the larger of the reading before and the mean beside the profile
    others = max(readings["before"]["others_load"], readings["during"]["others_load"] or 0.0)
    profile.meta["launch_sigma_log"] = math.hypot(profile.meta["run_sigma_log"], busy_sigma_log(
        others, readings["before"]["cores"]))
    # measured on a busy machine, the second thread's gain is an upper bound on s (perf.cpu)
    profile.meta["thread_scaling"]["contended"] = readings_busy(readings)
    profile.instance_type = settings.instance_type
    profile.meta.update(_workload_facts(workload))
    log.info("profiled %s: %d step samples at %s worker(s) x local batches %s; run spread %.1f%%, launch "
             "sigma_log %.3f", workload_spec, len(profile.samples), list(settings.workers), list(batches),
             100 * profile.meta["run_spread"], profile.meta["launch_sigma_log"])
    calibration = None
    if settings.calibrate and workload.recipe is None:
        batch = global_batch_for(settings.calibration_batch, workload)
        calibration = train_to_target(workload, [batch], max_steps=CALIBRATION_MAX_STEPS, eval_every=5,
                                      noise_every=1, on_eval=lambda step, metric: on_progress(
                                          f"calibration step {step:,} of at most {CALIBRATION_MAX_STEPS:,}: "
                                          f"{workload.metric_name} {metric:.3f}, target {workload.target_metric:g}"))
        if not calibration.reached_target:
            # what it reached, and the way around it (a new user's pass: 3 minutes, then no hint; and the
            # step times measured before it were thrown away)
            raise CalibrationMissed(
                f"calibration run did not reach {workload.metric_name} {workload.target_metric:g} in "
                f"{calibration.steps:,} steps (its last evaluation: {calibration.final_metric:.4g}): the profile's "
                "step times are stored without it, and plan --epochs E (the epochs it needs) plans from them; or "
                "lower the workload's target_metric and profile again", profile)
        log.info("calibration: %s %.3f at global batch %d after %d steps", workload.metric_name,
                 calibration.final_metric, batch, calibration.steps)
    return profile, calibration


class CalibrationMissed(WorkloadError):
    """The calibration run fell short of the target; `profile` holds the measurements made before it."""

    def __init__(self, message: str, profile) -> None:
        super().__init__(message)
        self.profile = profile


def _workload_facts(workload) -> dict:
    """What a plan needs from the workload beside the measurements, kept with the profile so that
    planning from a stored profile never loads the workload (nor torch)."""
    return {"default_global_batch": workload.default_global_batch,
            "recipe": None if workload.recipe is None else asdict(workload.recipe),
            "target_metric": workload.target_metric}


def profile_and_store(store: Store, workload_spec: str, settings: ProfileSettings,
                      on_progress: Callable[[str], None] = lambda message: None) -> int:
    try:
        profile, calibration = run_profile(workload_spec, settings, on_progress)
    except CalibrationMissed as missed:  # the measurements stand without it, as under --no-calibrate
        store.save_profile(workload_key(workload_spec), missed.profile, None, missed.profile.meta["target_metric"])
        raise
    return store.save_profile(workload_key(workload_spec), profile, calibration,
                              profile.meta["target_metric"])


def job_model(store: Store, workload_spec: str, *, settings: ProfileSettings = ProfileSettings(),
              reprofile: bool = False, epochs_to_target: float | None = None,
              on_progress: Callable[[str], None] = lambda message: None,
              step_time_only: bool = False) -> tuple[JobModel, bool]:
    """The fitted job model from the newest stored profile (profiling first if none or asked).

    With `epochs_to_target` (the user's epochs at the default batch) a new profile runs no
    calibration: the epochs are what it would have measured. With `step_time_only` (step times
    are all the caller projects) none runs either, and a stored profile without one serves.
    Returns (model, reused) where reused tells whether a stored profile was used as it was. A
    current stored profile is used without loading the workload; an older one is completed (work
    counted again, workload facts added) or, without thread-scaling measurements, profiled again.
    """
    key = workload_key(workload_spec)  # fails fast on an unknown name or a missing file
    stored = None if reprofile else store.latest_profile(key)
    if stored is not None and "serial_fraction_sd" not in stored[0].meta.get("thread_scaling", {}):
        stored = None  # a profile from before thread scaling with its uncertainty: profile again
    reused = stored is not None
    if stored is None:
        if epochs_to_target is not None or step_time_only:  # the user's epochs stand in for the
            settings = replace(settings, calibrate=False)            # calibration run, or no steps are needed
        profile_id = profile_and_store(store, workload_spec, settings, on_progress)
        stored = store.latest_profile(key)
        if stored is None:
            raise RuntimeError(f"profile {profile_id} was stored but cannot be read back")
    profile, calibration = stored
    meta = dict(profile.meta)
    if meta.get("step_work_version") != COUNT_VERSION or "default_global_batch" not in meta:
        from thrifty.workloads import load_workload
        from thrifty.workloads.workcount import count_workload  # written by an older thrifty: complete it
        workload = load_workload(workload_spec)
        meta.update(step_work=count_workload(workload).to_dict(), step_work_version=COUNT_VERSION,
                    **_workload_facts(workload))
        store.update_profile_meta(meta["profile_id"], meta)  # completed once, not on every plan
    model = build_job_model([asdict(s) for s in profile.samples], param_count=profile.param_count,
                            train_size=profile.train_size, calibration=calibration,
                            epochs_to_target=epochs_to_target,
                            epochs_batch=meta["default_global_batch"],
                            instance_type=profile.instance_type,
                            threads_per_rank=profile.threads_per_rank, meta=meta,
                            recipe=meta["recipe"], step_time_only=step_time_only)
    return model, reused
