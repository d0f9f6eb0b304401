"""`thrifty run`: keep a job going through preemptions.

The runner starts the job (THRIFTY_CHECKPOINT_DIR set, transient.protocol), asks for a checkpoint
(SIGUSR1) on a schedule, treats its own SIGTERM as a preemption notice (forwarded; the job has
`notice_s` to checkpoint, then it is killed), restarts the job whenever it dies from a
preemption, and logs every event with its time to `events.jsonl` in the checkpoint directory.

Fault injection: with a lifetime source, every attempt is a fresh VM whose lifetime is drawn
from it on a compressed clock (`time_scale` model seconds per wall second); when it runs out the
job gets SIGKILL, or SIGTERM and SIGKILL after the notice (`kill="sigterm"`, or alternating with
`"mixed"`). Lost work is the running time since the last checkpoint (or the attempt's start) at
each preemption.
"""

import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.io import check_writable_dir
from thrifty.transient.protocol import ENV_DIR, PREEMPTED_EXIT, checkpoint_files, ready_file
from thrifty.transient.simulation import LifetimeSampler

KILL_MODES = ("sigkill", "sigterm", "mixed")
POLL_S = 0.01


class RunnerError(ThriftyError):
    """A job that fails on its own (not by preemption) or a runner that cannot start it."""


@dataclass
class RunReport:
    exit_code: int
    wall_s: float
    attempts: int
    preemptions: int
    notices: int
    checkpoints: int
    lost_work_s: float
    events: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "events"}


@dataclass
class Runner:
    command: list[str]
    checkpoint_dir: Path
    intervals_s: list[float] = field(default_factory=list)  # checkpoint requests, wall s, per attempt
    notice_s: float = 30.0
    max_restarts: int = 10_000
    lifetimes: LifetimeSampler | None = None
    time_scale: float = 1.0
    kill: str = "sigkill"
    seed: int = 0
    timeout_s: float = 86_400.0

    def __post_init__(self) -> None:
        if not self.command:
            raise RunnerError("no command to run: put it after --")
        if self.kill not in KILL_MODES:
            raise RunnerError(f"unknown kill mode {self.kill!r}; choose one of {', '.join(KILL_MODES)}")
        if any(not (x > 0) for x in self.intervals_s):
            raise RunnerError("checkpoint intervals must be positive")
        executable = shutil.which(self.command[0])
        if executable is None or Path(executable).is_dir():
            raise RunnerError(f"cannot run {self.command[0]!r}: not found, or not an executable file")
        self.checkpoint_dir = Path(self.checkpoint_dir)
        check_writable_dir(self.checkpoint_dir, "the checkpoint folder")
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = self.checkpoint_dir / "events.jsonl"
        self._events: list[dict] = []
        self._start = time.monotonic()
        self._notice_received = False

    def _event(self, kind: str, **detail) -> None:
        event = {"t_s": round(time.monotonic() - self._start, 6), "wall_time": time.time(), "event": kind, **detail}
        self._events.append(event)
        with self._log_path.open("a") as handle:
            handle.write(json.dumps(event) + "\n")

    def _on_sigterm(self, *_) -> None:
        self._notice_received = True

    def run(self) -> RunReport:
        rng = np.random.default_rng(self.seed)
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        env = {**os.environ, ENV_DIR: str(self.checkpoint_dir)}
        self._seen = {p.name for p in checkpoint_files(self.checkpoint_dir)}
        self._checkpoints = 0
        attempts = preemptions = notices = 0
        lost = 0.0
        try:
            while True:
                attempts += 1
                if attempts > self.max_restarts + 1:
                    raise RunnerError(f"gave up after {self.max_restarts} restarts")
                life = (float(self.lifetimes.sample(rng, 1)[0]) / self.time_scale
                        if self.lifetimes is not None else float("inf"))
                proc = subprocess.Popen(self.command, env=env)
                began = self._last_save = time.monotonic()
                self._event("start", attempt=attempts, pid=proc.pid,
                            vm_lifetime_s=None if life == float("inf") else life)
                requests = self._request_times(began)
                next_request = next(requests, float("inf"))
                outcome = None
                while outcome is None:
                    time.sleep(POLL_S)
                    now = time.monotonic()
                    self._collect(attempts)
                    code = proc.poll()
                    if code is not None:
                        outcome = ("exit", code)
                    elif self._notice_received:
                        outcome = ("notice", None)
                    elif now - began >= life:
                        outcome = ("preempt", None)
                    elif now >= next_request and ready_file(self.checkpoint_dir, proc.pid).exists():
                        next_request = next(requests, float("inf"))
                        proc.send_signal(signal.SIGUSR1)
                        self._event("checkpoint_request", attempt=attempts)
                    elif now - self._start > self.timeout_s:
                        proc.kill()
                        raise RunnerError(f"the job did not finish within {self.timeout_s:.0f} s")
                kind, code = outcome
                ready_file(self.checkpoint_dir, proc.pid).unlink(missing_ok=True)
                if kind == "exit" and code == 0:
                    self._event("finished", attempt=attempts)
                    return self._report(0, attempts, preemptions, notices, lost)
                if kind == "exit" and code not in (PREEMPTED_EXIT, -signal.SIGKILL, -signal.SIGTERM):
                    self._event("failed", attempt=attempts, exit_code=code)
                    raise RunnerError(f"the job failed on its own with exit code {code}; see {self._log_path}")
                if kind == "notice":  # this machine is going away: let the job save, then stop
                    notices += 1
                    self._event("preemption_notice", attempt=attempts)
                    self._terminate(proc, warn=True)
                    self._collect(attempts)
                    return self._report(PREEMPTED_EXIT, attempts, preemptions, notices, lost)
                if kind == "preempt":
                    preemptions += 1
                    warn = self.kill == "sigterm" or (self.kill == "mixed" and preemptions % 2 == 0)
                    notices += int(warn)
                    self._event("preemption", attempt=attempts, notice=warn)
                    self._terminate(proc, warn=warn)
                    self._collect(attempts)
                    lost += max(time.monotonic() - max(self._last_save, began), 0.0)
                self._event("restart", attempt=attempts + 1)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _request_times(self, began: float) -> Iterator[float]:
        """When to ask for checkpoints: the schedule, then its last interval again and again."""
        t = began
        for interval in itertools.chain(self.intervals_s, itertools.repeat(self.intervals_s[-1])
                                        if self.intervals_s else ()):
            t += interval
            yield t

    def _terminate(self, proc: subprocess.Popen, *, warn: bool) -> None:
        if warn and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.notice_s)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def _collect(self, attempt: int) -> None:
        """Log checkpoints the job has written since the last look."""
        for path in checkpoint_files(self.checkpoint_dir):
            if path.name not in self._seen:
                self._seen.add(path.name)
                self._checkpoints += 1
                self._last_save = time.monotonic()
                self._event("checkpoint", file=path.name, attempt=attempt)

    def _report(self, code: int, attempts: int, preemptions: int, notices: int, lost: float) -> RunReport:
        return RunReport(code, time.monotonic() - self._start, attempts, preemptions, notices,
                         self._checkpoints, lost, list(self._events))
