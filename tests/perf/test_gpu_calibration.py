"""The bundled roofline calibration (data/gpu/roofline_params.json, written by
benchmarks/bench_gpu_projection.py) is what a fresh fit on the bundled published data gives."""

import json

import numpy as np
import pytest

from thrifty.data import data_path
from thrifty.perf.gpu_calibration import fit_roofline, load_published, predict_throughput


def test_bundled_roofline_parameters_equal_a_fresh_fit():
    rows, works, _ = load_published()
    params, sigma = fit_roofline(rows, works)
    bundled = json.loads(data_path("gpu", "roofline_params.json").read_text())
    assert bundled["rows_used"] == len(rows)
    for name, value in params.to_dict().items():
        assert bundled["params"][name] == pytest.approx(value, rel=1e-6), name
    assert bundled["fit_sigma_log"] == pytest.approx(sigma, rel=1e-6)
    observed = np.array([r.samples_per_s_per_gpu for r in rows])
    in_sample = float(np.median(np.abs(predict_throughput(rows, works, params) - observed) / observed) * 100)
    assert bundled["median_ape_percent"]["in_sample"] == pytest.approx(in_sample, rel=1e-6)
