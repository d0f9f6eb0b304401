# SPDX-License-Identifier: MIT
"""The checkpoint schedule a campaign's task hands its simulation (md.campaign.simulations).

ScheduledCheckpoints is transient.protocol.JobCheckpoints whose `due()` follows the model-aware
DP schedule (transient.schedule.plan_schedule) of the pool's lifetime model, for a job of the
expected length started on a VM of the node's age, in scaled time: `time_scale` model seconds per
wall second (3600: one simulated hour is one real second). A run that outlasts the expected length
is asked at Young's interval after the schedule's intervals, as `thrifty run` asks
(transient.schedule.with_young_tail; a run the DP planned as one interval had asked for none).
Each attempt also writes `attempts/NNN.json` (when it
began, the step it resumed from, its last chunk and last save) for the campaign's lost-work count.
A driver that is stopping (SIGTERM, Ctrl-C: md.campaign.runner) writes NOTICE_FILE in the campaign's
work folder: every task in flight then saves at its next chunk, whatever its schedule says, so that
the restarted campaign resumes it from there (at a time scale of 1 the schedule's first save can be
half an hour into a run).
"""

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from thrifty.io import write_text_atomic
from thrifty.transient.lifetimes import LifetimeModel
from thrifty.transient.protocol import JobCheckpoints
from thrifty.transient.schedule import Job, planned_intervals_s

NOTICE_FILE = ".stopping"  # in the campaign's work folder, while its driver stops (md.campaign.runner)


@dataclass(frozen=True)
class CheckpointPlan:
    """Everything a task needs to derive its schedule (model seconds unless named _wall)."""

    model: LifetimeModel
    job_s: float  # expected work of one run
    checkpoint_cost_s: float = 60.0
    restart_cost_s: float = 60.0
    time_scale: float = 3600.0  # model seconds per wall second

    def intervals_wall_s(self, vm_age_s: float = 0.0) -> list[float]:
        """Wall seconds between checkpoints on a VM of model age `vm_age_s` (the last repeats)."""
        return _dp_intervals_wall_s(self, round(min(max(vm_age_s, 0.0), 0.99 * self.model.t_end), -2))


@functools.lru_cache(maxsize=64)
def _dp_intervals_wall_s(plan: CheckpointPlan, vm_age_s: float) -> list[float]:
    job = Job(plan.job_s, plan.checkpoint_cost_s, plan.restart_cost_s)
    return [w / plan.time_scale for w in planned_intervals_s(plan.model, job, vm_age_s)]


class ScheduledCheckpoints(JobCheckpoints):
    """Checkpoints in `directory`, due on the wall-clock schedule `intervals_wall_s`."""

    def __init__(self, directory: Path, intervals_wall_s: list[float], *, attempt_log: Path | None = None,
                 notice_file: Path | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(directory, handle_signals=False)
        self.notice_file, self.noticed = notice_file, False  # a stopping driver's request: one save
        self.intervals_wall_s, self.clock = list(intervals_wall_s), clock
        self.began = self.last_save = clock()
        self._index = 0
        self._next = self.began + self.intervals_wall_s[0] if self.intervals_wall_s else float("inf")
        self.chunks = self.saved_chunk = 0
        self.saves = 0
        self.resumed_from: bytes | None = None
        self.attempt_log = attempt_log
        if attempt_log is not None:
            attempt_log.parent.mkdir(parents=True, exist_ok=True)
            self._write_log()

    def latest(self) -> bytes | None:
        payload = super().latest()
        self.resumed_from = payload
        return payload

    def due(self) -> bool:
        self.chunks += 1
        now = self.clock()
        if now >= self._next:
            self._index = min(self._index + 1, len(self.intervals_wall_s) - 1)
            self._next = now + self.intervals_wall_s[self._index]
            self.requested = True
        if self.notice_file is not None and not self.noticed and self.notice_file.exists():
            self.noticed = self.requested = True
        if self.attempt_log is not None:
            self._write_log()
        return self.requested

    def save(self, payload: bytes, *, began_s: float | None = None) -> Path:
        path = super().save(payload, began_s=began_s)
        self.last_save, self.saved_chunk, self.saves = self.clock(), self.chunks, self.saves + 1
        if self.attempt_log is not None:
            self._write_log()
        return path

    def _write_log(self) -> None:
        """Written to a temp name and renamed: a worker killed mid-write leaves the previous log."""
        assert self.attempt_log is not None
        write_text_atomic(self.attempt_log, json.dumps({
            "began": self.began, "last_chunk": self.clock(), "last_save": self.last_save,
            "chunks": self.chunks, "saved_chunk": self.saved_chunk, "saves": self.saves,
            "resumed": self.resumed_from is not None}))


def lost_work(attempts_dir: Path) -> tuple[int, float, int]:
    """(attempts, wall seconds of work lost, chunks lost): for every attempt but the last, the time
    and chunks it ran after its last save (or its start), which the next attempt had to redo."""
    logs = []
    for path in sorted(Path(attempts_dir).glob("*.json")):
        try:
            logs.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    lost_s = sum(max(log["last_chunk"] - log["last_save"], 0.0) for log in logs[:-1])
    lost_chunks = sum(log["chunks"] - log["saved_chunk"] for log in logs[:-1])
    return len(logs), lost_s, lost_chunks
