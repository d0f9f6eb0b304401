# SPDX-License-Identifier: MIT
"""Session-fixture data made once per test run, not once per pytest-xdist worker."""

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

BUILT = ".built"


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder of session-fixture data that the first pytest-xdist worker to need it builds (under
    a file lock, in the run's temporary root that every worker shares) and the others reuse, so a
    profile or a campaign is made once per run, not once per worker. Callers copy what their tests
    write to. Without xdist: built in a fresh folder."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # set in every worker of one xdist run
    if run is None:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent / f"shared-{run}-{name}"  # never another run's
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (shared / BUILT).is_file():  # none yet, or a build that failed half-way
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir(exist_ok=True)
            build(shared)
            (shared / BUILT).touch()
    return shared
