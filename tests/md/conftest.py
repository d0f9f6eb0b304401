"""Checkpoints on a script: saved every few chunks, and a death at a chosen chunk."""

import pytest
from md_jobs import OpenMMJob, run_openmm

from thrifty.transient.protocol import JobCheckpoints


class FlakyCheckpoints(JobCheckpoints):
    """Asks for a checkpoint every `every` chunks and dies at chunk `die_at` (counted per attempt)."""

    class Killed(Exception):
        """Stands for the process dying: nothing after it reaches the disk."""

    def __init__(self, directory, every: int, die_at: int | None) -> None:
        super().__init__(directory, handle_signals=False)
        self.every, self.die_at, self.chunks = every, die_at, 0

    def due(self) -> bool:
        self.chunks += 1
        if self.die_at is not None and self.chunks == self.die_at:
            raise self.Killed
        return self.chunks % self.every == 0


@pytest.fixture()
def flaky():
    return FlakyCheckpoints


@pytest.fixture()
def run_job(tmp_path):
    """run_md into tmp_path/OUT with checkpoints in tmp_path/CK, by default one after every chunk."""
    def run(settings: OpenMMJob, out: str = "out", ck: str = "ck", every: int = 1) -> dict:
        return run_openmm(settings, tmp_path / out, FlakyCheckpoints(tmp_path / ck, every, None))
    return run
