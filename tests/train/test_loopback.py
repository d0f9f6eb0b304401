# SPDX-License-Identifier: MIT
"""A local `thrifty train` launch listens on 127.0.0.1 alone: its ranks' rendezvous store, gloo, and
the parameter server's RPC under --mode asp."""

import os
import signal
import subprocess
import sys
import time

import pytest
from processes import descendants, listening_addresses


@pytest.mark.timeout(300)
def test_a_local_launch_listens_on_loopback_only(tmp_path, short_tmp):
    """Mutation caught (checked): the ranks' store made from tcp://127.0.0.1:PORT, whose server listened
    on every interface (*:PORT) whatever the host it was given."""
    env = {**os.environ, "TMPDIR": str(short_tmp), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    stream = tmp_path / "steps.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "train", "--nproc", "2", "--steps", "100000",
                             "--checkpoint-every", "0", "--run-dir", str(tmp_path / "run"), "--db",
                             str(tmp_path / "t.db"), "--step-stream", str(stream)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not (stream.exists() and stream.read_text().count("\n") >= 3) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        addresses = listening_addresses([proc.pid, *descendants(proc.pid)])
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=120)
    assert addresses, "the ranks listen nowhere: the check is vacuous"
    assert all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for a in addresses), addresses


@pytest.mark.timeout(300)
def test_an_asp_launch_listens_on_loopback_only(tmp_path, short_tmp):
    """Mutation caught (checked): the RPC's init_method tcp://127.0.0.1:PORT (its store on *:PORT)."""
    env = {**os.environ, "TMPDIR": str(short_tmp), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    proc = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "train", "--mode", "asp", "--nproc", "3",
                             "--steps", "100000", "--run-dir", str(tmp_path / "run"), "--db", str(tmp_path / "t.db")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seen: set[str] = set()
    try:  # every address any of its processes listened on while the RPC came up and trained a while
        deadline = time.monotonic() + 240
        while len(seen) < 3 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            seen.update(listening_addresses([proc.pid, *descendants(proc.pid)]))
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=120)
    assert len(seen) >= 3, seen  # the store and the ranks' RPC listeners: the check is not vacuous
    assert all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for a in seen), seen
