# SPDX-License-Identifier: MIT
"""`thrifty md run --system nanoconfinement`: outputs, bit-identical resumes on Reference (in-process
kills, and a --steps run continued through the CLI), running to convergence or the cap, refusals of
bad parameters, and the bulk limit of a wide slit."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from md_jobs import OpenMMJob, run_openmm

from thrifty.errors import ThriftyError
from thrifty.md.nanoconfinement import NanoconfinementModel

SMALL = NanoconfinementModel(h_nm=2.0, c_molar=0.8, box_nm=2.4, cutoff_nm=1.0)  # 10 ions
HEADER = "z_nm,cation_molar,cation_err,anion_molar,anion_err\n"
OUTPUTS = ("profiles.csv", "density_profile.csv", "thermo.csv", "summary.json")


def _settings(**changes) -> OpenMMJob:
    base = dict(system="nanoconfinement", steps=300, chunk=20, model=SMALL, equilibration_steps=60,
                samples_per_block=3)
    return OpenMMJob(**(base | changes))


def _killed_and_resumed(tmp_path, settings, flaky, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    attempts = 0
    while True:
        attempts += 1
        try:
            summary = run_openmm(settings, tmp_path / "parts", flaky(tmp_path / "ck-parts", every=2,
                                                                  die_at=int(rng.integers(2, 6))))
            assert attempts >= 3
            return summary
        except flaky.Killed:
            continue


def _same_outputs(a, b) -> None:
    for name in OUTPUTS:
        assert (a / name).read_text() == (b / name).read_text(), name


def test_outputs_and_a_killed_and_resumed_run_end_bit_identical(tmp_path, flaky):
    whole = run_openmm(_settings(), tmp_path / "whole", flaky(tmp_path / "ck-whole", every=3, die_at=None))
    resumed = _killed_and_resumed(tmp_path, _settings(), flaky, seed=1)
    assert resumed == whole
    _same_outputs(tmp_path / "whole", tmp_path / "parts")
    text = (tmp_path / "whole" / "profiles.csv").read_text()
    assert text.startswith(HEADER) and len(text.splitlines()) == 1 + 40  # h = 2 nm in 0.05 nm bins
    rows = np.loadtxt(tmp_path / "whole" / "profiles.csv", delimiter=",", skiprows=1)
    assert rows[0, 0] == pytest.approx(-0.975) and rows[-1, 0] == pytest.approx(0.975)
    # every sample holds 5 ions of each kind: the profile integrates to 5 / (A N_A) mol/L nm
    assert rows[:, 1].sum() * 0.05 == pytest.approx(5 / (2.4 * 2.4 * 0.6022))
    # between identical walls the profiles are symmetrised (mutation caught: the job loop's
    # symmetric=layout.walls dropped: 12 samples of 5 ions leave the halves visibly unequal)
    np.testing.assert_allclose(rows[:, 1:], rows[::-1, 1:], rtol=1e-12, atol=0)
    assert whole["symmetrised"] is True
    assert whole["samples"] == (300 - 60) // 20 and whole["complete_blocks"] == 4 and whole["stopped"] == "steps"
    assert whole["bin_width_nm"] == pytest.approx(0.05)
    for ion in ("cation", "anion"):
        assert set(whole["densities"][ion]) == {"contact_molar", "contact_err", "peak_molar", "peak_err",
                                                 "peak_z_nm", "midplane_molar", "midplane_err"}
    assert (tmp_path / "whole" / "profiles.png").read_bytes().startswith(b"\x89PNG")


def test_without_steps_it_stops_when_converged_or_at_the_cap_and_resumes_identically(tmp_path, flaky):
    """Ten blocks of three 20-step samples after 60 steps: a loose tolerance converges at step 660."""
    loose = _settings(steps=None, tolerance_molar=50.0, cap_steps=2000)
    converged = run_openmm(loose, tmp_path / "whole", flaky(tmp_path / "ck-whole", every=3, die_at=None))
    assert converged["stopped"] == "converged" and converged["steps"] == 660 and converged["complete_blocks"] == 10
    assert converged["max_error_molar"] <= 50.0
    assert _killed_and_resumed(tmp_path, loose, flaky, seed=2) == converged
    _same_outputs(tmp_path / "whole", tmp_path / "parts")
    capped = run_openmm(_settings(steps=None, tolerance_molar=1e-6, cap_steps=200), tmp_path / "cap",
                    flaky(tmp_path / "ck-cap", every=3, die_at=None))
    assert capped["stopped"] == "cap" and capped["steps"] == 200 and capped["max_error_molar"] > 1e-6


def _md_run(tmp_path, out: str, *args: str, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-m", "thrifty.cli", "md", "run", "--system", "nanoconfinement",
                           "--h", "2", "--c", "0.8", "--box-nm", "2.4", "--cutoff-nm", "1", "--chunk", "20",
                           "--out", str(tmp_path / out), "--json", *args],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _in_process(md_run, tmp_path, out: str, *args: str) -> dict:
    code, stdout, err = md_run("--system", "nanoconfinement", "--h", "2", "--c", "0.8", "--box-nm", "2.4",
                               "--cutoff-nm", "1", "--chunk", "20", "--out", str(tmp_path / out), "--json", *args)
    assert code == 0, err
    return json.loads(stdout)


@pytest.mark.timeout(300)
def test_a_steps_run_continued_through_the_cli_matches_one_straight_run(tmp_path, md_run):
    # the straight run and the first part by the CLI in this process, the continuation by a real one
    # mutation caught (checked): a run without a checkpoint keeping the thermo rows of the run it replaces
    straight = _in_process(md_run, tmp_path, "straight", "--steps", "400", "--equilibrate", "60")
    first = _in_process(md_run, tmp_path, "parts", "--steps", "200", "--equilibrate", "60")
    assert first["steps"] == 200
    # a finished --out is replaced only with --force (tests/md/test_md_cli.py); this one left no checkpoint
    continued = _md_run(tmp_path, "parts", "--steps", "400", "--equilibrate", "60", "--force")
    assert continued == straight
    _same_outputs(tmp_path / "straight", tmp_path / "parts")


def test_a_resume_that_would_sample_differently_is_refused(tmp_path, flaky):
    """--steps 200 then --steps 400 with the default --equilibrate (N/5: 40, then 80) would splice two
    different profiles together."""
    run_openmm(_settings(steps=200, equilibration_steps=40), tmp_path / "out", flaky(tmp_path / "ck", every=1, die_at=None))
    with pytest.raises(ThriftyError, match=r"samples profiles after step 40 \(3 samples a block\), this run after "
                                           r"step 80 \(3 a block\): give --equilibrate 40"):
        run_openmm(_settings(steps=400, equilibration_steps=80), tmp_path / "out",
               flaky(tmp_path / "ck", every=1, die_at=None))


@pytest.mark.parametrize("args, fragment", [
    (["--h", "0.5"], "--h 0.5 nm is below the ion diameter 0.627 nm"),
    (["--c", "0"], "--c must be a positive number, got 0.0"),
    (["--c", "-0.5"], "--c must be a positive number, got -0.5"),
    (["--zp", "0"], "cation valency --zp 0 is out of range: give 1, 2 or 3"),
    (["--zp", "4"], "cation valency --zp 4 is out of range"),
    (["--zn", "-2"], "anion valency --zn -2 is not supported: give -1"),
    (["--d-plus", "0"], "--d-plus must be a positive number, got 0.0"),
    (["--d-minus", "-1"], "--d-minus must be a positive number, got -1.0"),
    (["--box-nm", "4"], "the box side 4.0 nm is too small for the cutoff 2.500 nm: give --box-nm of at least 5.000"),
    (["--c", "0.001", "--box-nm", "5", "--cutoff-nm", "1"], "is fewer than 1 anions"),
    (["--c", "1e9"], "is 361,320,000,000 ions, over the 10,000 the engines hold"),  # was a MemoryError
    (["--h", "1e6"], "is 135,495,000 ions, over the 10,000"),  # was 15 GB and growing
    (["--c", "5"], "packs the ions to 56% of the slit's volume, over 50%"),
    (["--equilibrate", "500", "--steps", "500"], "--equilibrate 500 leaves no steps to sample"),
    (["--equilibrate", "-5"], "--equilibrate must be 0 or more, got -5"),  # a pass: "leaves no steps"
    (["--tolerance", "0"], "--tolerance must be positive"),
    (["--relative-tolerance", "-0.1"], "--relative-tolerance must be at least 0 and below 1, got -0.1"),
    (["--relative-tolerance", "1"], "--relative-tolerance must be at least 0 and below 1, got 1.0"),
])
def test_bad_parameters_are_one_line_and_exit_2(run_cli, tmp_path, args, fragment):
    code, _, err = run_cli("md", "run", "--system", "nanoconfinement", "--out", tmp_path / "out", *args)
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), err
    assert fragment in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_nanoconfinement_options_are_refused_for_the_other_systems(run_cli, tmp_path):
    code, _, err = run_cli("md", "run", "--system", "ions", "--c", "1.0", "--h", "3.0", "--equilibrate", "10",
                           "--out", tmp_path / "out")
    # --h 3.0 is the default value, given: refused too (mutation caught: compared with the defaults)
    assert code == 2 and err.strip() == "error: --h, --c, --equilibrate apply to --system nanoconfinement only, not ions"
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(300)
def test_a_wide_slit_holds_the_bulk_concentration_in_its_middle(tmp_path):
    """h = 6 nm, 90 ions, 45 ps sampled on the CPU platform (about 10 s): the density over the central
    3 nm is within 15% of c for both ions. A loose check (a short run; the slit's middle also sits
    a little above c, as the walls exclude ions from their first ~0.3 nm)."""
    env = os.environ | {"OPENMM_CPU_THREADS": "1"}
    summary = _md_run(tmp_path, "bulk", "--h", "6", "--c", "0.5", "--box-nm", "5", "--cutoff-nm", "2.4",
                      "--steps", "10000", "--equilibrate", "1000", "--chunk", "50", "--platform", "CPU", env=env)
    assert summary["particles"] == 90
    rows = np.loadtxt(tmp_path / "bulk" / "profiles.csv", delimiter=",", skiprows=1)
    middle = np.abs(rows[:, 0]) < 1.5
    for column in (1, 3):
        assert rows[middle, column].mean() == pytest.approx(0.5, rel=0.15)
