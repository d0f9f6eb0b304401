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


def test_a_workload_file_imports_modules_beside_it_and_its_key_follows_them(tmp_path):
    """As `python job.py` would: its folder is on the path (a new user's job.py importing mynet.py beside
    it had failed with ModuleNotFoundError), and an edited mynet.py is profiled again (the key had hashed
    job.py alone, so a plan reused the old model's profile and resume folder). Mutations caught: the
    folder not put on sys.path; the key hashing the file alone; every .py beside it hashed."""
    from thrifty.workloads import workload_key
    (tmp_path / "mynet.py").write_text("from thrifty.workloads import load_workload\n"
                                       "def make_workload():\n    w = load_workload('builtin:tabular')\n"
                                       "    w.name = 'beside'\n    return w\n")
    (tmp_path / "job.py").write_text("from mynet import make_workload\n")
    (tmp_path / "notes.txt").write_text("not python\n")
    (tmp_path / "other_script.py").write_text("x = 1\n")  # beside it, imported by nothing
    assert load_workload(str(tmp_path / "job.py")).name == "beside"
    key = workload_key(str(tmp_path / "job.py"))
    (tmp_path / "notes.txt").write_text("edited, still not python\n")
    (tmp_path / "other_script.py").write_text("x = 2\n")
    assert workload_key(str(tmp_path / "job.py")) == key  # what it does not import is not its code
    (tmp_path / "mynet.py").write_text((tmp_path / "mynet.py").read_text() + "# wider\n")
    assert workload_key(str(tmp_path / "job.py")) != key


def test_numpy_numbers_are_workload_numbers_and_become_pythons(tmp_path):
    """np.float32 targets, np.int64 batches and np.bool_ directions are numbers as Python's are (a new
    user's pass: refused, "must be a finite number, got np.float32(0.9)"); they are stored as Python's
    (a np.int64 batch had failed later, in JSON). Mutation caught: isinstance on int/float/bool alone."""
    path = tmp_path / "job.py"
    path.write_text("import numpy as np\nfrom thrifty.workloads import load_workload\n"
                    "def make_workload():\n    w = load_workload('builtin:tabular')\n"
                    "    w.target_metric, w.default_global_batch = np.float32(0.9), np.int64(32)\n"
                    "    w.higher_is_better = np.bool_(True)\n    return w\n")
    w = load_workload(str(path))
    assert (type(w.target_metric), type(w.default_global_batch), type(w.higher_is_better)) == (float, int, bool)
    assert w.default_global_batch == 32 and w.target_metric == pytest.approx(0.9)


def test_modules_beside_a_workload_do_not_stand_in_for_thriftys_own_later_imports(tmp_path):
    """A sqlite3.py beside job.py (imported by nothing) had broken the ranks' store ("module 'sqlite3'
    has no attribute 'Cursor'"): the folder is first on the path only while the file imports. Mutation
    caught: the folder left at sys.path[0]."""
    import sys
    (tmp_path / "job.py").write_text("from thrifty.workloads import load_workload\n"
                                     "def make_workload():\n    return load_workload('builtin:tabular')\n")
    (tmp_path / "decimal.py").write_text("raise RuntimeError('the wrong decimal')\n")  # a stdlib name, not yet imported
    sys.modules.pop("decimal", None)
    load_workload(str(tmp_path / "job.py"))
    try:
        import decimal
        assert decimal.__file__ != str(tmp_path / "decimal.py")
        assert sys.path[-1] == str(tmp_path)  # still found by its own later imports
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize("field, value, message", [
    ("target_metric", "0.9", "target_metric must be a finite number"),
    ("target_metric", float("nan"), "target_metric must be a finite number"),
    ("default_global_batch", 0, "default_global_batch must be a positive whole number"),
    ("default_global_batch", 32.5, "default_global_batch must be a positive whole number"),
    ("name", 5, "name must be a string"),
    ("higher_is_better", "yes", "higher_is_better must be True or False"),
    ("loss_fn", None, "loss_fn must be callable"),
    ("eval_data", "TensorDataset(torch.zeros(0, 3), torch.zeros(0))", "the evaluation data set is empty"),
    ("target_metric", 95, "Workload.target_metric 95 can never be met"),
])
def test_a_workload_field_of_the_wrong_type_is_refused_in_one_line(tmp_path, field, value, message):
    """Mutation caught: the field checks dropped (a traceback after the profile's work, or a rank's
    TypeError mid-run, or a --global-batch nobody gave blamed)."""
    path = tmp_path / "job.py"
    code = value if field == "eval_data" else repr(value)
    path.write_text("import torch\nfrom torch.utils.data import TensorDataset\nfrom thrifty.workloads import load_workload\n"
                    f"def make_workload():\n    w = load_workload('builtin:tabular')\n"
                    f"    w.{field} = {code}\n    return w\n".replace("nan", "float('nan')"))
    with pytest.raises(WorkloadError, match=message if message.startswith(("the", "Workload")) else f"Workload.{message}") as raised:
        load_workload(str(path))
    assert "\n" not in str(raised.value)


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
