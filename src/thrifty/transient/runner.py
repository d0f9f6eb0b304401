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

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.transient.protocol import ENV_DIR, PREEMPTED_EXIT, checkpoint_files, ready_file
from thrifty.transient.schedule import Lifetimes

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
    lifetimes: Lifetimes | None = None
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
        self.checkpoint_dir = Path(self.checkpoint_dir)
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
        seen = {p.name for p in checkpoint_files(self.checkpoint_dir)}
        attempts = preemptions = notices = checkpoints = 0
        lost = 0.0
        try:
            while True:
                attempts += 1
                if attempts > self.max_restarts + 1:
                    raise RunnerError(f"gave up after {self.max_restarts} restarts")
                life = (float(self.lifetimes.sample(rng, 1)[0]) / self.time_scale
                        if self.lifetimes is not None else float("inf"))
                proc = subprocess.Popen(self.command, env=env)
                began = last_save = time.monotonic()
                self._event("start", attempt=attempts, pid=proc.pid,
                            vm_lifetime_s=None if life == float("inf") else life)
                requests = self._request_times(began)
                outcome = None
                while outcome is None:
                    time.sleep(POLL_S)
                    now = time.monotonic()
                    for path in sorted(checkpoint_files(self.checkpoint_dir)):
                        if path.name not in seen:
                            seen.add(path.name)
                            checkpoints += 1
                            last_save = now
                            self._event("checkpoint", file=path.name, attempt=attempts)
                    code = proc.poll()
                    if code is not None:
                        outcome = ("exit", code)
                    elif self._notice_received:
                        outcome = ("notice", None)
                    elif now - began >= life:
                        outcome = ("preempt", None)
                    elif requests and now >= requests[0] and ready_file(self.checkpoint_dir, proc.pid).exists():
                        requests.pop(0)
                        proc.send_signal(signal.SIGUSR1)
                        self._event("checkpoint_request", attempt=attempts)
                    elif now - self._start > self.timeout_s:
                        proc.kill()
                        raise RunnerError(f"the job did not finish within {self.timeout_s:.0f} s")
                kind, code = outcome
                ready_file(self.checkpoint_dir, proc.pid).unlink(missing_ok=True)
                if kind == "exit" and code == 0:
                    self._event("finished", attempt=attempts)
                    return self._report(0, attempts, preemptions, notices, checkpoints, lost)
                if kind == "exit" and code not in (PREEMPTED_EXIT, -signal.SIGKILL, -signal.SIGTERM):
                    self._event("failed", attempt=attempts, exit_code=code)
                    raise RunnerError(f"the job failed on its own with exit code {code}; see {self._log_path}")
                if kind == "notice":  # this machine is going away: let the job save, then stop
                    notices += 1
                    self._event("preemption_notice", attempt=attempts)
                    self._terminate(proc, warn=True)
                    seen, checkpoints, last_save = self._collect(seen, checkpoints, attempts, last_save)
                    return self._report(PREEMPTED_EXIT, attempts, preemptions, notices, checkpoints, lost)
                if kind == "preempt":
                    preemptions += 1
                    warn = self.kill == "sigterm" or (self.kill == "mixed" and preemptions % 2 == 0)
                    notices += int(warn)
                    self._event("preemption", attempt=attempts, notice=warn)
                    self._terminate(proc, warn=warn)
                    seen, checkpoints, last_save = self._collect(seen, checkpoints, attempts, last_save)
                lost += max(time.monotonic() - max(last_save, began), 0.0) if kind == "preempt" else 0.0
                self._event("restart", attempt=attempts + 1)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _request_times(self, began: float) -> list[float]:
        times, t = [], began
        for interval in self.intervals_s:
            t += interval
            times.append(t)
        if self.intervals_s:  # past the schedule, keep the last interval
            for _ in range(10_000):
                t += self.intervals_s[-1]
                times.append(t)
        return times

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

    def _collect(self, seen: set, checkpoints: int, attempt: int, last_save: float):
        for path in sorted(checkpoint_files(self.checkpoint_dir)):
            if path.name not in seen:
                seen.add(path.name)
                checkpoints += 1
                last_save = time.monotonic()
                self._event("checkpoint", file=path.name, attempt=attempt)
        return seen, checkpoints, last_save

    def _report(self, code: int, attempts: int, preemptions: int, notices: int, checkpoints: int,
                lost: float) -> RunReport:
        return RunReport(code, time.monotonic() - self._start, attempts, preemptions, notices, checkpoints,
                         lost, list(self._events))
