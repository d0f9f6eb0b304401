"""Calibrate the GPU roofline (perf.roofline) on published training throughput, and measure how
well it predicts models and GPUs it was not fitted on (leave-one-model-out, leave-one-GPU-out).

Data (data/gpu/, sources in SOURCE.md): 150 published rows of samples/s per GPU (NVIDIA
DeepLearningExamples on DGX, Lambda's benchmarks, Gavel's measurements), the GPUs' peak rates,
and thrifty's counted work of each published model (published_work.json, counted from
thrifty.workloads.published). Fit: least squares on log throughput, parameters in log space.
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from thrifty.data import data_path
from thrifty.errors import ModelError
from thrifty.io import read_csv
from thrifty.perf.roofline import GPUSpec, RooflineParams, step_time_s
from thrifty.perf.work import StepWork

# Published GPU names -> spec rows (SOURCE.md "Joining throughput to specs"): Gavel's K80 is one
# GK210 die; its P100 and V100 form factors are unknown (PCIe and SXM2 assumed).
SPEC_ALIASES = {"K80": "K80 (one GK210 die)", "P100": "P100-PCIe-16GB", "V100": "V100-SXM2-16GB"}
# GPU-to-GPU bandwidth inside the published machines, Gbit/s: NVLink 2/3/4 (300/600/900 GB/s) in
# SXM systems (DGX-1, DGX A100, HGX H100), PCIe 3.0/4.0/5.0 x16 (16/32/64 GB/s) otherwise.
def _interconnect_gbps(spec_name: str) -> float:
    if "SXM2" in spec_name:
        return 2400.0
    if "SXM4" in spec_name:
        return 4800.0
    if "SXM5" in spec_name:
        return 7200.0
    if "H100-PCIe" in spec_name:
        return 512.0
    if spec_name.startswith(("A100-PCIe", "A10")):
        return 256.0
    return 128.0


def _precision(label: str) -> str:
    """The CSV's precision label -> roofline precision (SOURCE.md caveat 3: NGC enables TF32)."""
    if label.startswith("AMP"):
        return "amp"
    return "tf32" if "TF32" in label else "fp32"


@dataclass(frozen=True)
class PublishedRow:
    model_key: str
    gpu: str  # as published
    spec: GPUSpec
    gpus: int
    precision: str
    batch_per_gpu: float
    samples_per_s_per_gpu: float
    source: str


def _num(text: str) -> float:
    return float(text) if text.strip() else math.nan


def load_published(data_dir: Path | None = None) -> tuple[list[PublishedRow], dict[str, StepWork], dict]:
    """Rows usable for calibration, the counted work per model key, and what was left out why."""
    folder = Path(data_dir) if data_dir else data_path("gpu")
    work_json = json.loads((folder / "published_work.json").read_text())
    works = {k: StepWork.from_dict(v["step_work"]) for k, v in work_json["models"].items()}
    key_of = {(v["csv_model"], v["csv_input"]): k for k, v in work_json["models"].items()}
    specs = {r["gpu"]: GPUSpec(r["gpu"], _num(r["fp32_tflops"]), _num(r["tf32_tflops"]),
                               _num(r["fp16_tensor_tflops"]), _num(r["mem_bw_gbs"]),
                               _num(r["memory_gib"]), _interconnect_gbps(r["gpu"]))
             for r in read_csv(folder / "gpu_specs.csv", ModelError, "published GPU specs")}
    rows, left_out = [], {}
    for r in read_csv(folder / "gpu_training_throughput.csv", ModelError, "published GPU throughput"):
        key = key_of.get((r["model"], r["input"]))
        reason = None
        if key is None:
            reason = work_json.get("excluded", {}).get(r["model"], "model not counted")
        elif not r["batch_per_gpu"].strip():
            reason = "batch per GPU not published"
        if reason:
            left_out[reason] = left_out.get(reason, 0) + 1
            continue
        spec = specs[SPEC_ALIASES.get(r["gpu"], r["gpu"])]
        rows.append(PublishedRow(key, r["gpu"], spec, int(r["num_gpus"]), _precision(r["precision"]),
                                 float(r["batch_per_gpu"]), float(r["samples_per_s_per_gpu"]),
                                 r["source"].split(":")[0]))
    return rows, works, left_out


def predict_throughput(rows: Sequence[PublishedRow], works: dict[str, StepWork],
                       params: RooflineParams) -> np.ndarray:
    """Samples/s per GPU the roofline predicts for each published row."""
    out = []
    for row in rows:
        t = step_time_s(works[row.model_key], row.spec, [row.batch_per_gpu], row.gpus, row.precision, params)
        out.append(row.batch_per_gpu / float(np.ravel(t)[0]))
    return np.array(out)


# The per-kernel launch floor is not identifiable from the published rows (all run large batches,
# where kernels take far longer than a launch): held at 10 us, the order of PyTorch's eager
# per-operator overhead on the host (dispatch + cudaLaunchKernel), an assumption.
LAUNCH_S = 10e-6
# Bounds (physical ranges) of the fitted parameters (all but launch_s), in log space:
# efficiencies 1%..100%; f_half 1e6..1e12 FLOPs; all-reduce efficiency 1%..100%; g 1..10.
LOWER = np.log([0.01, 0.01, 1e6, 0.05, 0.01, 1.0])
UPPER = np.log([1.0, 1.0, 1e12, 1.0, 1.0, 10.0])
START = np.log([0.5, 0.4, 1e9, 0.6, 0.5, 2.0])


def fit_roofline(rows: Sequence[PublishedRow], works: dict[str, StepWork]) -> tuple[RooflineParams, float]:
    """Least squares on log(predicted / published) throughput; returns the parameters and the
    residual deviation of log throughput."""
    observed = np.log([r.samples_per_s_per_gpu for r in rows])
    multi = any(r.gpus > 1 for r in rows)

    def params_of(theta: np.ndarray) -> RooflineParams:
        values = np.exp(theta)
        if not multi:  # no multi-GPU rows: the all-reduce terms are not identifiable
            values[4], values[5] = np.exp(START[4]), np.exp(START[5])
        return RooflineParams(LAUNCH_S, *map(float, values))

    def residuals(theta: np.ndarray) -> np.ndarray:
        return np.log(predict_throughput(rows, works, params_of(theta))) - observed

    result = least_squares(residuals, START, bounds=(LOWER, UPPER), x_scale=1.0, method="trf")
    sigma = float(np.sqrt(np.mean(result.fun**2)))
    return params_of(result.x), sigma


def ape(predicted: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Absolute percentage error, in percent."""
    return np.abs(predicted - observed) / observed * 100.0


def held_out(rows: Sequence[PublishedRow], works: dict[str, StepWork], group: str) -> dict:
    """Leave-one-group-out predictions: for each model (group='model_key') or GPU (group='gpu'),
    fit on every other group and predict this one."""
    labels = sorted({getattr(r, group) for r in rows})
    predicted = np.full(len(rows), np.nan)
    for label in labels:
        train = [r for r in rows if getattr(r, group) != label]
        test_index = [i for i, r in enumerate(rows) if getattr(r, group) == label]
        params, _ = fit_roofline(train, works)
        predicted[test_index] = predict_throughput([rows[i] for i in test_index], works, params)
    observed = np.array([r.samples_per_s_per_gpu for r in rows])
    errors = ape(predicted, observed)
    per_group = {label: float(np.median([e for e, r in zip(errors, rows) if getattr(r, group) == label]))
                 for label in labels}
    return {"median_ape_percent": float(np.median(errors)), "per_group_median_ape_percent": per_group,
            "predicted": predicted.tolist(), "observed": observed.tolist()}
