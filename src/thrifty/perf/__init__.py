# SPDX-License-Identifier: MIT
"""Performance models (pure numpy/scipy): step time, gradient noise, time and cost to target."""

from thrifty.perf.efficiency import calibrate_s_min, examples_to_target, steps_to_target
from thrifty.perf.jobmodel import JobModel, build_job_model
from thrifty.perf.noise import NoiseScaleTracker, unbiased_norm_estimates
from thrifty.perf.steptime import StepTimeModel, fit_step_time, mdape

__all__ = ["JobModel", "NoiseScaleTracker", "StepTimeModel", "build_job_model", "calibrate_s_min",
           "examples_to_target", "fit_step_time", "mdape", "steps_to_target",
           "unbiased_norm_estimates"]
