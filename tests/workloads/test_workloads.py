# SPDX-License-Identifier: MIT
import numpy as np
import pytest

from thrifty.errors import WorkloadError
from thrifty.train.loop import train_to_target
from thrifty.workloads import datasets, load_workload

# Steps within which each built-in reaches its target at its default batch (it takes 65 and 12 with
# torch 2.13): about 9 and 4 epochs, what keeps a calibration run short; seconds depend on the machine.
STEPS_TO_TARGET = {"digits": 200, "tabular": 60}


@pytest.mark.parametrize("name", sorted(STEPS_TO_TARGET))
def test_builtins_reach_their_target(name):
    """Mutation caught (tried): digits' learning rate divided by 10 (not reached in 200 steps)."""
    workload = load_workload(f"builtin:{name}")
    result = train_to_target(workload, [workload.default_global_batch], max_steps=STEPS_TO_TARGET[name])
    assert result.reached_target and result.final_metric >= workload.target_metric


def test_user_workload_file(tmp_path):
    path = tmp_path / "job.py"
    path.write_text("from thrifty.workloads import load_workload\n"
                    "def make_workload():\n    w = load_workload('builtin:tabular')\n"
                    "    w.name = 'mine'\n    return w\n")
    assert load_workload(str(path)).name == "mine"


@pytest.mark.parametrize("body, message", [
    ("def make_workload():\n    raise ValueError('no data')\n", "raised ValueError: no data"),
    ("x = 1\n", "no make_workload"),
    ("def make_workload():\n    return 3\n", "must return"),
    ("import nonexistent_module_xyz\n", "importing it failed"),
])
def test_bad_workload_files(tmp_path, body, message):
    path = tmp_path / "job.py"
    path.write_text(body)
    with pytest.raises(WorkloadError, match=message):
        load_workload(str(path))


def test_unknown_workloads():
    with pytest.raises(WorkloadError, match="unknown built-in"):
        load_workload("builtin:nope")
    with pytest.raises(WorkloadError, match="neither a built-in"):
        load_workload("missing.py")


def test_the_bundled_data_sets_are_the_published_tables():
    """Mutations caught: a truncated or re-ordered copy (counts, class balance and first rows are the
    UCI files'), the label column read as a feature, pixels not on the 0..16 scale."""
    pixels, digits = datasets.digits()
    assert pixels.shape == (1797, 8, 8) and pixels.min() == 0 and pixels.max() == 16
    assert np.bincount(digits).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert pixels[0, 0].tolist() == [0, 0, 5, 13, 9, 1, 0, 0] and digits[:3].tolist() == [0, 1, 2]
    features, classes = datasets.breast_cancer()
    assert features.shape == (569, 30) and np.bincount(classes).tolist() == [212, 357]  # malignant, benign
    assert features[0, :4].tolist() == [17.99, 10.38, 122.8, 1001.0]
