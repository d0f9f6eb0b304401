"""Everything the planner needs to know about one training job, fitted from a profile.

Step time (perf.steptime) x steps to target (perf.efficiency) = time to target; memory per sample
bounds the local batch; gradient bytes size the all-reduce on projected hardware.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from thrifty.errors import ModelError
from thrifty.perf.efficiency import calibrate_s_min
from thrifty.perf.noise import bootstrap_noise_scale_interval, noise_scale_from_samples
from thrifty.perf.samples import config_times
from thrifty.perf.steptime import StepTimeModel, fit_step_time

BYTES_PER_PARAMETER = 4  # fp32 gradients


@dataclass
class JobModel:
    step_time: StepTimeModel
    noise_scale: float
    noise_scale_interval: tuple[float, float]
    s_min: float
    memory_base_bytes: float
    memory_per_sample_bytes: float
    gradient_bytes: float
    train_size: int
    profiled_instance_type: str
    threads_per_rank: int
    calibration_batch: int
    calibration_steps: float

    def max_local_batch(self, memory_bytes) -> np.ndarray:
        """Largest local batch whose measured peak-memory line fits in `memory_bytes`."""
        room = np.asarray(memory_bytes, float) - self.memory_base_bytes
        return np.floor(room / max(self.memory_per_sample_bytes, 1.0))

    def summary(self) -> dict:
        return {"noise_scale": self.noise_scale, "noise_scale_interval": list(self.noise_scale_interval),
                "s_min": self.s_min, "calibration_batch": self.calibration_batch,
                "calibration_steps": self.calibration_steps,
                "memory_per_sample_bytes": self.memory_per_sample_bytes,
                "gradient_bytes": self.gradient_bytes, "step_time_model": self.step_time.to_dict()}


def _noise_arrays(noise: Mapping[str, Sequence[float]]) -> tuple[np.ndarray, ...]:
    arrays = tuple(np.asarray(noise[k], float) for k in
                   ("small_batch", "small_grad_sq", "big_batch", "big_grad_sq"))
    keep = np.all([np.isfinite(a) for a in arrays], axis=0) & (arrays[2] > arrays[0])
    return tuple(a[keep] for a in arrays)


def noise_from_samples(samples: Sequence[Mapping]) -> dict[str, list[float]]:
    keys = ("small_batch", "small_grad_sq", "big_batch", "big_grad_sq")
    return {k: [float(s[k]) for s in samples] for k in keys}


def build_job_model(samples: Sequence[Mapping], *, param_count: int, train_size: int,
                    calibration: Mapping | None, epochs_to_target: float | None = None,
                    epochs_batch: int | None = None, instance_type: str = "local",
                    threads_per_rank: int = 1) -> JobModel:
    """Fit step time, noise scale, S_min and memory from stored profile samples.

    S_min comes from the calibration run (steps it needed at its batch), or from the user's
    `epochs_to_target` at `epochs_batch` when given.
    """
    configs = config_times(samples)
    if len(configs.step_time_s) == 0:
        raise ModelError("the profile holds no samples")
    step_model = fit_step_time(configs.num_nodes, configs.num_workers, configs.local_batch,
                               configs.step_time_s, configs.compute_time_s, configs.sync_time_s)
    noise = calibration["noise"] if calibration and calibration.get("noise", {}).get("big_batch") \
        else noise_from_samples(samples)
    arrays = _noise_arrays(noise)
    if len(arrays[0]) == 0:
        raise ModelError("the profile has no usable gradient-noise measurements")
    noise_scale = noise_scale_from_samples(*arrays)
    if not np.isfinite(noise_scale) or noise_scale <= 0:
        raise ModelError(f"measured gradient noise scale is not positive ({noise_scale:.3g}); "
                         "profile with more steps")
    interval = bootstrap_noise_scale_interval(*arrays)
    if epochs_to_target is not None:
        if epochs_to_target <= 0:
            raise ModelError(f"epochs to target must be positive, got {epochs_to_target}")
        batch = epochs_batch or (calibration or {}).get("global_batch") or 64
        steps = epochs_to_target * train_size / batch
    elif calibration is not None:
        batch, steps = int(calibration["global_batch"]), float(calibration["steps"])
    else:
        raise ModelError("no calibration run and no --epochs given: cannot tell steps to target")
    per_batch = np.polyfit(configs.local_batch, configs.peak_memory_bytes, 1) \
        if len(np.unique(configs.local_batch)) > 1 else np.array([0.0, configs.peak_memory_bytes[0]])
    return JobModel(step_time=step_model, noise_scale=noise_scale,
                    noise_scale_interval=(max(interval[0], 0.0), interval[1]),
                    s_min=calibrate_s_min(steps, batch, noise_scale),
                    memory_base_bytes=float(max(per_batch[1], 0.0)),
                    memory_per_sample_bytes=float(max(per_batch[0], 0.0)),
                    gradient_bytes=float(param_count * BYTES_PER_PARAMETER), train_size=train_size,
                    profiled_instance_type=instance_type, threads_per_rank=threads_per_rank,
                    calibration_batch=int(batch), calibration_steps=float(steps))
