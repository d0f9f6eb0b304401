"""`thrifty md run` refusals: one line on stderr, exit code 2, nothing left behind, no simulation."""

import subprocess
import sys

import pytest

from thrifty.md.job import MDSettings
from thrifty.md.systems import available_platforms


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
    reason = "No such file or directory" if where == "proc" else f"{tmp_path / 'file'} is a file, not a folder"
    _one_line_error(code, err, f"cannot write to {option} {bad}: {reason}")  # at once: the run would take hours
    assert (tmp_path / "file").read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_resume_refusals_through_the_cli(tmp_path, run_job):
    run_job(MDSettings(system="lj", steps=100, chunk=50))
    def md_run(*args: str) -> tuple[int, str]:
        done = subprocess.run([sys.executable, "-m", "thrifty.cli", "md", "run", "--checkpoint-dir", str(tmp_path / "ck"),
                               "--out", str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=120)
        return done.returncode, done.stderr
    _one_line_error(*md_run("--system", "ions"), "system lj (216 particles", "this run is ions (120 particles")
    _one_line_error(*md_run("--system", "lj", "--steps", "50"), "at step 100, beyond --steps 50")
    assert not list((tmp_path / "ck").glob(".ready-*"))  # the runner is told to stop signalling
