# SPDX-License-Identifier: MIT
"""One run at a time in a run directory: a lock file (fcntl.flock) held for the run's life.

Two runs writing one run directory (a `--resume` started while the killed run's workers still
train, a second run by mistake) would interleave checkpoints and logs. The run that starts takes
the lock exclusively, which fails while any process holds it in any mode, writes its pid for the
message, and then shares it: every worker takes a shared lock too, so the directory stays held
until the last process of the run has ended (the kernel drops a dead process's locks, so a killed
run never leaves it held).
"""

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from thrifty.errors import ThriftyError

LOCK_NAME = ".lock"


class RunDirectoryBusy(ThriftyError):
    """Another run holds the run directory."""


def _open(run_dir: Path) -> IO[str]:
    path = Path(run_dir) / LOCK_NAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a+")
    except OSError as exc:
        raise ThriftyError(f"cannot use run directory {run_dir}: {exc.strerror or exc}") from None


def _busy(run_dir: Path, handle: IO[str]) -> RunDirectoryBusy:
    handle.seek(0)
    owner = handle.read().strip()
    handle.close()
    by = f" (pid {owner})" if owner.isdigit() else ""
    return RunDirectoryBusy(f"run directory {run_dir} is in use by another thrifty train run{by}; "
                            f"wait for it to end or stop it first")


@contextlib.contextmanager
def hold_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold `run_dir` while the block runs; RunDirectoryBusy if another run holds it."""
    handle = _open(run_dir)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _busy(run_dir, handle) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    try:  # shared from now on, so that the workers can join; a run that slips in here wins
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _busy(run_dir, handle) from None
    try:
        yield
    finally:
        handle.close()


def join_run_dir(run_dir: Path) -> IO[str]:
    """A worker's share of its run's lock: held while the returned file stays open (for the
    worker's life)."""
    handle = _open(run_dir)
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _busy(run_dir, handle) from None
    return handle
