# SPDX-License-Identifier: MIT
"""Worker processes that die with their launcher.

A `thrifty train` launcher killed outright (SIGKILL from a preemption, `kill -9`) cannot stop its
workers, and orphaned workers would train on to the end and race a restarted run for the run
directory. The workers are forked by a forkserver (train.launcher), not by the launcher, so the
kernel's parent-death signal would follow the wrong process; each worker instead watches the
launcher itself: on Linux a pidfd (readable the moment that process exits, no polling, and it names
that process, not a later one with its pid), elsewhere a daemon thread that polls the pid.
"""

import os
import select
import threading
import time


def die_with(pid: int, *, poll_s: float = 0.2) -> threading.Thread:
    """End this process as soon as process `pid` (the launcher) is gone; returns the watching thread."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:  # gone already
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd here (not Linux >= 5.3)
        return watch_process(pid, poll_s=poll_s)

    def wait() -> None:
        select.select([handle], [], [])  # a pidfd turns readable when its process exits
        os._exit(1)

    return _daemon(wait)


def watch_process(pid: int, *, poll_s: float = 0.2) -> threading.Thread:
    """The portable fallback: a daemon thread that ends this process once `pid` is gone."""
    def watch() -> None:
        while _exists(pid):
            time.sleep(poll_s)
        os._exit(1)

    return _daemon(watch)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _daemon(target) -> threading.Thread:
    thread = threading.Thread(target=target, name="thrifty-watch-launcher", daemon=True)
    thread.start()
    return thread
