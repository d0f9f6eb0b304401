# SPDX-License-Identifier: MIT
"""`thrifty run`: keep a job going through preemptions.

The runner starts the job (THRIFTY_CHECKPOINT_DIR set, transient.protocol), asks for a checkpoint
(SIGUSR1) on a schedule, treats its own SIGTERM and a first Ctrl-C as a preemption notice
(forwarded; the job has `notice_s` to checkpoint, then it is killed; a terminal's Ctrl-C reaches the
job too, which transient.protocol's JobCheckpoints takes as the same notice), restarts the job whenever it dies from a
preemption, and logs every event with its time to `events.jsonl` in the checkpoint directory.
A job that exits 0 has finished, whenever it does so: during a notice's window (the runner's own, or
an injected one) or at the instant its VM ends, that is success, never a preemption. The job's
stdout goes to the runner's stderr, so that the runner's stdout carries only its own report (one
JSON document with `thrifty run --json`), however many attempts print theirs.

The schedule's intervals are work between checkpoints: a request is due an interval after the
latest of the attempt's start (or, for a job that reports it, the end of its restart), the last
request and the last checkpoint. The job's reports (transient.protocol) give what its checkpoints
and restarts cost; with an AdaptiveSchedule the intervals are planned again from them.

Fault injection: with a lifetime source, every attempt is a fresh VM whose lifetime is drawn
from it on a compressed clock (`time_scale` model seconds per wall second); when it runs out the
job gets SIGKILL, after a SIGTERM `notice_s` before (`kill="sigterm"`, or every other preemption
with `"mixed"`), as a cloud warns before it reclaims a VM: a job that stops on the notice leaves
its VM idle until the end. Lost work is the running time since the last checkpoint (or the
attempt's start) until the job stopped, at each preemption.
"""

import copy
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.folder_lock import FolderBusy, open_lock, take, write_holder
from thrifty.io import check_writable_dir
from thrifty.processes import notice_when_parent_dies
from thrifty.transient.adaptive import AdaptiveSchedule
from thrifty.transient.protocol import (
    ENV_DIR,
    PREEMPTED_EXIT,
    REPORTS,
    check_checkpoint_folder,
    checkpoint_files,
    ready_file,
)
from thrifty.transient.simulation import LifetimeSampler

log = logging.getLogger(__name__)
# events a user of `thrifty run -v` wants to see; the rest (checkpoints, requests, costs) at debug
SAID_EVENTS = frozenset({"start", "preemption_notice", "preemption", "restart", "finished", "failed", "plan_failed"})

KILL_MODES = ("sigkill", "sigterm", "mixed")
POLL_S = 0.01
# A job that stops itself as if preempted (exit 75, or killed by a signal from outside: a cloud's
# SIGTERM, the kernel's OOM killer) is restarted; this many such stops in a row with no checkpoint
# between them are a failing job, not preemptions (one that exited 75 at once was restarted 10,000
# times in 114 s).
MAX_UNPRODUCTIVE_RESTARTS = 5
# Emulated VMs (--inject) that die this many times in a row before the job writes a checkpoint live
# shorter than its restore and first save: the run cannot move (a new user's --time-scale 1e6 made 786
# attempts in 59 s, and would have gone on to max_restarts). Our threshold: a model's short lives are rarely 20 in a row.
MAX_FRUITLESS_PREEMPTIONS = 20
FRUITLESS_LIFE_S = 1.0  # wall seconds: a VM that lives less starts no job (Python alone takes a tenth of it)
STDERR_FD = 2  # the job's stdout: the runner's stdout is its report's alone
LOCK_NAME = ".runner.lock"  # held (flock) by the runner using the folder; hidden, as check_checkpoint_folder allows


def _exit_text(code: int | None) -> str:
    """'killed by SIGKILL' for a signal's negative exit code, else 'exit code N'."""
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def shell_exit_code(code: int) -> int:
    """A process's status as a shell reports it: its exit code, or 128 + N when signal N ended it
    (a job killed by SIGSEGV reads 139, as in bash and POSIX sh)."""
    return 128 - code if code < 0 else code


class RunnerError(ThriftyError):
    """A runner that cannot start the job, or a job that keeps stopping itself."""


@dataclass
class RunReport:
    exit_code: int
    wall_s: float
    attempts: int
    preemptions: int
    notices: int
    checkpoints: int
    lost_work_s: float
    checkpoint_costs_s: list[float] = field(default_factory=list)  # as the job measured them
    restart_costs_s: list[float] = field(default_factory=list)  # start to "working", per attempt
    events: list[dict] = field(default_factory=list)
    failure: str | None = None  # why the job failed on its own (exit_code is then its exit code); None: it did not

    @property
    def stops(self) -> int:
        """The job's stops this runner did not cause (killed from outside, or it exited 75 itself)."""
        return sum(e.get("event") == "stopped" for e in self.events)

    def summary(self) -> dict:
        costs = {"checkpoint_costs_s", "restart_costs_s", "events"}
        out = {k: v for k, v in self.__dict__.items() if k not in costs} | {"stops": self.stops}
        for name in ("checkpoint_costs_s", "restart_costs_s"):
            values = getattr(self, name)
            out[name.replace("costs_s", "cost_median_s")] = statistics.median(values) if values else None
        return out


@dataclass
class _Attempt:
    """One start of the job, and when the runner may next ask it for a checkpoint."""

    number: int
    began: float
    working_at: float | None = None  # when the job reported the end of its restart
    last_request: float = float("-inf")
    requests: int = 0


def _launches_torchrun(command: list[str]) -> bool:
    """Whether `command` starts torchrun: the word `torchrun` before the Python interpreter or script
    (so behind env, nice, uv run and their options), or that interpreter's `-m torch.distributed.run`
    or `.launch` (`-m X` or `-mX`). Arguments after the script are the job's own."""
    for i, word in enumerate(command):
        name = Path(word).name
        if name == "torchrun":
            return True
        if name.startswith("python"):
            rest = command[i + 1:]
            module = rest[1] if rest[:1] == ["-m"] and len(rest) > 1 else \
                rest[0][2:] if rest and rest[0].startswith("-m") else ""
            return module in ("torch.distributed.run", "torch.distributed.launch")
        if word.endswith(".py"):
            return False
    return False


def _refuse_torchrun(command: list[str]) -> None:
    """torchrun as the job is refused (a new user's pass ran `thrifty plan`'s torchrun line under the
    runner): its ranks write the ready file and take the checkpoint requests under their own pids,
    so no request reaches them; a notice makes torchrun itself exit 1, read as the job's failure;
    and a SIGKILL to torchrun leaves its ranks training, holding the run folder the next attempt
    needs. `python -m thrifty.train --nproc N` runs the same training under the runner."""
    if _launches_torchrun(command):
        raise RunnerError("thrifty run does not run torchrun (its ranks take no checkpoint requests, a notice ends it "
                          "as a failure, a kill leaves them running): run `python -m thrifty.train --nproc N ...` "
                          "under thrifty run instead, or the torchrun line alone with THRIFTY_CHECKPOINT_DIR set, as a "
                          "plan's spot task does")


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
    schedule: AdaptiveSchedule | None = None  # when given: its intervals, planned again from measured costs

    def __post_init__(self) -> None:
        if not self.command:
            raise RunnerError("no command to run: put it after --")
        if self.kill not in KILL_MODES:
            raise RunnerError(f"unknown kill mode {self.kill!r}; choose one of {', '.join(KILL_MODES)}")
        if self.schedule is not None and self.intervals_s:
            raise RunnerError("give checkpoint intervals or an adaptive schedule, not both")
        if any(not (x > 0) for x in self.intervals_s):
            raise RunnerError("checkpoint intervals must be positive")
        executable = shutil.which(self.command[0])
        if executable is None or Path(executable).is_dir():
            assignment = "=" in self.command[0] and not self.command[0].startswith("=")  # a shell's VAR=value prefix
            raise RunnerError(f"cannot run {self.command[0]!r}: not found, or not an executable file"
                              + (f" (a variable for the job: thrifty run -- env {self.command[0]} ...)" if assignment else ""))
        _refuse_torchrun(self.command)
        self.checkpoint_dir = Path(self.checkpoint_dir)
        check_writable_dir(self.checkpoint_dir, "the checkpoint folder")
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = self.checkpoint_dir / "events.jsonl"
        self._events: list[dict] = []
        self._start = time.monotonic()
        self._notice_received = False
        self._job_signals_ready = False  # the job has written a ready file (transient.protocol)

    def _event(self, kind: str, **detail) -> None:
        event = {"t_s": round(time.monotonic() - self._start, 6), "wall_time": time.time(), "event": kind, **detail}
        self._events.append(event)
        with self._log_path.open("a") as handle:
            handle.write(json.dumps(event) + "\n")
        log.log(logging.INFO if kind in SAID_EVENTS else logging.DEBUG, "%s %s", kind,
                " ".join(f"{k}={v}" for k, v in detail.items()))

    def _on_sigterm(self, *_) -> None:
        self._notice_received = True

    def _on_sigint(self, *_) -> None:
        """A first Ctrl-C is a notice, as a SIGTERM (the job saves and the run exits 75; the same
        command goes on): it had ended the runner at once and killed the job, losing its work since
        the last checkpoint. A second one stops at once."""
        self._notice_received = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def run(self) -> RunReport:
        """Run the job to its end, holding the checkpoint folder (one runner a folder: two jobs in
        one had overwritten each other's checkpoints and would resume from the other's)."""
        what = f"the checkpoint folder {self.checkpoint_dir}"
        lock_path = self.checkpoint_dir / LOCK_NAME
        ours = not lock_path.exists()
        handle = open_lock(lock_path, what)
        try:
            try:
                take(handle, what)
            except FolderBusy as busy:
                raise RunnerError(f"checkpoint folder {self.checkpoint_dir} is in use by another thrifty run{busy.by}: "
                                  "give each job its own --checkpoint-dir") from None
            write_holder(handle)
            # checked once held: a folder in use would read as another job's files or checkpoints
            # being pruned ("none is intact") instead of "in use"
            try:
                # a folder this runner's events.jsonl marks was an earlier run's of the job: what else
                # is in it is the job's own (a script that saved state.json in it had its restart refused)
                check_checkpoint_folder(self.checkpoint_dir, job_files_allowed=self._log_path.exists())
            except ThriftyError:
                if ours:  # a refused folder is left as it was
                    lock_path.unlink(missing_ok=True)
                raise
            return self._run_holding()
        finally:
            handle.close()

    def _run_holding(self) -> RunReport:
        rng = np.random.default_rng(self.seed)
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        previous_int = signal.signal(signal.SIGINT, self._on_sigint)
        env = {**os.environ, ENV_DIR: str(self.checkpoint_dir)}
        self._seen = {p.name for p in checkpoint_files(self.checkpoint_dir)}
        self._checkpoints = 0
        reports = self.checkpoint_dir / REPORTS
        self._reports_read = reports.stat().st_size if reports.exists() else 0  # an earlier run's: not ours
        self._reports_working = False  # the job reports the end of its restarts
        self._unreported_s = 0.0  # time of attempts stopped before any attempt reported it
        self._checkpoint_costs: list[float] = []
        self._restart_costs: list[float] = []
        self._planning: tuple[tuple[float, float], Future] | None = None
        self._planner = ThreadPoolExecutor(1, thread_name_prefix="thrifty-plan")
        if self.schedule is not None:
            self._event("plan", **self._plan_detail(self.schedule))
        self._warn_of_a_notice_longer_than_lives()
        attempts = preemptions = notices = unproductive = fruitless = 0
        for stale in self.checkpoint_dir.glob(".ready-*"):  # a killed runner's jobs': a new pid may reuse one
            stale.unlink(missing_ok=True)
        lost = 0.0
        proc = None
        try:
            while True:
                if self._notice_received and proc is not None:  # a notice while the last attempt's VM
                    return self._report(PREEMPTED_EXIT, attempts, preemptions, notices, lost)  # lived out
                attempts += 1
                if attempts > self.max_restarts + 1:
                    raise RunnerError(f"gave up after {self.max_restarts} restarts")
                life = (float(self.lifetimes.sample(rng, 1)[0]) / self.time_scale
                        if self.lifetimes is not None else float("inf"))
                # a runner killed outright (kill -9) sends its job the notice: it checkpoints and stops
                # instead of running on beside the next runner of this folder
                proc = subprocess.Popen(self.command, env=env, stdout=STDERR_FD, preexec_fn=notice_when_parent_dies)
                saved_before = self._checkpoints
                attempt = _Attempt(attempts, time.monotonic())
                began = self._last_save = attempt.began
                # a warned preemption: SIGTERM notice_s before the VM's end, SIGKILL at it
                warn = self.kill == "sigterm" or (self.kill == "mixed" and (preemptions + 1) % 2 == 0)
                notice_at = began + max(life - self.notice_s, 0.0) if warn else float("inf")
                warned = False
                self._event("start", attempt=attempts, pid=proc.pid,
                            vm_lifetime_s=None if life == float("inf") else life)
                outcome: tuple[str, int | None] | None = None
                while outcome is None:
                    time.sleep(POLL_S)
                    now = time.monotonic()
                    self._collect(attempt)
                    ready = ready_file(self.checkpoint_dir, proc.pid).exists()  # its handlers are in
                    self._job_signals_ready |= ready
                    code = proc.poll()
                    if code is not None:
                        outcome = ("exit", code)
                    elif self._notice_received:
                        outcome = ("notice", None)
                    elif now - began >= life:
                        outcome = ("preempt", None)
                    elif now >= notice_at and not warned and (
                            ready or not self._job_signals_ready and now >= began + life / 2):
                        # the notice waits for the job's handlers (transient.protocol's ready file; a job
                        # not known to write one, half the VM's life at most): sent before, on a
                        # compressed clock whose VM lives are shorter than the notice, it killed every
                        # attempt at its start and the run never moved
                        warned = True
                        notices += 1
                        proc.send_signal(signal.SIGTERM)
                        self._event("preemption_notice", attempt=attempts, vm_left_s=began + life - now)
                    elif now >= self._next_request(attempt) and ready:
                        attempt.last_request, attempt.requests = now, attempt.requests + 1
                        proc.send_signal(signal.SIGUSR1)
                        self._event("checkpoint_request", attempt=attempts)
                    elif now - self._start > self.timeout_s:
                        raise RunnerError(f"the job did not finish within {self.timeout_s:.0f} s")
                kind, code = outcome
                stopped = time.monotonic()
                ready_file(self.checkpoint_dir, proc.pid).unlink(missing_ok=True)
                if kind == "exit" and code == 0:
                    self._event("finished", attempt=attempts)
                    return self._report(0, attempts, preemptions, notices, lost)
                if kind == "exit" and self._notice_received:
                    # the runner's notice reached the job first: one SIGTERM to the whole process
                    # group (timeout, kill -TERM -PGID, systemd) ends both, and the job's stop is that
                    # notice, not a stop from outside to restart from (it had been restarted once)
                    kind = "notice"
                if kind == "exit" and code is not None and code not in (PREEMPTED_EXIT, -signal.SIGKILL, -signal.SIGTERM):
                    # the job's own failure: reported with the run's counts, and its exit code passed
                    # on (a wrapper that turned it into its own usage error, 2, hid what the job said)
                    self._event("failed", attempt=attempts, exit_code=code)
                    return self._report(shell_exit_code(code), attempts, preemptions, notices, lost,
                                        failure=f"the job failed on its own ({_exit_text(code)})")
                if kind == "notice":  # this machine is going away: let the job save, then stop
                    notices += 1
                    self._event("preemption_notice", attempt=attempts)
                    self._terminate(proc, warn=True)
                    self._collect(attempt)
                    if proc.returncode == 0:  # it finished within the notice: done, nothing to restart
                        self._event("finished", attempt=attempts)
                        return self._report(0, attempts, preemptions, notices, lost)
                    return self._report(PREEMPTED_EXIT, attempts, preemptions, notices, lost)
                if kind == "exit" and not warned:  # it stopped as if preempted, this runner did nothing
                    self._collect(attempt)  # a checkpoint written just before it stopped counts
                    # said, and its work since the last checkpoint counted lost: a restart after a
                    # kill from outside (the OOM killer, a person) had read as a clean run
                    how = _exit_text(code)
                    self._event("stopped", attempt=attempts, exit_code=code, how=how)
                    log.warning("the job stopped (%s) without a notice from this runner; restarting it from its "
                                "last checkpoint", how)
                    lost += self._lost_at_stop(attempt, began, stopped)
                    unproductive = unproductive + 1 if self._checkpoints == saved_before else 0
                    if unproductive >= MAX_UNPRODUCTIVE_RESTARTS:
                        self._event("failed", attempt=attempts, exit_code=code)
                        raise RunnerError(f"the job stopped itself {unproductive} times in a row (exit code {code}) "
                                          f"with no checkpoint in between and no notice from this runner: it is "
                                          f"failing, not being preempted; see {self._log_path}")
                if kind == "exit" and warned:  # it stopped on the notice; the VM lives to its end
                    while time.monotonic() - began < life:
                        time.sleep(POLL_S)
                        self._collect(attempt)
                    kind = "preempt"
                if kind == "preempt" and proc.poll() == 0:  # it finished as its VM ended: no restart
                    self._event("finished", attempt=attempts)
                    return self._report(0, attempts, preemptions, notices, lost)
                if kind == "preempt":
                    preemptions += 1
                    self._event("preemption", attempt=attempts, notice=warned)
                    self._terminate(proc, warn=False)
                    self._collect(attempt)
                    lost += self._lost_at_stop(attempt, began, stopped)
                    # only a job that speaks the protocol (its ready file seen) saves where this runner
                    # looks; one keeping its own state.json, or md run --checkpoint-dir elsewhere, does not,
                    # and is judged only by VMs living under FRUITLESS_LIFE_S, in which no job starts
                    judged = self._job_signals_ready or life < FRUITLESS_LIFE_S
                    fruitless = fruitless + 1 if judged and self._checkpoints == saved_before else 0
                    if fruitless >= MAX_FRUITLESS_PREEMPTIONS:
                        self._event("failed", attempt=attempts, exit_code=None)
                        cure = "; lower --time-scale" if self.time_scale > 1 else ""
                        raise RunnerError(f"{fruitless} emulated VMs in a row died before the job wrote a checkpoint "
                                          f"(this one lived {life:.3g} s): they live shorter than the job takes to "
                                          f"start and save once{cure}")
                self._event("restart", attempt=attempts + 1)
        finally:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
            self._planner.shutdown(wait=False, cancel_futures=True)
            if proc is not None and proc.poll() is None:  # the runner failed: no job left behind
                proc.kill()
                proc.wait()

    def _warn_of_a_notice_longer_than_lives(self) -> None:
        """On a compressed clock a VM may live less than the notice: its notice then comes as its
        job starts, and the job does little work a VM (a new user's pass: 24 attempts in 199 s, 0
        checkpoints, with the default 30 s notice at --time-scale 7200). Said once, up front."""
        if self.lifetimes is None or self.kill == "sigkill":
            return
        # drawn from a copy: a sampler may keep state (a script of lifetimes) that the run's draws need
        draws = copy.deepcopy(self.lifetimes).sample(np.random.default_rng(0), 1001)
        median_s = float(np.median(draws)) / self.time_scale
        if median_s <= 2 * self.notice_s:
            log.warning("the notice (%.3g s) is at least half the median VM life on this clock (%.3g s at "
                        "--time-scale %g): most injected preemptions come as the job starts, and a VM does little "
                        "work; give a shorter --notice or a smaller --time-scale", self.notice_s, median_s, self.time_scale)

    def _lost_at_stop(self, attempt: _Attempt, began: float, stopped: float) -> float:
        """The work an attempt stopped at `stopped` lost since its last checkpoint; for a job that
        never reports the end of its restarts, kept apart (a start-up, unless the job never reports:
        RunReport's lost) and 0 here."""
        work_began = self._work_began(attempt, stopped)
        if work_began is None:
            self._unreported_s += max(stopped - max(self._last_save, began), 0.0)
            return 0.0
        return max(stopped - max(self._last_save, work_began), 0.0)

    def _work_began(self, attempt: _Attempt, stopped: float) -> float | None:
        """When the attempt's work began: its report of the end of its restart; for a job that reports
        it and was stopped before, `stopped` (it was still starting: a restart cost, not work lost);
        None while no attempt has reported (a job that never does has its time from each start
        counted as lost when the run ends; one that does, as start-up)."""
        if attempt.working_at is not None:
            return attempt.working_at
        return stopped if self._reports_working else None

    def _intervals(self) -> list[float]:
        return self.schedule.intervals_s if self.schedule is not None else self.intervals_s

    def _next_request(self, attempt: _Attempt) -> float:
        """An interval of work (the schedule's next, then its last again) after the latest of the
        attempt's start, the last request and the last checkpoint. A job that reports the end
        of its restarts is asked nothing before it."""
        intervals = self._intervals()
        if not intervals or (attempt.working_at is None and self._reports_working):
            return float("inf")
        start = attempt.began if attempt.working_at is None else attempt.working_at
        return max(start, attempt.last_request, self._last_save) + intervals[min(attempt.requests, len(intervals) - 1)]

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

    def _collect(self, attempt: _Attempt) -> None:
        """Log checkpoints the job has written since the last look, and what it reported."""
        for path in checkpoint_files(self.checkpoint_dir):
            if path.name not in self._seen:
                self._seen.add(path.name)
                self._checkpoints += 1
                self._last_save = time.monotonic()
                self._event("checkpoint", file=path.name, attempt=attempt.number)
        measured = False
        for record in self._new_reports():
            if record.get("event") == "working" and attempt.working_at is None:
                attempt.working_at = time.monotonic()
                self._reports_working = measured = True
                self._restart_costs.append(attempt.working_at - attempt.began)
                self._event("working", attempt=attempt.number, restart_s=self._restart_costs[-1])
            elif record.get("event") == "checkpoint" and isinstance(record.get("cost_s"), (int, float)):
                self._checkpoint_costs.append(float(record["cost_s"]))
                measured = True
                self._event("checkpoint_cost", attempt=attempt.number, file=record.get("file"),
                            cost_s=self._checkpoint_costs[-1])
        if self.schedule is not None:
            self._plan_again(self.schedule, measured)

    def _plan_again(self, schedule: AdaptiveSchedule, measured: bool) -> None:
        """Adopt a plan made in the background, and start one when a measured cost has moved: a
        DP solve takes 0.1-2 s, which must not hold up the kills and requests of a compressed clock."""
        if self._planning is not None and self._planning[1].done():
            costs, future = self._planning
            self._planning = None
            try:
                schedule.adopt(*costs, future.result())
                self._event("plan", **self._plan_detail(schedule))
            except ThriftyError as exc:  # e.g. no VM survives the measured restart: keep the last plan
                self._event("plan_failed", checkpoint_cost_s=costs[0], restart_cost_s=costs[1], error=str(exc))
            measured = True
        if measured and self._planning is None:
            moved = schedule.moved(self._checkpoint_costs, self._restart_costs)
            if moved is not None:
                self._planning = (moved, self._planner.submit(schedule.intervals_for, *moved))

    def _new_reports(self) -> list[dict]:
        """Whole lines the job appended to its reports since the last look (a line garbled by a
        kill is skipped)."""
        try:
            with (self.checkpoint_dir / REPORTS).open("rb") as handle:
                handle.seek(self._reports_read)
                data = handle.read()
        except FileNotFoundError:
            return []
        whole = data[:data.rfind(b"\n") + 1]
        self._reports_read += len(whole)
        records = []
        for line in whole.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records

    @staticmethod
    def _plan_detail(schedule: AdaptiveSchedule) -> dict:
        return {"checkpoint_cost_s": schedule.checkpoint_cost_s, "restart_cost_s": schedule.restart_cost_s,
                "intervals_s": schedule.intervals_s}

    def _report(self, code: int, attempts: int, preemptions: int, notices: int, lost: float,
                failure: str | None = None) -> RunReport:
        lost += 0.0 if self._reports_working else self._unreported_s
        return RunReport(code, time.monotonic() - self._start, attempts, preemptions, notices,
                         self._checkpoints, lost, list(self._checkpoint_costs), list(self._restart_costs),
                         list(self._events), failure)
