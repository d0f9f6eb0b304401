# SPDX-License-Identifier: MIT
"""OpenMM jobs: outputs, and bit-identical resumes on the Reference platform (in-process kills at
random chunks, and real SIGKILL/SIGTERM preemptions through the runner)."""

import io
import json
import sys

import numpy as np
import pytest
from md_jobs import OpenMMJob, run_openmm

from thrifty.transient.runner import Runner


def _state(out) -> dict:
    with np.load(out / "final_state.npz") as data:
        return {k: data[k].copy() for k in data.files}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("system", ["ions", "lj"])
def test_killed_and_resumed_runs_end_bit_identical(tmp_path, system, flaky):
    settings = OpenMMJob(system=system, steps=600, chunk=50)
    whole = run_openmm(settings, tmp_path / "whole", flaky(tmp_path / "ck-whole", every=3, die_at=None))
    rng = np.random.default_rng(1)
    attempts = 0
    while True:
        attempts += 1
        try:
            resumed = run_openmm(settings, tmp_path / "parts",
                             flaky(tmp_path / "ck-parts", every=2, die_at=int(rng.integers(2, 6))))
            break
        except flaky.Killed:
            continue
    assert attempts >= 3
    assert resumed["state_sha256"] == whole["state_sha256"]
    a, b = _state(tmp_path / "whole"), _state(tmp_path / "parts")
    assert all(np.array_equal(a[k], b[k]) for k in a)
    for name in ("density_profile.csv", "thermo.csv"):  # thermo.csv: rows past a checkpoint were cut on resume
        assert (tmp_path / "parts" / name).read_text() == (tmp_path / "whole" / name).read_text(), name
    assert len((tmp_path / "whole" / "thermo.csv").read_text().splitlines()) == 1 + 1 + 600 // 50


def test_ion_density_profile_stays_between_the_walls(tmp_path, run_job):
    run_job(OpenMMJob(system="ions", steps=300, chunk=50), out="out")
    assert (tmp_path / "out" / "density_profile.csv").read_text().startswith("z_nm,cation_per_nm3,anion_per_nm3\n")
    rows = np.loadtxt(tmp_path / "out" / "density_profile.csv", delimiter=",", skiprows=1)
    assert rows.shape == (70, 3)  # the walls' planes 1.25-4.75 nm, in 0.05 nm bins
    assert rows[0, 1] == 0 and rows[-1, 1] == 0  # no ion inside a wall
    # every ion is counted: a species' density over the bins times the box's area is its 60 ions (a new
    # user's pass: the nominal slit 1.5-4.5 nm held 58.4 of 60 cations; mutation caught: that range)
    area = 2 * 60 / (3.0 * 1.2)  # openmm_systems.confined_ions: about 1 M in the 3 nm slit
    assert rows[:, 1:].sum(axis=0) * (rows[1, 0] - rows[0, 0]) * area == pytest.approx([60, 60], rel=1e-9)


@pytest.mark.timeout(400)
def test_fault_injection_with_real_processes(tmp_path, scripted_lifetimes):
    command = [sys.executable, "-m", "thrifty.cli", "md", "run", "--steps", "1500", "--chunk", "50", "--json"]
    reference = Runner([*command, "--out", str(tmp_path / "ref")], tmp_path / "ck-ref").run()
    assert reference.exit_code == 0
    # Two VMs that each live for 25% of an undisturbed run (one warned a quarter of its life before
    # the end, one killed outright), then one that lives on: the job is preempted exactly twice
    # however slow this machine gets, and unless it runs twice as fast as during the reference (a
    # loaded suite's neighbours gone), since two lives would then hold the whole run and a restart.
    life_s = 0.25 * reference.wall_s
    runner = Runner([*command, "--out", str(tmp_path / "inj")], tmp_path / "ck-inj", intervals_s=[0.5],
                    notice_s=0.25 * life_s, lifetimes=scripted_lifetimes([life_s, life_s, float("inf")]), kill="mixed",
                    seed=2, timeout_s=350)
    report = runner.run()
    assert report.exit_code == 0 and report.preemptions == 2 and report.checkpoints >= 2
    ref = json.loads((tmp_path / "ref" / "summary.json").read_text())
    inj = json.loads((tmp_path / "inj" / "summary.json").read_text())
    assert inj["state_sha256"] == ref["state_sha256"]
    assert (tmp_path / "inj" / "thermo.csv").read_text() == (tmp_path / "ref" / "thermo.csv").read_text()


def test_lj_profile_names_its_one_species_and_averages_over_the_samples_taken(tmp_path, run_job):
    """120 steps in chunks of 50 are three samples (50, 100, 120): the periodic box holds all 216 atoms
    in every one, so the profile integrates to 216 (not 324, as dividing by 120 // 50 gave)."""
    run_job(OpenMMJob(system="lj", steps=120, chunk=50))
    text = (tmp_path / "out" / "density_profile.csv").read_text()
    assert text.startswith("z_nm,particle_per_nm3\n")
    rows = np.loadtxt(io.StringIO(text), delimiter=",", skiprows=1)
    box_nm = (216 / 0.8) ** (1 / 3) * 0.34
    assert rows.shape == (60, 2)
    assert rows[:, 1].sum() * box_nm ** 3 / 60 == pytest.approx(216, rel=1e-4)
