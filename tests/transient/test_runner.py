"""The preemption-tolerant runner with real processes: restarts, notices, corrupt checkpoints."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from thrifty.checkpoint_file import encode
from thrifty.transient.lifetimes import Exponential
from thrifty.transient.protocol import PREEMPTED_EXIT, JobCheckpoints, checkpoint_files
from thrifty.transient.runner import Runner, RunnerError

COUNTER_JOB = textwrap.dedent("""
    import hashlib, sys, time
    from pathlib import Path
    from thrifty.transient.protocol import JobCheckpoints, PREEMPTED_EXIT
    steps, out = int(sys.argv[1]), Path(sys.argv[2])
    ckpt = JobCheckpoints.from_environment()
    saved = ckpt.latest()
    step, digest = (int(saved.split(b":")[0]), saved.split(b":")[1]) if saved else (0, b"seed")
    while step < steps:
        time.sleep(0.02)                      # one unit of work
        digest = hashlib.sha256(digest).hexdigest().encode()
        step += 1
        if ckpt.due():
            ckpt.save(b"%d:%s" % (step, digest))
            if ckpt.notice:
                ckpt.close()
                sys.exit(PREEMPTED_EXIT)
    ckpt.close()
    out.write_text(f"{step} {digest.decode()}")
""")


def _expected(steps: int) -> str:
    import hashlib
    digest = b"seed"
    for _ in range(steps):
        digest = hashlib.sha256(digest).hexdigest().encode()
    return f"{steps} {digest.decode()}"


@pytest.fixture()
def job(tmp_path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(COUNTER_JOB)
    return path


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kill", ["sigkill", "mixed"])
def test_runner_survives_injected_preemptions(tmp_path, job, kill):
    out = tmp_path / "result.txt"
    runner = Runner([sys.executable, str(job), "400", str(out)], tmp_path / "ck", intervals_s=[0.3],
                    notice_s=2.0, lifetimes=Exponential(1 / 1.5), time_scale=1.0, kill=kill, seed=4,
                    timeout_s=200)
    report = runner.run()
    assert report.exit_code == 0 and out.read_text() == _expected(400)
    assert report.preemptions >= 2 and report.checkpoints >= 2 and report.attempts == report.preemptions + 1
    kinds = [json.loads(line)["event"] for line in (tmp_path / "ck" / "events.jsonl").read_text().splitlines()]
    assert {"start", "checkpoint_request", "checkpoint", "preemption", "restart", "finished"} <= set(kinds)
    if kill == "mixed":
        assert report.notices >= 1


def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous(tmp_path):
    ckpt = JobCheckpoints(tmp_path, handle_signals=False)
    ckpt.save(b"first")
    ckpt.save(b"second")
    newest = checkpoint_files(tmp_path)[-1]
    newest.write_bytes(newest.read_bytes()[:-3])  # torn write
    assert ckpt.latest() == b"first" and ckpt.skipped == [newest.name]
    (tmp_path / "ckpt-000009.bin").write_bytes(encode(b"ninth")[:10])
    assert ckpt.latest() == b"first"
    for _ in range(4):
        ckpt.save(b"more")
    assert len(checkpoint_files(tmp_path)) == 3  # only the newest few are kept


@pytest.mark.timeout(120)
def test_a_notice_to_the_runner_checkpoints_within_the_notice(tmp_path, job):
    out = tmp_path / "result.txt"
    runner = Runner([sys.executable, str(job), "100000", str(out)], tmp_path / "ck", intervals_s=[1000.0],
                    notice_s=10.0)
    timer = threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    report = runner.run()
    timer.cancel()
    assert report.exit_code == PREEMPTED_EXIT and report.notices == 1
    assert report.checkpoints == 1 and len(checkpoint_files(tmp_path / "ck")) == 1


def test_a_job_that_fails_on_its_own_stops_the_runner(tmp_path):
    runner = Runner([sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path / "ck")
    with pytest.raises(RunnerError, match="exit code 3"):
        runner.run()


def test_run_cli_errors(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "thrifty.cli", *map(str, args)], capture_output=True,
                              text=True, timeout=120)
    done = cli("run", "--checkpoint-dir", tmp_path)
    assert done.returncode == 2 and "no command to run" in done.stderr
    done = cli("run", "--checkpoint-dir", tmp_path, "--kill", "gently", "--", sys.executable, "-c", "pass")
    assert done.returncode == 2 and "unknown kill mode" in done.stderr
    done = cli("run", "--checkpoint-dir", tmp_path, "--", sys.executable, "-c", "import sys; sys.exit(5)")
    assert done.returncode == 2 and "exit code 5" in done.stderr
    done = cli("md", "run", "--system", "water", "--out", tmp_path)
    assert done.returncode == 2 and "unknown MD system" in done.stderr
