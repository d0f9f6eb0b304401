# SPDX-License-Identifier: MIT
"""`thrifty md run --system nanoconfinement --engine torch`: bit-identical resumes on the CPU in float64
(a run split in two, and one killed and resumed), refusals of a resume into another engine, dtype or
system, of --engine torch with another system, and profiles.csv with the OpenMM engine's columns and bins."""

import io
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from md_jobs import OpenMMJob, run_openmm, run_torch

from thrifty.errors import ThriftyError
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.transient.protocol import PREEMPTED_EXIT, JobCheckpoints, ready_file

torch.set_num_threads(1)

SMALL = NanoconfinementModel(h_nm=2.0, c_molar=0.8, box_nm=2.4, cutoff_nm=1.0)  # 10 ions
OUTPUTS = ("profiles.csv", "density_profile.csv", "thermo.csv", "summary.json")


def _settings(**changes) -> OpenMMJob:
    base = dict(system="nanoconfinement", steps=240, chunk=20, model=SMALL, equilibration_steps=40,
                samples_per_block=3)
    return OpenMMJob(**(base | changes))


def _same_outputs(a, b) -> None:
    for name in OUTPUTS:
        assert (a / name).read_text() == (b / name).read_text(), name
    with np.load(a / "final_state.npz") as x, np.load(b / "final_state.npz") as y:
        assert np.array_equal(x["positions"], y["positions"]) and np.array_equal(x["velocities"], y["velocities"])


def test_a_run_split_in_two_and_a_killed_run_end_bit_identical_to_a_straight_one(tmp_path, flaky):
    straight = run_torch(_settings(), tmp_path / "straight", flaky(tmp_path / "ck-straight", every=5, die_at=None))
    half = run_torch(_settings(steps=120), tmp_path / "split", flaky(tmp_path / "ck-split", every=1, die_at=None))
    assert half["steps"] == 120
    assert run_torch(_settings(), tmp_path / "split", flaky(tmp_path / "ck-split", every=1, die_at=None)) == straight
    _same_outputs(tmp_path / "straight", tmp_path / "split")
    attempts = 0
    while True:  # checkpoints every 2 chunks, dies at the 3rd chunk of each attempt
        attempts += 1
        try:
            killed = run_torch(_settings(), tmp_path / "killed", flaky(tmp_path / "ck-killed", every=2, die_at=3))
            break
        except flaky.Killed:
            continue
    assert attempts >= 3 and killed == straight
    _same_outputs(tmp_path / "straight", tmp_path / "killed")
    assert straight["samples"] == (240 - 40) // 20 and straight["stopped"] == "steps"
    assert straight["engine"] == "torch" and straight["dtype"] == "float64"


def test_the_job_loop_logs_its_start_its_resume_and_each_finished_replica(tmp_path, flaky, caplog):
    # mutation caught: a resume that is not said (or said at another step than it resumed from)
    import logging
    with caplog.at_level(logging.INFO, logger="thrifty.md.engines.job_loop"):
        run_torch(_settings(steps=80), tmp_path / "run", flaky(tmp_path / "ck", every=1, die_at=None))
        run_torch(_settings(steps=120), tmp_path / "run", flaky(tmp_path / "ck", every=1, die_at=None))
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith("started 1 replica(s) of nanoconfinement, at most 80 steps")
    assert said[1].startswith("replica 0 finished at step 80")
    assert said[2].startswith("resumed 1 replica(s) at step 80") and str(tmp_path / "ck") in said[2]
    assert said[3].startswith("replica 0 finished at step 120") and len(said) == 4


def test_a_float32_run_split_in_two_also_ends_bit_identical_on_the_cpu(tmp_path, flaky):
    straight = run_torch(_settings(), tmp_path / "straight", flaky(tmp_path / "ck-s", every=5, die_at=None), "float32")
    run_torch(_settings(steps=120), tmp_path / "split", flaky(tmp_path / "ck-p", every=1, die_at=None), "float32")
    assert run_torch(_settings(), tmp_path / "split", flaky(tmp_path / "ck-p", every=1, die_at=None),
                        "float32") == straight
    assert straight["dtype"] == "float32"
    _same_outputs(tmp_path / "straight", tmp_path / "split")


def _as_single_format(payload: bytes) -> bytes:
    """A batch-of-one checkpoint re-packed in the single-run format `md run --engine torch` wrote before
    a single run became a batch of one (thrifty-md-torch/1: the same fields, unbatched)."""
    with np.load(io.BytesIO(payload)) as data:
        [identity] = json.loads(str(data["identity"]))
        buffer = io.BytesIO()
        np.savez(buffer, format="thrifty-md-torch/1",
                 identity=json.dumps({k: v for k, v in identity.items() if k not in ("seed", "sampling")}),
                 seed=np.int64(identity["seed"]), step=data["step"], samples=data["samples"],
                 histogram=data["blocks_0"], positions=data["positions"][0], velocities=data["velocities"][0],
                 rng_state=data["rng_state"], sampling=json.dumps(identity["sampling"]))
    return buffer.getvalue()


def test_checkpoints_of_the_previous_single_run_format_resume_and_unknown_ones_are_refused(tmp_path, flaky):
    # mutations caught: the single-run format refused or misread (positions not unbatched, the
    # generator's state or the blocks lost: the resumed run differs from the straight one)
    straight = run_torch(_settings(), tmp_path / "straight", flaky(tmp_path / "ck-straight", every=5, die_at=None))
    run_torch(_settings(steps=120), tmp_path / "split", flaky(tmp_path / "ck-split", every=1, die_at=None))
    checkpoints = JobCheckpoints(tmp_path / "ck-old", handle_signals=False)
    checkpoints.save(_as_single_format(JobCheckpoints(tmp_path / "ck-split", handle_signals=False).latest()))
    assert run_torch(_settings(), tmp_path / "split", flaky(tmp_path / "ck-old", every=1, die_at=None)) == straight
    _same_outputs(tmp_path / "straight", tmp_path / "split")
    buffer = io.BytesIO()
    np.savez(buffer, format="thrifty-md-torch/0", step=np.int64(20))
    JobCheckpoints(tmp_path / "ck-unknown", handle_signals=False).save(buffer.getvalue())
    with pytest.raises(ThriftyError, match=r"was not written by this version of the torch engine "
                                           r"\(thrifty-md-torch/batch-1 or thrifty-md-torch/1\)"):
        run_torch(_settings(), tmp_path / "unknown", flaky(tmp_path / "ck-unknown", every=1, die_at=None))


def test_a_resume_into_another_dtype_engine_or_system_is_refused(tmp_path, flaky):
    run_torch(_settings(steps=60), tmp_path / "out", flaky(tmp_path / "ck", every=1, die_at=None))
    with pytest.raises(ThriftyError, match=r"is for --dtype float64, this run asked for --dtype float32: give "
                                           r"--dtype float64"):
        run_torch(_settings(steps=120), tmp_path / "out", flaky(tmp_path / "ck", every=1, die_at=None), "float32")
    with pytest.raises(ThriftyError, match=r"written by the torch engine \(--engine torch --dtype float64\); this run "
                                           r"is --engine openmm"):
        run_openmm(_settings(steps=120), tmp_path / "out", flaky(tmp_path / "ck", every=1, die_at=None))
    with pytest.raises(ThriftyError, match=r"is for system nanoconfinement \(10 particles, h_nm=2.0.*this run is "
                                           r"nanoconfinement \(8 particles\)"):
        run_torch(_settings(steps=120, model=NanoconfinementModel(h_nm=1.6, c_molar=0.8, box_nm=2.4,
                                                                     cutoff_nm=1.0)),
                     tmp_path / "out", flaky(tmp_path / "ck", every=1, die_at=None))
    run_openmm(_settings(steps=60), tmp_path / "omm", flaky(tmp_path / "ck-omm", every=1, die_at=None))
    with pytest.raises(ThriftyError, match=r"written by the OpenMM engine \(--engine openmm\); this run is "
                                           r"--engine torch: give --engine openmm"):
        run_torch(_settings(steps=120), tmp_path / "omm", flaky(tmp_path / "ck-omm", every=1, die_at=None))


def test_profiles_have_the_openmm_engines_columns_bins_and_summary_keys(tmp_path, flaky):
    omm = run_openmm(_settings(steps=100), tmp_path / "omm", flaky(tmp_path / "ck-omm", every=5, die_at=None))
    tch = run_torch(_settings(steps=100), tmp_path / "tch", flaky(tmp_path / "ck-tch", every=5, die_at=None))
    a = (tmp_path / "omm" / "profiles.csv").read_text().splitlines()
    b = (tmp_path / "tch" / "profiles.csv").read_text().splitlines()
    assert a[0] == b[0] == "z_nm,cation_molar,cation_err,anion_molar,anion_err"
    assert [row.split(",")[0] for row in a] == [row.split(",")[0] for row in b] and len(a) == 1 + 40
    assert set(omm) <= set(tch) and set(tch) - set(omm) == {"dtype", "replicas", "splitting", "threads"}
    splitting = tch["splitting"]  # the reach, alpha and k-vectors the run used, one per replica
    assert len(splitting["real_space_reach_nm"]) == len(splitting["k_vectors"]) == tch["replicas"] == 1
    assert splitting["alpha_per_nm"][0] > 0 and splitting["k_vectors"][0] > 0 and tch["threads"] >= 1
    assert set(omm["densities"]["cation"]) == set(tch["densities"]["cation"])
    assert tch["bin_width_nm"] == omm["bin_width_nm"] and tch["samples"] == omm["samples"]
    rows = np.loadtxt(tmp_path / "tch" / "profiles.csv", delimiter=",", skiprows=1)
    assert rows[:, 1].sum() * 0.05 == pytest.approx(5 / (2.4 * 2.4 * 0.6022))  # 5 cations in every sample
    assert (tmp_path / "tch" / "profiles.png").read_bytes().startswith(b"\x89PNG")
    thermo = (tmp_path / "tch" / "thermo.csv").read_text().splitlines()
    assert thermo[0] == (tmp_path / "omm" / "thermo.csv").read_text().splitlines()[0] and len(thermo) == 1 + 6


@pytest.mark.parametrize("args, fragment", [
    (["--system", "lj", "--engine", "torch"], "--engine torch runs --system nanoconfinement only, not lj"),
    (["--system", "ions", "--engine", "torch"], "--engine torch runs --system nanoconfinement only, not ions"),
    (["--system", "nanoconfinement", "--engine", "jax"], "unknown --engine 'jax'; choose openmm, torch"),
    (["--system", "nanoconfinement", "--engine", "torch", "--dtype", "float16"], "unknown --dtype 'float16'"),
    (["--system", "nanoconfinement", "--dtype", "float32"], "--dtype and --device apply to --engine torch"),
    (["--system", "nanoconfinement", "--engine", "torch", "--platform", "CPU"], "--platform applies to --engine openmm"),
    (["--system", "nanoconfinement", "--engine", "torch", "--platform", "Reference"], "--platform applies to --engine openmm"),
])
def test_bad_engine_options_are_refused_in_one_line(md_run, tmp_path, args, fragment):
    # mutation caught (checked): the --platform refusal removed (the torch run goes on at the default
    # system and length until the timeout fails it)
    code, _, err = md_run(*args, "--out", str(tmp_path / "out"))
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(300)  # a hang guard: torch starts slowly on a loaded machine
def test_the_cli_checkpoints_on_a_notice_resumes_bit_identically_and_refuses_openmm(tmp_path, md_run):
    """SIGTERM (the preemption notice of `thrifty run`) -> checkpoint -> exit 75, in a real CLI process;
    then the refusal and the resume, by the CLI in this process.
    Mutation caught (checked): the notice's handler not installed (SIGTERM ends the run: exit -15, not 75)."""
    # one torch thread: the default (the cores here) crawls on a loaded 2-core machine (md.torch_physics.threads)
    system = ["--system", "nanoconfinement", "--h", "2", "--c", "0.8", "--box-nm", "2.4", "--cutoff-nm", "1",
              "--chunk", "20", "--steps", "200", "--equilibrate", "40"]
    common = [*system, "--engine", "torch", "--threads", "1", "--json"]
    code, straight, err = md_run(*common, "--out", str(tmp_path / "straight"))
    assert code == 0, err
    ck = tmp_path / "parts" / "checkpoints"
    job = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "md", "run", *common, "--out", str(tmp_path / "parts")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready_file(ck, job.pid).exists():  # signal handlers installed (before torch is imported)
        assert job.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=120) == PREEMPTED_EXIT
    assert "checkpointed at step" in job.stderr.read()  # said without -v (it was an INFO record)
    assert len(list(ck.glob("ckpt-*.bin"))) == 1
    code, _, refused = md_run(*system, "--json", "--out", str(tmp_path / "parts"))  # the default --engine openmm
    assert code == 2 and "written by the torch engine" in refused
    assert len(refused.strip().splitlines()) == 1
    code, resumed, err = md_run(*common, "--out", str(tmp_path / "parts"))
    assert code == 0 and json.loads(resumed) == json.loads(straight), err
    _same_outputs(tmp_path / "straight", tmp_path / "parts")


def test_md_run_says_why_it_stopped_in_words(md_run, tmp_path):
    """The human summary names the stop rule, not its code ("steps (steps)" read as a stutter).
    Mutation caught: the summary printing the raw `stopped` value."""
    code, out, err = md_run("--engine", "torch", "--system", "nanoconfinement", "--h", "2", "--c", "0.8",
                            "--box-nm", "2.4", "--cutoff-nm", "1", "--steps", "40", "--chunk", "20", "--equilibrate",
                            "10", "--threads", "1", "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert " ".join(out.split()).startswith("nanoconfinement: 40 steps (as --steps asked), 10 ions, ")
