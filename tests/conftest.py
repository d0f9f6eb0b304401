# SPDX-License-Identifier: MIT
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from built_once import built_once
from suite_markers import markers_for

os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("THRIFTY_ALLOW_BUSY", "1")  # this suite runs on loaded machines; tests of the check unset it



def pytest_collection_modifyitems(config, items) -> None:
    """Markers by rule (tests/suite_markers.py), so that no test file has to carry them."""
    for item in items:
        function = getattr(item, "originalname", item.name)
        for marker in sorted(markers_for(item.nodeid, Path(item.path), function, list(getattr(item, "fixturenames", ())))):
            item.add_marker(marker)


FAST_PROFILE = ["--workers", "1,2", "--batch", "16,64", "--steps", "6"]


def _profile(folder: Path) -> None:
    from thrifty.cli.app import main
    assert main(["profile", "--db", str(folder / "thrifty.db"), *FAST_PROFILE, "--json"]) == 0


@pytest.fixture(scope="session")
def profiled_db(tmp_path_factory) -> Path:
    """A database holding one quick real profile (2 worker processes) of builtin:digits; this
    worker's own copy (tests add plans to it)."""
    db = tmp_path_factory.mktemp("db") / "thrifty.db"
    shutil.copy(built_once(tmp_path_factory, "profiled_db", _profile) / "thrifty.db", db)
    return db


@pytest.fixture()
def short_tmp() -> Iterator[Path]:
    """A TMPDIR for a `thrifty` process the test starts (or kills): its temporary folders land here,
    not in /tmp, and are removed with it. Directly under /tmp, not in tmp_path: multiprocessing's
    forkserver socket lives at TMPDIR/pymp-*/listener-*, and AF_UNIX paths hold 107 bytes, which
    tmp_path's depth (pytest-of-root/pytest-102/popen-gw0/test_...) exceeds."""
    path = Path(tempfile.mkdtemp(prefix="thrifty-test-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture()
def run_cli(capsys):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    from thrifty.cli.app import main

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err
    return run


class ScriptedLifetimes:
    """VM lifetimes from a list, the last one repeated: preemptions that do not depend on luck or on
    how fast the machine runs the job."""

    def __init__(self, lifetimes_s: list[float]) -> None:
        self.lifetimes_s, self.drawn = lifetimes_s, 0

    def sample(self, rng, size: int, age: float = 0.0) -> np.ndarray:
        picks = [self.lifetimes_s[min(self.drawn + i, len(self.lifetimes_s) - 1)] for i in range(size)]
        self.drawn += size
        return np.array(picks)


@pytest.fixture()
def scripted_lifetimes() -> type[ScriptedLifetimes]:
    """For runner tests that need a fixed number of preemptions at any machine speed."""
    return ScriptedLifetimes
