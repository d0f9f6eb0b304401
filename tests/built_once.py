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
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent / f"shared-{name}"
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (shared / BUILT).is_file():  # none yet, or a build that failed half-way
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            build(shared)
            (shared / BUILT).touch()
    return shared
