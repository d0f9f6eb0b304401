"""End to end: real worker processes measure a workload; the store keeps it in one transaction."""

import sqlite3

import pytest

from thrifty.errors import WorkloadError
from thrifty.perf.jobmodel import build_job_model
from thrifty.store import Store
from thrifty.train.profiler import profile_workload
from thrifty.workloads.names import workload_key


@pytest.mark.timeout(600)  # 140 s in a loaded suite
def test_profile_two_processes_and_store(tmp_path):
    profile = profile_workload("builtin:digits", [1, 2], [8, 32], steps=10, warmup=1)
    assert {(s.num_workers, s.local_batch) for s in profile.samples} == {(1, 8), (1, 32), (2, 8), (2, 32)}
    two = [s for s in profile.samples if s.num_workers == 2]
    assert {s.rank for s in two} == {0, 1}
    assert all(s.sync_time_s > 0 and s.compute_time_s > 0 and s.step_time_s >= s.compute_time_s for s in two)
    assert all(s.big_batch == 2 * s.small_batch and s.small_grad_sq > 0 and s.big_grad_sq > 0 for s in two)
    assert all(s.peak_memory_bytes > 0 and s.samples_per_s > 0 for s in profile.samples)
    with Store(tmp_path / "t.db") as store:
        store.save_profile(workload_key("builtin:digits"), profile, None, 0.95)
        loaded, calibration = store.latest_profile(workload_key("builtin:digits"))
        assert len(loaded.samples) == len(profile.samples) and calibration is None
        model = build_job_model([s.__dict__ for s in loaded.samples], param_count=loaded.param_count,
                                train_size=loaded.train_size, calibration=None, epochs_to_target=3)
        assert model.s_min > 0 and model.noise_scale > 0 and model.step_time.n_samples == 4


def test_profile_rejects_bad_requests():
    with pytest.raises(WorkloadError, match="positive"):
        profile_workload("builtin:digits", [1], [0])
    with pytest.raises(WorkloadError, match="exceeds the training set"):
        profile_workload("builtin:digits", [2], [1000])
    with pytest.raises(WorkloadError, match="outside 1..8"):
        profile_workload("builtin:digits", [9], [8])


def test_store_rolls_back_a_failed_profile(tmp_path):
    class Broken:
        workload, param_count, train_size, threads_per_rank, instance_type, meta = "x", 1, 1, 1, "local", {}
        samples = [object()]  # not a StepSample: the insert fails midway
    with Store(tmp_path / "t.db") as store:
        store.save_decision("x", {}, {})  # something stored before: the file stays
        with pytest.raises(AttributeError):
            store.save_profile("x", Broken(), None, 0.9)
        assert store.count("profiles") == 0 and store.count("step_samples") == 0
    assert sqlite3.connect(tmp_path / "t.db").execute("SELECT COUNT(*) FROM profiles").fetchone()[0] == 0


def test_a_store_that_stored_nothing_leaves_no_file(tmp_path):
    with Store(tmp_path / "new" / "t.db") as store:
        assert store.latest_profile("x") is None
    assert not (tmp_path / "new").exists()
    with pytest.raises(RuntimeError), Store(tmp_path / "t.db"):
        raise RuntimeError("the command failed")
    assert not (tmp_path / "t.db").exists()
