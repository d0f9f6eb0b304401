import pytest

from thrifty.errors import WorkloadError
from thrifty.train.loop import train_to_target
from thrifty.workloads import load_workload


@pytest.mark.parametrize("name", ["digits", "tabular"])
def test_builtins_reach_their_target(name):
    workload = load_workload(f"builtin:{name}")
    result = train_to_target(workload, [workload.default_global_batch], max_steps=2000)
    assert result.reached_target and result.final_metric >= workload.target_metric
    assert result.wall_time_s < 60


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
