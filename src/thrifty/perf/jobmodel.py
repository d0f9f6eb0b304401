# SPDX-License-Identifier: MIT
"""Everything the planner needs to know about one training job, fitted from a profile.

Step time (perf.steptime on the profiled machine; counted work (perf.work) projected by
perf.cpu and perf.roofline elsewhere) x steps to target = time to target. Steps come from the
noise scale and a calibration run (perf.efficiency), or from a published recipe (epochs at a batch
range). Memory per sample bounds the local batch; gradient bytes size the all-reduce.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from thrifty.errors import ModelError
from thrifty.perf.cpu import ThreadScaling
from thrifty.perf.efficiency import calibrate_s_min, steps_to_target
from thrifty.perf.noise import bootstrap_noise_scale_interval, noise_scale_from_samples
from thrifty.perf.samples import config_times
from thrifty.perf.steptime import StepTimeModel, compute_time, fit_step_time
from thrifty.perf.uncertainty import LAUNCH_SIGMA_LOG_FLOOR, readings_busy
from thrifty.perf.work import StepWork

BYTES_PER_PARAMETER = 4  # fp32 gradients


# Far more epochs than any published recipe (ImageNet 90, CIFAR 200-300): what `thrifty train`
# takes (train.config) and a plan's launch line may ask for; more is a typo.
MAX_TRAINED_EPOCHS = 100_000


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
    work: StepWork | None = None  # counted per-kernel work (for GPU projection)
    thread_scaling: ThreadScaling | None = None  # Amdahl serial fraction (for CPU projection)
    input_s_per_sample: float = 0.0  # measured cost of making one input sample (data loading)
    profiled_max_local_batch: float = float("inf")
    recipe: dict | None = None  # {"epochs", "batch", "min_batch", "max_batch", "source"}
    noise_scale_is_bound: bool = False  # noise_scale is the data's lower bound, not an estimate (_noise)
    epochs_stated: bool = False  # the steps are the user's --epochs, not a calibration run's to the target

    def steps(self, global_batch) -> np.ndarray:
        """Steps to target: recipe epochs x samples / B, or S(B) = S_min (1 + B_noise / B)."""
        if self.recipe is not None:
            return self.recipe["epochs"] * self.train_size / np.asarray(global_batch, float)
        return steps_to_target(global_batch, self.s_min, self.noise_scale)

    def steps_interval(self, global_batch) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on the steps from the noise scale's interval (S_min recalibrated at each end);
        a recipe's steps are taken as exact. The point estimate always lies inside."""
        point = self.steps(global_batch)
        if self.recipe is not None:
            return point, point
        # B_noise -> inf: S(B) -> S_obs B_obs / B, every batch as sample-efficient as the calibration's
        bounds = [steps_to_target(global_batch, calibrate_s_min(self.calibration_steps,
                                                                self.calibration_batch, bn), bn)
                  if bn < np.inf else self.calibration_steps * self.calibration_batch / np.asarray(global_batch, float)
                  for bn in self.noise_scale_interval if bn > 0]
        return np.minimum.reduce([point, *bounds]), np.maximum.reduce([point, *bounds])

    def batch_range(self) -> tuple[float, float]:
        """Global batches the planner may choose: the recipe's validated range, else 1..N."""
        if self.recipe is not None:
            return float(self.recipe["min_batch"]), float(min(self.recipe["max_batch"], self.train_size))
        return 1.0, float(self.train_size)

    def single_thread_compute_s(self, local_batch) -> np.ndarray:
        """Compute time of one rank at 1 thread alone on the profiled machine; beyond the largest
        profiled batch it grows linearly (per-sample cost of the largest batch), since the fitted
        exponent is not trusted outside the measured range."""
        b = np.asarray(local_batch, float)
        top = self.profiled_max_local_batch
        inside = compute_time(self.step_time.params, np.minimum(b, top))
        return np.where(b > top, inside * b / top, inside)

    def max_local_batch(self, memory_bytes) -> np.ndarray:
        """Largest local batch whose measured peak-memory line fits in `memory_bytes`."""
        room = np.asarray(memory_bytes, float) - self.memory_base_bytes
        return np.floor(room / max(self.memory_per_sample_bytes, 1.0))

    def summary(self) -> dict:
        return {"noise_scale": self.noise_scale, "noise_scale_interval": list(self.noise_scale_interval),
                "noise_scale_is_bound": self.noise_scale_is_bound,
                "s_min": self.s_min, "calibration_batch": self.calibration_batch,
                "calibration_steps": self.calibration_steps,
                "memory_per_sample_bytes": self.memory_per_sample_bytes,
                "gradient_bytes": self.gradient_bytes, "input_s_per_sample": self.input_s_per_sample,
                "recipe": self.recipe,
                "thread_scaling": None if self.thread_scaling is None else self.thread_scaling.to_dict(),
                "work": None if self.work is None else self.work.summary(),
                "step_time_model": self.step_time.to_dict()}


NoiseArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # (B_small, |g_small|^2, B_big, |g_big|^2)


def _noise_arrays(noise: Mapping[str, Sequence[float]]) -> NoiseArrays:
    small_b, small_sq, big_b, big_sq = (np.asarray(noise[k], float) for k in
                                        ("small_batch", "small_grad_sq", "big_batch", "big_grad_sq"))
    keep = np.all([np.isfinite(a) for a in (small_b, small_sq, big_b, big_sq)], axis=0) & (big_b > small_b)
    return small_b[keep], small_sq[keep], big_b[keep], big_sq[keep]


def noise_from_samples(samples: Sequence[Mapping]) -> dict[str, list[float]]:
    keys = ("small_batch", "small_grad_sq", "big_batch", "big_grad_sq")
    return {k: [float(s[k]) for s in samples] for k in keys}


def _noise(samples: Sequence[Mapping], calibration: Mapping | None) -> tuple[float, tuple[float, float], bool]:
    """Noise scale from the calibration run, else from the profile's steps (many ranks and steps
    average better than one process splitting small batches).

    Where the mean |G|^2 estimate is not positive (a job near its plateau: the gradient is lost in
    the noise at the measured batches, so B_noise = tr(Sigma) / |G|^2 is beyond them), the data
    still bound B_noise from below: the bootstrap's 5th percentile. That bound is the point
    estimate, the conservative end (it charges large batches the most steps), and the interval
    runs to infinity (every batch as sample-efficient as the calibration run's: steps_interval).
    The third value says whether the point is such a bound (a positive point estimate may have an
    infinite upper end too, where some resamples' |G|^2 is not positive)."""
    sources = [noise_from_samples(samples)]
    if calibration and calibration.get("noise", {}).get("big_batch"):
        sources.insert(0, calibration["noise"])
    noise_scale, lower_bounds = float("nan"), []
    for noise in sources:
        arrays = _noise_arrays(noise)
        if len(arrays[0]):
            noise_scale = noise_scale_from_samples(*arrays)
            low, high = bootstrap_noise_scale_interval(*arrays)
            if np.isfinite(noise_scale) and noise_scale > 0:
                return noise_scale, (max(low, 0.0), high), False
            if 0 < low < np.inf:
                lower_bounds.append(low)
    if lower_bounds:
        return lower_bounds[0], (lower_bounds[0], float("inf")), True
    workers = sorted({int(s["num_workers"]) for s in samples})
    raise ModelError(
        f"the profile ({', '.join(map(str, workers))} worker(s)) gives no positive gradient noise scale "
        f"({noise_scale:.3g}), nor a bound on it: run `thrifty plan --reprofile`, or `thrifty profile "
        "--workers 1,2,4 --steps 40` for more measurements")


def stored_thread_scaling(meta: Mapping) -> ThreadScaling | None:
    """A profile's thread scaling; one stored before the `contended` flag is contended when its
    machine readings said busy (perf.cpu)."""
    scaling = meta.get("thread_scaling")
    if scaling is None:
        return None
    if "contended" not in scaling:
        scaling = {**scaling, "contended": readings_busy(meta.get("machine", {}))}
    return ThreadScaling.from_dict(scaling)


def build_job_model(samples: Sequence[Mapping], *, param_count: int, train_size: int,
                    calibration: Mapping | None, epochs_to_target: float | None = None,
                    epochs_batch: int | None = None, instance_type: str = "local",
                    threads_per_rank: int = 1, meta: Mapping | None = None,
                    recipe: Mapping | None = None, step_time_only: bool = False) -> JobModel:
    """Fit step time, steps to target and memory from stored profile samples.

    Steps come from (first that applies) the user's `epochs_to_target` at `epochs_batch`, the
    workload's published `recipe`, or the calibration run with the measured noise scale. `meta`
    is the profile's: counted work, thread scaling, input cost and launch-to-launch spread (older
    profiles lack them). `step_time_only` (a projection of step times, `thrifty model project`)
    asks for no steps: a profile without a calibration run then serves, its steps left NaN.
    """
    configs = config_times(samples)
    if len(configs.step_time_s) == 0:
        raise ModelError("the profile holds no samples")
    meta = meta or {}
    step_model = fit_step_time(configs.num_nodes, configs.num_workers, configs.local_batch,
                               configs.step_time_s, configs.compute_time_s, configs.sync_time_s,
                               launch_sigma_log=float(meta.get("launch_sigma_log", LAUNCH_SIGMA_LOG_FLOOR)))
    if epochs_to_target is not None and not (np.isfinite(epochs_to_target) and epochs_to_target > 0):
        raise ModelError(f"epochs to target must be a positive number, got {epochs_to_target}")
    if epochs_to_target is not None and recipe is not None:
        recipe = {**recipe, "epochs": float(epochs_to_target), "source": "--epochs"}
        epochs_to_target = None
    noise_is_bound = False
    if recipe is not None:
        noise_scale, interval = float("nan"), (float("nan"), float("nan"))
        batch, steps = int(recipe["batch"]), float(recipe["epochs"]) * train_size / int(recipe["batch"])
        s_min = float("nan")
    elif step_time_only and epochs_to_target is None and calibration is None:
        noise_scale, interval = float("nan"), (float("nan"), float("nan"))
        batch, steps, s_min = int(epochs_batch or 64), float("nan"), float("nan")
    else:
        noise_scale, interval, noise_is_bound = _noise(samples, calibration)
        if epochs_to_target is not None:
            batch = int(epochs_batch or (calibration or {}).get("global_batch") or 64)
            steps = epochs_to_target * train_size / batch
        elif calibration is not None:
            batch, steps = int(calibration["global_batch"]), float(calibration["steps"])
        else:
            raise ModelError("no calibration run and no epochs given: cannot tell steps to target (give the "
                             "epochs to the target: plan's --epochs, serve's \"epochs\"; or run `thrifty profile` "
                             "for a profile with its calibration run)")
        s_min = calibrate_s_min(steps, batch, noise_scale)
    per_batch = np.polyfit(configs.local_batch, configs.peak_memory_bytes, 1) \
        if len(np.unique(configs.local_batch)) > 1 else np.array([0.0, configs.peak_memory_bytes[0]])
    return JobModel(step_time=step_model, noise_scale=noise_scale, noise_scale_interval=interval,
                    noise_scale_is_bound=noise_is_bound,
                    s_min=s_min,
                    memory_base_bytes=float(max(per_batch[1], 0.0)),
                    memory_per_sample_bytes=float(max(per_batch[0], 0.0)),
                    gradient_bytes=float(param_count * BYTES_PER_PARAMETER), train_size=train_size,
                    profiled_instance_type=instance_type, threads_per_rank=threads_per_rank,
                    calibration_batch=int(batch), calibration_steps=float(steps),
                    work=StepWork.from_dict(meta["step_work"]) if meta.get("step_work") else None,
                    thread_scaling=stored_thread_scaling(meta),
                    input_s_per_sample=float(meta.get("input_s_per_sample", 0.0)),
                    profiled_max_local_batch=float(configs.local_batch.max()),
                    recipe=None if recipe is None else dict(recipe),
                    epochs_stated=recipe is None and epochs_to_target is not None)
