# SPDX-License-Identifier: MIT
"""SIGTERM to a command that makes things (a first profile: its database, worker processes and
their temporary folders) stops it as Ctrl-C does: what it made is removed, one line, exit 143."""

import os
import signal
import subprocess
import sys
import time


def test_sigterm_during_a_first_profile_leaves_nothing_behind(tmp_path, short_tmp):
    """Mutations caught: SIGTERM left to Python's default (the process ends on the spot: an empty
    database and its new folder stay, with the ranks' temporary folders), or the command looked for
    in the first argument only (`thrifty -v plan` kept the default); a rank cut mid-start printed a
    traceback (the launcher's deferral, in most runs)."""
    scratch = short_tmp
    db = tmp_path / "new" / "t.db"
    env = {**os.environ, "TMPDIR": str(scratch), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    plan = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "-v", "plan", "--workload", "builtin:digits", "--db", str(db),
                             "--allow-busy", "--plot", str(tmp_path / "p.png")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not _ranks_started(scratch) and plan.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert db.exists() and _ranks_started(scratch), "the profile never started its worker processes"
        time.sleep(0.5)  # into the profile (digits profiles for 10 s or more)
        plan.send_signal(signal.SIGTERM)
        _, err = plan.communicate(timeout=120)
    finally:
        plan.kill()
    # (-v before the command: the command is still found; its log lines come before the last one)
    assert plan.returncode == 143 and err.strip().splitlines()[-1] == "error: terminated", (plan.returncode, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "new").exists()
    assert [p.name for p in scratch.iterdir() if not p.name.startswith("torchinductor")] == []


def _ranks_started(scratch) -> bool:
    """The launcher made the folder its ranks report to (train.launcher)."""
    return any(p.name.startswith("thrifty-ranks-") for p in scratch.iterdir())


def test_sigterm_to_a_train_run_before_its_notice_handler_stops_it_in_one_line(tmp_path, short_tmp):
    """In its first seconds (loading the workload, the dry run) a train run has no checkpoint to take:
    a SIGTERM stops it as Ctrl-C does (a new user's pass: a silent 143 with multiprocessing's
    leaked-semaphore warnings). Mutation caught: train left out of app.STOP_ON_SIGTERM."""
    env = {**os.environ, "TMPDIR": str(short_tmp), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    run, loading = tmp_path / "run", tmp_path / "loading"
    job = tmp_path / "slow_job.py"  # a workload that takes its time to load, and says when it started
    job.write_text(f"import pathlib, time\npathlib.Path({str(loading)!r}).touch()\n"
                   "from thrifty.workloads.digits import make_workload as digits\n\n"
                   "def make_workload():\n    time.sleep(60)\n    return digits()\n")
    train = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "train", "--workload", str(job), "--nproc", "2",
                              "--run-dir", str(run), "--db", str(tmp_path / "t.db")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not loading.exists() and train.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # in the command, loading the workload: long before the ranks start
        train.send_signal(signal.SIGTERM)
        _, err = train.communicate(timeout=120)
    finally:
        train.kill()
    assert train.returncode == 143 and err.strip().splitlines() == ["error: terminated"], (train.returncode, err)
    assert not run.exists()
