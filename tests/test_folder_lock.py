# SPDX-License-Identifier: MIT
"""thrifty.folder_lock, the lock behind train's run directory and thrifty run's checkpoint folder
(their refusals are tested in tests/train/test_lifeline.py and tests/transient/test_runner.py)."""

import errno
import os
import subprocess
import sys

import pytest

from thrifty.errors import ThriftyError
from thrifty.folder_lock import FolderBusy, open_lock, take, write_holder
from thrifty.train.runlock import hold_run_dir


def test_a_held_lock_refuses_another_process_and_names_the_holder(tmp_path):
    # mutations caught: the pid not written (the refusal names nobody), a shared take that excludes
    # nothing (no refusal)
    path = tmp_path / "d" / ".lock"
    handle = open_lock(path, "d")
    take(handle, "d")
    write_holder(handle)
    probe = ("import sys; from pathlib import Path; from thrifty.folder_lock import FolderBusy, open_lock, take\n"
             "h = open_lock(Path(sys.argv[1]), 'd')\n"
             "try:\n    take(h, 'd', shared=True)\nexcept FolderBusy as busy:\n    print('busy' + busy.by)\n")
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == f"busy (pid {os.getpid()})"
    handle.close()
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == ""  # free once its holder lets go


def test_a_file_system_without_locks_is_one_clear_error_not_an_oserror(tmp_path, monkeypatch):
    # mutation caught: only BlockingIOError handled (a raw OSError from flock escaped train's lock)
    def no_locks(handle, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr("thrifty.folder_lock.fcntl.flock", no_locks)
    with pytest.raises(ThriftyError, match=rf"cannot lock run directory {tmp_path}: No locks available") as caught:
        with hold_run_dir(tmp_path):
            pass
    assert not isinstance(caught.value, FolderBusy)
