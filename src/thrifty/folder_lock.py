# SPDX-License-Identifier: MIT
"""A folder held by one run at a time: a lock file taken with fcntl.flock, without waiting, with
the holder's pid written in it for the refusal's message. The kernel drops a dead process's
locks, so a killed holder never leaves the folder held. Used by `thrifty train`'s run directory
(train.runlock) and `thrifty run`'s checkpoint folder (transient.runner)."""

import fcntl
import os
from pathlib import Path
from typing import IO

from thrifty.errors import ThriftyError


class FolderBusy(ThriftyError):
    """Another process holds the lock; `by` names its pid for a message (" (pid 123)", or "")."""

    def __init__(self, holder: str) -> None:
        self.by = f" (pid {holder})" if holder.isdigit() else ""
        super().__init__(f"held by another process{self.by}")


def open_lock(path: Path, what: str) -> IO[str]:
    """The lock file at `path` (its folder made), opened without truncating the holder's pid;
    `what` names the folder in the error when it cannot be opened."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a+")
    except OSError as exc:
        raise ThriftyError(f"cannot use {what}: {exc.strerror or exc}") from None


def take(handle: IO[str], what: str, *, shared: bool = False) -> None:
    """Lock `handle` exclusively (or shared) at once. FolderBusy when another process holds it in a
    mode that excludes this one; a ThriftyError naming `what` on a file system without locks. The
    handle is closed on either error."""
    try:
        fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise FolderBusy(holder) from None
    except OSError as exc:
        handle.close()
        raise ThriftyError(f"cannot lock {what}: {exc.strerror or exc}") from None


def write_holder(handle: IO[str]) -> None:
    """Write this process's pid into the held lock file, for a refused run's message."""
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
