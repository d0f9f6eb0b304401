# SPDX-License-Identifier: MIT
"""Workers die with their launcher, and a run directory is held while any process of its run lives."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import descendants, local_ranks

from thrifty.train.runlock import RunDirectoryBusy, hold_run_dir
from thrifty.transient.protocol import checkpoint_files

# a process that starts a child doing `CALL` on its parent's pid, prints the child's pid, waits
CHAIN = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import os, time; from thrifty.train.lifeline import "
                          "die_with, watch_process; CALL(os.getppid()); print(os.getpid(), flush=True); "
                          "time.sleep(120)"])
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Running (an orphan's zombie, never reaped where pid 1 does not reap, counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.timeout(60)
@pytest.mark.parametrize("call", ["die_with", "watch_process"])  # Linux's pidfd, the portable fallback
def test_a_child_ends_when_its_parent_is_killed(call):
    parent = subprocess.Popen([sys.executable, "-c", CHAIN.replace("CALL", call)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()
        parent.wait()
        assert _gone_within([child], 30.0), f"{call}: the child outlived its parent"
    finally:
        parent.kill()


def test_a_run_directory_stays_held_while_any_process_of_the_run_lives(tmp_path):
    joined = "import sys, time; from thrifty.train.runlock import join_run_dir; h = join_run_dir(sys.argv[1]); " \
             "print('joined', flush=True); time.sleep(120)"
    with hold_run_dir(tmp_path):
        with pytest.raises(RunDirectoryBusy, match=rf"run directory {tmp_path} is in use by another thrifty "
                                                   rf"train run \(pid {os.getpid()}\)"):
            with hold_run_dir(tmp_path):
                pass
        worker = subprocess.Popen([sys.executable, "-c", joined, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        assert worker.stdout.readline().strip() == "joined"
    try:  # the launcher let go, its worker still lives: the directory is still held
        with pytest.raises(RunDirectoryBusy):
            with hold_run_dir(tmp_path):
                pass
    finally:
        worker.kill()
        worker.wait()
    with hold_run_dir(tmp_path):  # and free once the last process of the run is gone
        pass


@pytest.mark.timeout(240)
def test_kill_9_of_thrifty_train_leaves_no_worker_and_a_live_run_refuses_a_second(tmp_path, run_cli, short_tmp):
    run_dir = tmp_path / "run"
    train = [sys.executable, "-m", "thrifty.cli", "train", "--nproc", "2", "--policy", "uniform", "--b-max", "64",
             "--slowdown", "3,3", "--steps", "100000", "--checkpoint-every", "10", "--run-dir", str(run_dir),
             "--db", str(tmp_path / "db"), "--json"]
    # its temporary folders (the forkserver's, the ranks') in short_tmp: a killed run cannot remove them
    run = subprocess.Popen(train, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                           env={**os.environ, "TMPDIR": str(short_tmp)})
    try:
        deadline = time.monotonic() + 150
        while not checkpoint_files(run_dir):  # the workers are up and training
            assert run.poll() is None and time.monotonic() < deadline, "the run did not get going"
            time.sleep(0.1)
        # multiprocessing's forkserver and resource tracker; the two ranks, forked by the server
        children, ranks = descendants(run.pid), local_ranks(run.pid)
        assert len(ranks) == 2 and len(children) >= 4
        code, _, err = run_cli("train", "--resume", "--steps", "5", "--run-dir", run_dir, "--db", tmp_path / "db2")
        assert code == 2 and f"run directory {run_dir} is in use" in err and len(err.strip().splitlines()) == 1
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        assert _gone_within(ranks, 30.0), "workers outlived the killed thrifty train"
        # the forkserver, its clients gone, ends too (its interpreter's exit with torch takes seconds)
        assert _gone_within(children, 60.0), "the forkserver or the resource tracker outlived the run"
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left of the run's group
            os.killpg(run.pid, signal.SIGKILL)
    with hold_run_dir(run_dir):  # nothing of the killed run holds its directory any more
        pass
