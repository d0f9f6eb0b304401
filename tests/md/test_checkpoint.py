# SPDX-License-Identifier: MIT
"""Resuming from a checkpoint that does not fit this run: one clear error before OpenMM sees it."""

import io
import json

import numpy as np
import pytest
from md_jobs import OpenMMJob

import thrifty.md.engines.openmm_engine
from thrifty.errors import ThriftyError
from thrifty.md.engines.openmm_systems import confined_ions, lennard_jones_fluid
from thrifty.transient.protocol import JobCheckpoints

LJ = OpenMMJob(system="lj", steps=100, chunk=50)


def test_another_system_is_refused_naming_both(run_job):
    run_job(LJ)
    with pytest.raises(ThriftyError, match=r"system lj \(216 particles, n_atoms=216.*this run is ions \(120 particles"):
        run_job(OpenMMJob(system="ions", steps=100, chunk=50))


def test_same_system_with_other_parameters_is_refused(run_job, monkeypatch):
    """Other wall separation, same 120 particles: OpenMM would load the checkpoint without a word."""
    run_job(OpenMMJob(system="ions", steps=100, chunk=50))
    monkeypatch.setattr(thrifty.md.engines.openmm_engine, "build", lambda name, seed, model: confined_ions(wall_separation_nm=3.5, seed=seed))
    with pytest.raises(ThriftyError, match=r"wall_separation_nm=3\.0.*this run is ions \(120 particles, n_pairs=60, "
                                           r"wall_separation_nm=3\.5"):
        run_job(OpenMMJob(system="ions", steps=200, chunk=50))
    monkeypatch.setattr(thrifty.md.engines.openmm_engine, "build", lambda name, seed, model: lennard_jones_fluid(n_atoms=125, seed=seed))
    with pytest.raises(ThriftyError, match=r"this run is lj \(125 particles, n_atoms=125"):
        run_job(LJ)


def test_other_platform_or_seed_is_refused(run_job):
    run_job(LJ)
    with pytest.raises(ThriftyError, match="made on OpenMM platform Reference.*give --platform Reference"):
        run_job(OpenMMJob(system="lj", steps=100, chunk=50, platform="CPU"))
    with pytest.raises(ThriftyError, match="for --seed 0, this run asked for --seed 1"):
        run_job(OpenMMJob(system="lj", steps=100, chunk=50, seed=1))


def test_a_checkpoint_past_the_target_is_refused_and_one_at_it_only_writes_outputs(tmp_path, run_job):
    first = run_job(OpenMMJob(system="lj", steps=200, chunk=50))
    with pytest.raises(ThriftyError, match=r"at step 200, beyond --steps 100: give --steps 200 or more"):
        run_job(LJ, out="other")
    assert not (tmp_path / "other").exists()  # refused before any output
    thermo = (tmp_path / "out" / "thermo.csv").read_text()
    again = run_job(OpenMMJob(system="lj", steps=200, chunk=50))  # a restart after the last checkpoint
    assert again == first and (tmp_path / "out" / "thermo.csv").read_text() == thermo


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_a_checkpoint_of_the_current_format_packed_field_by_field_resumes_bit_identically(tmp_path, run_job):
    """thrifty-md/3 as this and the previous version write it (the engine protocol changed nothing in it):
    mutation caught: a field renamed or dropped, or the format bumped, in md.engines.openmm_checkpoint."""
    whole = run_job(OpenMMJob(system="lj", steps=200, chunk=50), out="whole", ck="ck-whole")
    run_job(OpenMMJob(system="lj", steps=100, chunk=50), out="parts", ck="ck-parts")
    with np.load(io.BytesIO(JobCheckpoints(tmp_path / "ck-parts", handle_signals=False).latest())) as data:
        fields = {k: data[k] for k in ("identity", "platform", "seed", "step", "samples", "histogram", "openmm",
                                       "sampling")}
    JobCheckpoints(tmp_path / "ck-v3", handle_signals=False).save(_npz(format="thrifty-md/3", **fields))
    assert run_job(OpenMMJob(system="lj", steps=200, chunk=50), out="parts", ck="ck-v3") == whole


FIRST_FORMAT = _npz(step=np.int64(50), histogram=np.zeros((2, 60)), openmm=np.zeros(8, np.uint8))
OTHER_VERSION = _npz(format="thrifty-md/1", identity="{}", platform="Reference", seed=np.int64(0), step=np.int64(50),
                     samples=np.int64(1), histogram=np.zeros((1, 60)), openmm=np.zeros(8, np.uint8))


@pytest.mark.parametrize("payload", [b"not an archive", json.dumps({"step": 5}).encode(), FIRST_FORMAT, OTHER_VERSION],
                         ids=["bytes", "json", "first-format", "other-version"])
def test_a_checkpoint_from_something_else_is_refused(tmp_path, run_job, payload):
    JobCheckpoints(tmp_path / "ck", handle_signals=False).save(payload)
    with pytest.raises(ThriftyError, match="not written by this version of `thrifty md run`"):
        run_job(LJ)


def test_a_chunk_stepped_in_slices_ends_bit_identical_to_one_call(monkeypatch):
    """OpenMMEngine.advance steps a chunk in slices (so that Python's signal handlers run between
    them); on the Reference platform that must end where one integrator.step call ends. Mutation
    caught: a slice's steps counted twice or dropped (the states differ)."""
    from thrifty.md.engines.openmm_engine import OpenMMEngine
    engine = OpenMMEngine("lj", "Reference", 2)
    engine.start()
    start = engine.context.createCheckpoint()
    engine.context.getIntegrator().step(700)
    whole = engine.context.getState(getPositions=True, getVelocities=True)
    engine.context.loadCheckpoint(start)
    monkeypatch.setattr(thrifty.md.engines.openmm_engine, "SLICE_S", 1e-9)  # slices of one step, then a few
    engine.advance(700)
    sliced = engine.context.getState(getPositions=True, getVelocities=True)
    for read in ("getPositions", "getVelocities"):
        assert np.array_equal(getattr(whole, read)(asNumpy=True)._value, getattr(sliced, read)(asNumpy=True)._value)


def test_a_notice_during_the_last_chunk_finishes_the_run(tmp_path):
    """A notice (or md run's first Ctrl-C) that lands in the run's last chunk: the run has all its
    steps, so it writes its outputs instead of exiting 75 with nothing written (a new user's pass).
    Mutation caught: the notice checked without asking whether the run goes on (Preempted)."""
    from md_jobs import run_openmm
    job = OpenMMJob("lj", steps=300, chunk=100)
    checkpoints = JobCheckpoints(tmp_path / "ck", handle_signals=False)
    from thrifty.md.engines.job_loop import run_one
    from thrifty.md.engines.openmm_engine import OpenMMEngine

    def notice_at_the_end(step: int) -> None:
        if step == 300:
            checkpoints.take_notice()
    summary = run_one(OpenMMEngine("lj", "Reference", 0), job.settings, tmp_path / "out", checkpoints,
                      notice_at_the_end)
    assert summary["steps"] == 300 and (tmp_path / "out" / "density_profile.csv").exists()
    assert run_openmm(job, tmp_path / "again", JobCheckpoints(tmp_path / "ck2", handle_signals=False)) == summary


def test_a_checkpoint_whose_profile_bins_differ_is_refused_in_one_line(tmp_path, monkeypatch):
    """A checkpoint counted in other bins than the run (the ions system's bins moved to the walls'
    planes: an older thrifty's checkpoint has 60 where a run now has 70) is refused in one line. Mutation
    caught: no check (numpy's broadcast error, a traceback)."""
    from md_jobs import run_openmm

    import thrifty.md.profiles as profiles
    from thrifty.md.engines.job_loop import Preempted
    checkpoints = JobCheckpoints(tmp_path / "ck", handle_signals=False)
    job = OpenMMJob("lj", steps=400, chunk=100)
    from thrifty.md.engines.job_loop import run_one
    from thrifty.md.engines.openmm_engine import OpenMMEngine

    def stop_at(step: int) -> None:
        if step == 200:
            checkpoints.take_notice()
    with pytest.raises(Preempted):
        run_one(OpenMMEngine("lj", "Reference", 0), job.settings, tmp_path / "out", checkpoints, stop_at)
    monkeypatch.setattr(profiles, "PERIODIC_BINS", profiles.PERIODIC_BINS + 10)
    with pytest.raises(ThriftyError, match=r"counts its profiles in \d+ bins, this run in \d+ \(a checkpoint of an "
                                           r"older thrifty\): use another --checkpoint-dir"):
        run_openmm(job, tmp_path / "out", JobCheckpoints(tmp_path / "ck", handle_signals=False))
