import json

import numpy as np
import pytest

from thrifty.errors import ModelError
from thrifty.perf.steptime import StepTimeModel, fit_step_time, mdape, predict_step_time

TRUE = np.array([0.002, 1e-4, 1.0, 0.004, 5e-4, 0.02, 2e-3, 0.1, 2.0])


def test_closed_forms():
    no_overlap = TRUE.copy()
    no_overlap[-1] = 1.0
    # g = 1: compute + network; n = 1: network is zero; across nodes uses the inter terms;
    # r ranks per node stretch compute by 1 + k (r - 1)
    assert predict_step_time(no_overlap, 1, 1, 100) == pytest.approx(0.002 + 0.01)
    assert predict_step_time(no_overlap, 1, 4, 100) == pytest.approx(0.012 * 1.3 + 0.004 + 2 * 5e-4)
    assert predict_step_time(no_overlap, 2, 4, 100) == pytest.approx(0.012 * 1.1 + 0.02 + 2 * 2e-3)
    assert predict_step_time(no_overlap, 4, 4, 100) == pytest.approx(0.012 + 0.02 + 2 * 2e-3)
    convex = no_overlap.copy()
    convex[2] = 1.5  # compute exponent p: a_c + b_c * b^p
    assert predict_step_time(convex, 1, 1, 100) == pytest.approx(0.002 + 1e-4 * 1000)
    near_max = TRUE.copy()
    near_max[-1] = 10.0
    t = predict_step_time(near_max, 4, 4, 100)
    assert max(0.012, 0.024) <= t <= 0.012 + 0.024
    assert t == pytest.approx((0.012**10 + 0.024**10) ** 0.1)


def _grid():
    nodes, workers, batch = np.meshgrid([1, 2, 4], [2, 4, 8], [16, 64, 256], indexing="ij")
    keep = workers >= nodes
    n, w, b = nodes[keep], workers[keep], batch[keep]
    n, w, b = np.append(n, [1, 1, 1]), np.append(w, [1, 1, 1]), np.append(b, [16, 64, 256])
    return n, w, b


@pytest.mark.parametrize("exponent", [0.8, 1.0, 1.3])
def test_fit_recovers_parameters_from_noiseless_samples(exponent):
    truth = TRUE.copy()
    truth[2] = exponent
    n, w, b = _grid()
    model = fit_step_time(n, w, b, predict_step_time(truth, n, w, b))
    assert model.fixed == []
    assert mdape(model.predict(n, w, b), predict_step_time(truth, n, w, b)) < 0.5
    assert model.predict(2, 16, 128) == pytest.approx(predict_step_time(truth, 2, 16, 128), rel=0.02)


def test_unidentifiable_parameters_are_fixed_and_intervals_cover():
    rng = np.random.default_rng(1)
    w = np.repeat([1, 2], 4)
    b = np.tile([16, 32, 64, 128], 2)
    n = np.ones_like(w)
    observed = predict_step_time(TRUE, n, w, b) * np.exp(rng.normal(0, 0.02, w.size))
    model = fit_step_time(n, w, b, observed)
    assert {"b_intra_s", "a_inter_s", "b_inter_s"} <= set(model.fixed)
    assert "contention_per_rank" not in model.fixed  # two ranks share the one node
    low, high = model.interval(n, w, b)
    assert np.all(low < model.predict(n, w, b)) and np.all(model.predict(n, w, b) < high)
    assert np.mean((low <= observed) & (observed <= high)) >= 0.75


def test_json_roundtrip_and_corrupt_files(tmp_path):
    n, w, b = _grid()
    model = fit_step_time(n, w, b, predict_step_time(TRUE, n, w, b))
    path = tmp_path / "m.json"
    model.save(path)
    again = StepTimeModel.load(path)
    assert np.allclose(again.predict(n, w, b), model.predict(n, w, b))
    path.write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        StepTimeModel.load(path)
    path.write_text(json.dumps({"kind": "thrifty.steptime", "params": {"a_compute_s": 1}}))
    with pytest.raises(ModelError, match="incomplete"):
        StepTimeModel.load(path)
    with pytest.raises(ModelError, match="not found"):
        StepTimeModel.load(tmp_path / "missing.json")


def test_version_one_model_files_load_without_contention(tmp_path):
    n, w, b = _grid()
    data = fit_step_time(n, w, b, predict_step_time(TRUE, n, w, b)).to_dict()
    del data["params"]["contention_per_rank"], data["params"]["compute_exponent"]
    data["version"] = 1
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data))
    params = StepTimeModel.load(path).params
    assert params[2] == 1.0 and params[7] == 0.0  # linear compute, no contention


@pytest.mark.parametrize("times, message", [([0.1, -1.0], "positive"), ([0.1, float("nan")], "positive")])
def test_fit_rejects_bad_samples(times, message):
    with pytest.raises(ModelError, match=message):
        fit_step_time([1, 1], [1, 1], [8, 16], times)


def test_two_batch_sizes_fix_the_exponent_at_linear():
    model = fit_step_time([1, 1, 1, 1], [1, 1, 2, 2], [8, 64, 8, 64], [0.01, 0.05, 0.02, 0.06])
    assert "compute_exponent" in model.fixed and model.params[2] == 1.0


def test_fit_needs_two_batch_sizes():
    with pytest.raises(ModelError, match="two different"):
        fit_step_time([1, 1], [1, 2], [8, 8], [0.1, 0.2])
