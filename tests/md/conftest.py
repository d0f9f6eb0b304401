# SPDX-License-Identifier: MIT
"""Checkpoints on a script (saved every few chunks, and a death at a chosen chunk), `md run` in this
process, and the session's Ray cluster."""

import signal

import pytest
from md_jobs import OpenMMJob, run_openmm
from process_tree import descendants

from thrifty.transient.protocol import JobCheckpoints


class FlakyCheckpoints(JobCheckpoints):
    """Asks for a checkpoint every `every` chunks and dies at chunk `die_at` (counted per attempt)."""

    class Killed(Exception):
        """Stands for the process dying: nothing after it reaches the disk."""

    def __init__(self, directory, every: int, die_at: int | None) -> None:
        super().__init__(directory, handle_signals=False)
        self.every, self.die_at, self.chunks = every, die_at, 0

    def due(self) -> bool:
        self.chunks += 1
        if self.die_at is not None and self.chunks == self.die_at:
            raise self.Killed
        return self.chunks % self.every == 0


@pytest.fixture()
def flaky():
    return FlakyCheckpoints


@pytest.fixture()
def run_job(tmp_path):
    """run_md into tmp_path/OUT with checkpoints in tmp_path/CK, by default one after every chunk."""
    def run(settings: OpenMMJob, out: str = "out", ck: str = "ck", every: int = 1) -> dict:
        return run_openmm(settings, tmp_path / out, FlakyCheckpoints(tmp_path / ck, every, None))
    return run


@pytest.fixture()
def md_run(run_cli):
    """`thrifty md run` in this process (the same CLI without a Python start and a torch or OpenMM import);
    the signal handlers a run's checkpoints install are put back after it."""
    def run(*args: str) -> tuple[int, str, str]:
        saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
        try:
            return run_cli("md", "run", *args)
        finally:
            for s, handler in saved.items():
                signal.signal(s, handler)
    return run


@pytest.fixture(scope="session")
def ray_pool():
    """One Ray cluster for every test of this folder that needs one (Ray's start is the costly part):
    the emulated pool (md.campaign.pool.EmulatedPool: a head with no CPUs and 2 one-CPU nodes, every
    process on 127.0.0.1) with this process connected as its driver. Its nodes live until a test
    preempts them (the pool replaces them). PYTHONPATH holds src/ and this folder for the session, so
    that the workers of nodes launched at any time import thrifty and these tests' modules (a
    simulation class defined in a test module). Yields (pool, Ray's temp folder)."""
    import os
    import shutil
    import signal
    import tempfile
    from pathlib import Path

    from thrifty.md.campaign.pool import EmulatedPool, PoolSpec, loopback_ray

    here = Path(__file__).resolve().parent
    tmp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "PYTHONPATH")}
    os.environ["RAY_TMPDIR"] = str(tmp)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(here.parents[1] / "src"), str(here),
                                                *([saved["PYTHONPATH"]] if saved["PYTHONPATH"] else [])])
    pool = EmulatedPool(PoolSpec("spot", 2), None, 3600.0, tmp / "shared")  # killed by the tests only
    ray = loopback_ray()
    try:
        ray.init(address=pool.start(), _node_ip_address="127.0.0.1", log_to_driver=False, logging_level="ERROR")
        yield pool, tmp
    finally:
        ray.shutdown()
        pool.shutdown()
        for pid in descendants(os.getpid()) - {os.getpid()}:  # anything of this cluster still alive
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if str(tmp).encode() in handle.read():
                        os.kill(pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue
        shutil.rmtree(tmp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
