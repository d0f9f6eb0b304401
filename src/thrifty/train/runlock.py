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
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from thrifty.errors import ThriftyError
from thrifty.folder_lock import FolderBusy, open_lock, take, write_holder

LOCK_NAME = ".lock"


class RunDirectoryBusy(ThriftyError):
    """Another run holds the run directory."""


def _take(run_dir: Path, handle: IO[str], shared: bool) -> None:
    try:
        take(handle, f"run directory {run_dir}", shared=shared)
    except FolderBusy as busy:
        raise RunDirectoryBusy(f"run directory {run_dir} is in use by another thrifty train run{busy.by}; "
                               "wait for it to end or stop it first") from None


@contextlib.contextmanager
def hold_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold `run_dir` while the block runs; RunDirectoryBusy if another run holds it."""
    handle = open_lock(Path(run_dir) / LOCK_NAME, f"run directory {run_dir}")
    _take(run_dir, handle, shared=False)
    write_holder(handle)
    # shared from now on, so that the workers can join; a run that slips in here wins
    _take(run_dir, handle, shared=True)
    try:
        yield
    finally:
        handle.close()


def join_run_dir(run_dir: Path) -> IO[str]:
    """A worker's share of its run's lock: held while the returned file stays open (for the
    worker's life)."""
    handle = open_lock(Path(run_dir) / LOCK_NAME, f"run directory {run_dir}")
    _take(run_dir, handle, shared=True)
    return handle
