# SPDX-License-Identifier: MIT
"""What the search needs from wherever the job runs: one small protocol, so the decision rule never
knows whether steps are simulated (`sim`), local processes or cloud VMs."""

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from thrifty.search.config import Config
from thrifty.search.noise_schedule import NoiseSchedule


@dataclass(frozen=True)
class NoiseSample:
    """Per-step unbiased estimates of |G|^2 and tr(Sigma) (thrifty.perf.noise), one pair per step
    that measured them; empty when none did."""

    grad_sq: np.ndarray
    trace: np.ndarray

    @classmethod
    def empty(cls) -> "NoiseSample":
        return cls(np.zeros(0), np.zeros(0))


@dataclass(frozen=True)
class Window:
    """Steps measured on the current configuration; the job's progress advanced with them."""

    step_time_s: np.ndarray  # one per step
    noise: NoiseSample = NoiseSample.empty()  # the steps that measured the gradient noise
    sync_time_s: float | None = None  # mean time in gradient synchronisation, if measured


class Backend(Protocol):
    """Runs the job. Time and money are the backend's to count: it knows its billing."""

    minimum_billed_s: float  # each launch is billed at least this long (60: a one-minute minimum)

    def candidates(self) -> list[Config]:
        """The configurations this backend can run."""

    def price_per_hour(self, config: Config) -> float:
        """US dollars per hour for the whole configuration (all its nodes)."""

    def move_cost_s(self, old: Config | None, config: Config) -> float:
        """Seconds from training on `old` (None: nothing runs yet) to training on `config`:
        checkpoint, relaunch and resume, plus VM start-up when new machines are needed."""

    def launch(self, config: Config) -> None:
        """Checkpoint the job (if running) and resume it on `config`."""

    def measure(self, steps: int) -> Window:
        """Train `steps` steps (fewer if the target is reached) and return their step times and
        gradient-noise estimates."""

    def train_until(self, progress: float) -> None:
        """Train on the current configuration, unmeasured, until `progress` (or the target)."""

    def steps_to(self, progress: float) -> int:
        """Steps the current configuration needs from here to `progress` (or the target)."""

    def finish(self) -> None:
        """Train on the current configuration until the target is reached."""

    def state(self) -> dict:
        """The job's checkpoint as JSON-ready data (for sim: the whole simulated job; for a real
        backend: where its training checkpoint lives and the clocks and bills so far)."""

    def restore(self, state: dict) -> None:
        """Continue from `state()`: the job resumes where that checkpoint left it."""

    @property
    def current(self) -> Config | None: ...

    @property
    def done(self) -> bool: ...

    @property
    def progress(self) -> float:
        """Efficiency-corrected samples trained so far (samples-at-small-batch)."""

    @property
    def target(self) -> float: ...

    @property
    def elapsed_s(self) -> float: ...

    @property
    def cost_usd(self) -> float: ...


class ScheduledJob:
    """What both backends keep alike: the configuration running and the progress made, towards the
    target at the end of the job's noise schedule (subclasses set `schedule`, `_current` and
    `_progress`)."""

    schedule: NoiseSchedule
    _current: Config | None
    _progress: float

    @property
    def current(self) -> Config | None:
        return self._current

    @property
    def done(self) -> bool:
        return self._progress >= self.target * (1 - 1e-12)

    @property
    def progress(self) -> float:
        return self._progress

    @property
    def target(self) -> float:
        return float(self.schedule.progress[-1])

    def steps_to(self, progress: float) -> int:
        batch = self._current.global_batch if self._current is not None else 1
        return int(np.ceil(self.schedule.steps(self._progress, min(progress, self.target), batch) - 1e-9))
