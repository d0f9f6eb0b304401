# SPDX-License-Identifier: MIT
"""`thrifty md run`: refusals (one line on stderr, exit code 2, nothing left behind, no simulation), and
what a run records (params.json, its parameters in summary.json, one JSON document on stdout)."""

import json
import subprocess
import sys

import pytest
from md_jobs import OpenMMJob

from thrifty.errors import ThriftyError
from thrifty.md.engines.openmm_systems import available_platforms
from thrifty.md.runs import read_run


def _one_line_error(code: int, err: str, *fragments: str) -> None:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("platform, fragment", [("CUDA", "CUDA is not available here"),
                                                ("OpenCL", "OpenCL is not available here"),
                                                ("Metal", "choose Reference, CPU, CUDA, OpenCL")])
def test_platform_unknown_or_unavailable(run_cli, tmp_path, platform, fragment):
    if platform in available_platforms():
        pytest.skip(f"this OpenMM has {platform}")
    code, _, err = run_cli("md", "run", "--platform", platform, "--out", tmp_path / "out")
    _one_line_error(code, err, fragment)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option", ["--out", "--checkpoint-dir"])
@pytest.mark.parametrize("where", ["under-a-file", "a-file", "proc"])
def test_unwritable_output_folders_fail_before_any_work(run_cli, tmp_path, option, where):
    (tmp_path / "file").write_text("keep")
    bad = {"under-a-file": tmp_path / "file" / "md", "a-file": tmp_path / "file", "proc": "/proc/thrifty-md"}[where]
    folders = {"--out": tmp_path / "out", "--checkpoint-dir": tmp_path / "ck", option: bad}
    code, _, err = run_cli("md", "run", "--steps", "100000000", *(str(x) for kv in folders.items() for x in kv))
    reason = ("no file can be created in /proc (No such file or directory)" if where == "proc"
              else f"{tmp_path / 'file'} is a file, not a folder")
    _one_line_error(code, err, f"cannot write to {option} {bad}: {reason}")  # at once: the run would take hours
    assert (tmp_path / "file").read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_resume_refusals_through_the_cli(tmp_path, run_job):
    run_job(OpenMMJob(system="lj", steps=100, chunk=50), out="first")  # its checkpoints in ck, not its --out
    def md_run(*args: str) -> tuple[int, str]:
        done = subprocess.run([sys.executable, "-m", "thrifty.cli", "md", "run", "--checkpoint-dir", str(tmp_path / "ck"),
                               "--out", str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=120)
        return done.returncode, done.stderr
    _one_line_error(*md_run("--system", "ions"), "system lj (216 particles", "this run is ions (120 particles")
    _one_line_error(*md_run("--system", "lj", "--steps", "50"), "at step 100, beyond --steps 50")
    assert not list((tmp_path / "ck").glob(".ready-*"))  # the runner is told to stop signalling


SMALL_RUN = ["md", "run", "--system", "nanoconfinement", "--h", "2", "--c", "0.8", "--box-nm", "2.4",
             "--cutoff-nm", "1", "--steps", "40", "--chunk", "2", "--equilibrate", "0", "--json"]  # 2 blocks of 10


def test_md_run_records_its_parameters_and_shows_progress(run_cli, tmp_path):
    # mutations caught: params.json not written (the run could not train a surrogate); the summary without
    # the model's parameters, seed or engine; a second document (or any other text) on stdout; no progress
    code, out, err = run_cli(*SMALL_RUN, "--seed", "3", "--out", tmp_path / "run")
    assert code == 0, err
    summary = json.loads(out)  # one JSON document, nothing else
    point = {"h_nm": 2.0, "z_plus": 1, "z_minus": -1, "c_molar": 0.8, "d_plus_nm": 0.474, "d_minus_nm": 0.627}
    assert json.loads((tmp_path / "run" / "params.json").read_text()) == point
    assert summary["parameters"] == point | {"box_nm": 2.4, "box_z_nm": 6.0, "cutoff_nm": 1.0, "ewald_tolerance": 5e-4}
    assert (summary["seed"], summary["engine"], summary["platform"], summary["steps"]) == (3, "openmm", "Reference", 40)
    assert summary["sampling"]["steps"] == 40 and summary["sampling"]["equilibration_steps"] == 0
    assert read_run(tmp_path / "run").h_nm == 2.0  # a run folder the surrogate reads
    assert "md run nanoconfinement" in err  # the progress bar, on stderr


def test_a_finished_out_is_refused_unless_forced(run_cli, tmp_path):
    # mutations caught: a finished --out overwritten silently; --force not honoured; the same command
    # repeated refused (outside `thrifty run` too it has nothing to do: exit 0, the stored summary)
    out = tmp_path / "run"
    assert run_cli(*SMALL_RUN, "--seed", "3", "--out", out)[0] == 0
    first = (out / "summary.json").read_text()
    code, stdout, err = run_cli(*SMALL_RUN, "--seed", "3", "--out", out)
    assert code == 0 and json.loads(stdout) == json.loads(first) and "nothing to do" in err, err
    # on another platform it is another run (mutation caught: the platform left out of the comparison)
    code, _, err = run_cli(*SMALL_RUN, "--seed", "3", "--out", out, "--platform", "CPU")
    _one_line_error(code, err, f"--out {out} holds a finished run (summary.json): give --force")
    code, _, err = run_cli(*SMALL_RUN, "--seed", "4", "--out", out)
    _one_line_error(code, err, f"--out {out} holds a finished run (summary.json): give --force")
    assert (out / "summary.json").read_text() == first
    code, stdout, err = run_cli(*SMALL_RUN, "--seed", "4", "--out", out, "--force")
    assert code == 0, err
    assert json.loads(stdout)["seed"] == 4 and json.loads((out / "summary.json").read_text())["seed"] == 4
    # another system forced into it leaves none of the nanoconfinement run's files for
    # train-surrogate to take as a run (mutation caught: --force only skipping the refusal)
    code, _, err = run_cli("md", "run", "--system", "lj", "--steps", "20", "--json", "--out", out, "--force")
    assert code == 0, err
    assert json.loads((out / "summary.json").read_text())["system"] == "lj"
    assert not any((out / name).exists() for name in ("params.json", "profiles.csv", "profiles.png"))


def test_a_forced_run_that_is_refused_destroys_nothing(run_cli, tmp_path, monkeypatch):
    """--force replaces a finished run only once the new one has finished. Mutation caught: the old
    outputs removed before the run (a checkpoint of another system refused it afterwards, and a
    resume of the same run failed on its deleted thermo.csv)."""
    from thrifty.cli import md_run
    out = tmp_path / "run"
    assert run_cli(*SMALL_RUN, "--seed", "3", "--out", out)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def refused(*args, **kwargs):
        raise ThriftyError("the checkpoint in --out is for system lj")

    monkeypatch.setattr(md_run, "_run", refused)
    code, _, err = run_cli(*SMALL_RUN, "--seed", "4", "--out", out, "--force")
    assert code == 2 and "is for system lj" in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_the_closing_line_counts_the_blocks_before_an_error_bar(run_cli, tmp_path):
    # mutation caught: "no complete block yet" printed beside a summary of one complete block
    text_run = [a for a in SMALL_RUN if a != "--json"]
    code, out, err = run_cli(*text_run, "--steps", "20", "--out", tmp_path / "run")
    assert code == 0, err
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["complete_blocks"] == 1
    assert "1 complete block, no error bar before 2" in " ".join(out.split())


def test_under_thrifty_run_a_restart_after_the_job_finished_is_done_not_failed(run_cli, tmp_path, monkeypatch):
    # mutations caught: the finished --out refused under the runner too (a VM taken back just after
    # the job ended failed the whole run: "the job failed on its own with exit code 2"); another
    # job's finished run (another seed or point) taken for this one's
    out = tmp_path / "run"
    assert run_cli(*SMALL_RUN, "--seed", "3", "--out", out)[0] == 0
    first = (out / "summary.json").read_text()
    monkeypatch.setenv("THRIFTY_CHECKPOINT_DIR", str(tmp_path / "ck"))
    code, stdout, err = run_cli(*SMALL_RUN, "--seed", "3", "--out", out)
    assert code == 0, err
    assert json.loads(stdout) == json.loads(first) and (out / "summary.json").read_text() == first
    for other in (("--seed", "4"), ("--seed", "3", "--c", "0.7")):
        code, _, err = run_cli(*SMALL_RUN, *other, "--out", out)
        _one_line_error(code, err, f"--out {out} holds a finished run (summary.json): give --force")


@pytest.mark.timeout(300)
def test_a_first_ctrl_c_checkpoints_and_stops(tmp_path, run_cli):
    # alone, `md run` checkpoints on notices only: Ctrl-C had ended a run with nothing saved.
    # Mutation caught: the first Ctrl-C not taken as the notice (exit 130, no checkpoint)
    import signal
    import time
    out = tmp_path / "run"
    run = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "md", "run", "--system", "lj", "--steps", "1000000",
                            "--out", str(out), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ((out / "thermo.csv").exists() and len((out / "thermo.csv").read_text().splitlines()) > 2):
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.1)
    run.send_signal(signal.SIGINT)
    printed, err = run.communicate(timeout=120)
    assert run.returncode == 75 and "interrupted: checkpointing after this chunk" in err, err
    assert len(list((out / "checkpoints").glob("ckpt-*.bin"))) == 1
    # --json says so, as train's does (a new user's pass: it printed nothing; mutation caught: no JSON)
    notice = json.loads(printed)
    assert notice["preempted"] is True and notice["checkpoint_dir"] == str(out / "checkpoints")
    # finished from there, the run keeps that checkpoint; --force over it starts afresh (a new
    # user's pass: refused as "the checkpoint ... is at step N, beyond --steps"). Mutation caught:
    # the finished run's checkpoints resumed from under --force
    import re
    saved = int(re.search(r"checkpointed at step (\d+)", " ".join(err.split())).group(1))
    assert notice["step"] == saved
    assert run_cli("md", "run", "--system", "lj", "--steps", saved + 100, "--out", out)[0] == 0
    code, _, err = run_cli("md", "run", "--system", "lj", "--steps", 200, "--out", out, "--force", "--json")
    assert code == 0, err
    assert json.loads((out / "summary.json").read_text())["steps"] == 200


def test_a_run_alone_checkpoints_every_checkpoint_every_and_a_runners_does_not_take_it(run_cli, tmp_path, monkeypatch):
    """A run with no runner to ask saved only on a notice: a SIGKILL lost it all (a new user's pass).
    Mutations caught: the interval not checked in due() (no checkpoint); the option taken under a runner."""
    code, _, err = run_cli("md", "run", "--system", "lj", "--steps", "600", "--chunk", "100", "--checkpoint-every",
                           "1ms", "--out", tmp_path / "every")
    assert code == 0, err
    assert len(list((tmp_path / "every" / "checkpoints").glob("ckpt-*.bin"))) >= 2
    code, _, err = run_cli("md", "run", "--system", "lj", "--steps", "600", "--chunk", "100", "--out", tmp_path / "plain")
    assert code == 0, err
    assert not list((tmp_path / "plain" / "checkpoints").glob("ckpt-*.bin"))  # only when asked, as before
    monkeypatch.setenv("THRIFTY_CHECKPOINT_DIR", str(tmp_path / "runners"))
    code, _, err = run_cli("md", "run", "--system", "lj", "--steps", "600", "--checkpoint-every", "5m",
                           "--out", tmp_path / "under")
    _one_line_error(code, err, "--checkpoint-every is for a run alone")


@pytest.mark.timeout(300)
def test_a_second_ctrl_c_inside_a_long_chunk_stops_at_once(tmp_path):
    """One chunk of a million steps: the first Ctrl-C is heard within it and a second stops the run
    (a new user's pass: integrator.step ran the chunk as one C call, so both waited for its end, 28 s
    there, and the second was lost). Mutation caught: advance as one integrator.step call (the run
    goes on to the end of its chunk, far past the timeout)."""
    import signal
    import time
    run = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "-v", "md", "run", "--system", "lj", "--steps",
                            "1000000", "--chunk", "1000000", "--out", str(tmp_path / "run")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = ""
    while "started 1 replica" not in " ".join(seen.split()):  # the loop's first line: the handler is in place
        line = run.stderr.readline()
        assert line, f"md run ended before it started: {seen}"
        seen += line
    time.sleep(1)  # inside the chunk
    run.send_signal(signal.SIGINT)
    time.sleep(1)
    run.send_signal(signal.SIGINT)
    try:
        _, err = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        run.kill()
        raise AssertionError("md run went on after two Ctrl-C") from None
    assert run.returncode == 130 and "interrupted: checkpointing after this chunk" in seen + err, seen + err
    assert not (tmp_path / "run" / "summary.json").exists()
