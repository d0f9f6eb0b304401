"""Worker processes that die with their parent.

A `thrifty train` parent killed outright (SIGKILL from a preemption, `kill -9`) cannot stop its
workers, and orphaned workers would train on to the end and race a restarted run for the run
directory. On Linux the kernel does it: PR_SET_PDEATHSIG asks for SIGKILL when the parent dies
(checked once after the call, in case the parent died first). Elsewhere a daemon thread polls the
parent's pid and ends the process when it changes.
"""

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int, *, poll_s: float = 0.2) -> None:
    """End this process as soon as `parent_pid` (the process that started it) is gone."""
    if not parent_death_signal(signal.SIGKILL):
        watch_parent(parent_pid, poll_s=poll_s)
    if os.getppid() != parent_pid:  # the parent died before the signal was set up
        os._exit(1)


def parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send `sig` to this process when its parent exits; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def notice_when_parent_dies() -> None:
    """For a supervised launch (Popen's preexec_fn): the runner's preemption notice, SIGTERM, when
    the supervisor dies, so the job checkpoints and stops instead of training on alone."""
    parent_death_signal(signal.SIGTERM)


def watch_parent(parent_pid: int, *, poll_s: float = 0.2) -> threading.Thread:
    """The portable fallback: a daemon thread that ends the process once its parent changes
    (an orphan is adopted by init or a subreaper)."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="thrifty-watch-parent", daemon=True)
    thread.start()
    return thread
