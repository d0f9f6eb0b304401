# SPDX-License-Identifier: MIT
"""Processes as Linux's /proc shows them: a process tree, a task's state, the runnable count.
Read fresh on every call (processes come and go); where /proc is absent the readers say nothing.
And a child's notice when its supervisor dies (the kernel's parent-death signal)."""

import ctypes
import os
import signal
import sys
from pathlib import Path

PROC = Path("/proc")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _libc_prctl():
    """libc's prctl, resolved once in the parent: a Popen preexec_fn runs between fork and exec,
    where looking it up (ctypes.util.find_library runs /sbin/ldconfig) could deadlock on a lock
    another thread held at the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()


def parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send `sig` to this process when its parent exits; False where it cannot."""
    return _PRCTL is not None and _PRCTL(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0


def notice_when_parent_dies() -> None:
    """For a supervised launch (Popen's preexec_fn, called from the thread that stays): a preemption
    notice, SIGTERM, when the supervisor dies (even by SIGKILL), so the job checkpoints and stops
    instead of running on alone beside the next supervisor of its checkpoint folder. A supervisor
    that died while the signal was being asked for (the parent changed) sends no signal: the
    notice then comes at once."""
    parent = os.getppid()
    if parent_death_signal(signal.SIGTERM) and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def stat_fields(path: Path) -> list[str] | None:
    """A /proc/PID/stat (or task) file's fields after the command name, which may hold spaces:
    [state, ppid, ...]; None when the task ended while it was read."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def process_tree(roots: list[int], proc: Path = PROC) -> set[int]:
    """`roots` and every process below them."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit() and (fields := stat_fields(entry / "stat")) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return tree


def procs_running(proc: Path = PROC) -> float:
    """The machine's runnable tasks (threads) now: /proc/stat's procs_running (OSError without /proc)."""
    with open(proc / "stat") as stat:
        return next(float(line.split()[1]) for line in stat if line.startswith("procs_running"))
