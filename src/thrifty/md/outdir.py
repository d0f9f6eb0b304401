"""Output folders checked before a long job starts, so a bad path costs one line, not a run.

Writing a probe file is the only test that holds everywhere: permission bits say nothing for
root, read-only mounts or /proc. The probe goes into the deepest folder of the path that exists,
so nothing is created yet and a refusal (of this folder or of the next one checked) leaves no
empty folders behind; the job creates its folders when it starts.
"""

import os
import tempfile
from pathlib import Path

from thrifty.errors import ThriftyError


def check_writable_dir(path: Path, what: str) -> None:
    """Raise a one-line error naming `what` unless `path` is, or can be made, a folder we can write in."""
    path = Path(path)
    try:
        existing = path
        while not existing.exists():  # ends at "/" or "."
            existing = existing.parent
        if not existing.is_dir():
            raise ThriftyError(f"cannot write to {what} {path}: {existing} is a file, not a folder")
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".thrifty-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ThriftyError(f"cannot write to {what} {path}: {exc.strerror or exc}") from None
