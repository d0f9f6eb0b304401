# SPDX-License-Identifier: MIT
"""`local`: the search on real `thrifty train` processes on this machine, on emulated VM types.

A type is (name, speed, workers per node, $/h per node), read from a CSV (the bundled default is
data/search/local_types.csv; `--types` replaces it). A configuration runs as one `thrifty train`
launch with nodes x workers-per-node ranks here, each slowed to `speed` of this machine by the
trainer's sleep emulation (a rank's compute takes 1/speed as long), with equal local batches
(policy uniform). The launch streams one line per step (`--step-stream`). A move gives the
launch the runner's preemption notice (SIGTERM: every rank checkpoints after the same step and
the launch exits 75), then starts the new configuration with `--resume`: the checkpoint carries
the model, the optimizer state and the sampler's position, so no training is lost. A move that
changes the global batch alone (search.config.batch_change_only) is a batch request to the
running launch instead (train.batch_requests: every rank changes after the same step, no restart);
one the launch refuses falls back to the relaunch.

Clocks and bills: the job's clock is the wall clock since its first launch, so a relaunch costs
what it really costs here (process start, checkpoint, resume), and a batch change in place what
the trainer reports it took (its first step at the new batch is measured as a step), plus an emulated VM start-up
(`startup_cost_s`, added to the clock and the bill, not waited for) whenever a move needs new
VMs. Progress: every step trained counts at its global batch through the noise schedule
(search.noise_schedule), as in `sim`. Gradient noise: the stream's steps carry their unbiased
|G|^2 and tr(Sigma) estimates (every step with several ranks, every 8th with one), and a window
hands them to the search, which estimates B_noise from them; the schedule given by the user only
counts progress. Billing: per second, with a one-minute minimum per VM lifetime
(search.billing).
"""

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from thrifty.data import data_path
from thrifty.errors import ThriftyError
from thrifty.io import read_csv
from thrifty.processes import notice_when_parent_dies
from thrifty.search.backend import NoiseSample, ScheduledJob, Window
from thrifty.search.billing import MINIMUM_BILLED_S, Billing
from thrifty.search.config import Config, batch_change_only, needs_new_vms
from thrifty.search.loop import SearchSettings
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.train.batch_requests import REPLY_NAME, BatchRequest, read_reply, write_request
from thrifty.transient.protocol import ENV_DIR, PREEMPTED_EXIT, ready_file

log = logging.getLogger(__name__)

TYPE_COLUMNS = ("instance_type", "speed", "workers_per_node", "price_per_hour")
FIRST_RESTART_GUESS_S = 5.0  # a relaunch here before one was measured: process start + resume
FIRST_BATCH_CHANGE_GUESS_S = 0.5  # a batch change in place before one was measured
POLL_S = 0.02


@dataclass(frozen=True)
class LocalType:
    """An emulated VM type: `speed` of this machine per rank, `price_per_hour` per node."""

    instance_type: str
    speed: float
    workers_per_node: int
    price_per_hour: float


def load_local_types(path: Path | None = None) -> list[LocalType]:
    """The emulated type table (CSV with TYPE_COLUMNS); the bundled default without a path."""
    where = Path(path) if path else data_path("search", "local_types.csv")
    types = []
    for line, row in enumerate(read_csv(where, ThriftyError, "emulated VM types", required=TYPE_COLUMNS), start=2):
        try:
            t = LocalType(row["instance_type"].strip(), float(row["speed"]), int(row["workers_per_node"]),
                          float(row["price_per_hour"]))
        except ValueError as exc:
            raise ThriftyError(f"{where}:{line}: not a number ({exc})") from None
        if not t.instance_type or not (0 < t.speed <= 1) or t.workers_per_node < 1 or not (
                0 < t.price_per_hour < float("inf")):
            raise ThriftyError(f"{where}:{line}: needs a name, a speed in (0, 1], at least one worker per "
                               "node and a positive price")
        types.append(t)
    if len({t.instance_type for t in types}) != len(types):
        raise ThriftyError(f"{where}: an instance type appears twice")
    return types


def local_candidates(types: Sequence[LocalType], global_batches: Sequence[int], *, max_nodes: int,
                     max_ranks: int) -> list[Config]:
    """Every configuration the machine can run: nodes x workers within `max_ranks` ranks, and
    global batches that give every rank a whole, equal local batch."""
    configs = []
    for t in types:
        for nodes in range(1, max_nodes + 1):
            ranks = nodes * t.workers_per_node
            if ranks <= max_ranks:
                configs += [Config(t.instance_type, nodes, ranks, b) for b in global_batches if b % ranks == 0]
    if not configs:
        raise ThriftyError(f"no configuration of these types and batches fits this machine: every type needs more "
                           f"than --max-ranks {max_ranks} ranks on one node, or no global batch of --batches "
                           "splits evenly over its ranks")
    return sorted(configs)


class LocalBackend(ScheduledJob):
    """One job trained by `thrifty train` launches in `work_dir` (its run directory, checkpoints,
    step streams and database)."""

    minimum_billed_s = MINIMUM_BILLED_S

    def __init__(self, workload: str, types: Sequence[LocalType], schedule: NoiseSchedule, work_dir: Path, *,
                 global_batches: Sequence[int], max_nodes: int = 2, max_ranks: int = 2,
                 startup_cost_s: float = 0.0, seed: int = 0, timeout_s: float = 1800.0) -> None:
        self.workload, self.schedule, self.work_dir = workload, schedule, Path(work_dir)
        self.types = {t.instance_type: t for t in types}
        self.configs = local_candidates(types, global_batches, max_nodes=max_nodes, max_ranks=max_ranks)
        self.startup_cost_s, self.seed, self.timeout_s = startup_cost_s, seed, timeout_s
        self.restarts_s: list[float] = []  # measured pauses of relaunches (stop -> first step)
        self.batch_changes_s: list[float] = []  # batch changes in place: what each took (the trainer's reply)
        self._batch_requests = 0  # batch requests sent (their ids)
        self._current: Config | None = None
        self._progress = 0.0
        self._next_step = 0  # steps trained (and counted) so far
        self._clock_origin: float | None = None  # monotonic time of elapsed 0 (emulated time apart)
        self._emulated_s = 0.0  # VM start-ups: on the clock and the bill, not waited for
        self._frozen_elapsed: float | None = None  # the clock while no launch runs
        self._billing = Billing()
        self._billed_until = 0.0  # the elapsed time the bill has run to
        self._proc: subprocess.Popen | None = None
        self._stream: Path | None = None
        self._stream_pos = 0
        self._rows: list[dict] = []  # streamed steps not yet handed out in a window
        self._stopped_at: float | None = None  # monotonic time of the last move's notice
        self._launches = 0
        self._log: TextIO | None = None  # the running launch's output
        self._last_progress_at = 0.0  # monotonic time of its launch or latest step (the timeout's origin)

    # the protocol (search.backend.Backend)
    def candidates(self) -> list[Config]:
        return list(self.configs)

    def price_per_hour(self, config: Config) -> float:
        return self._type(config).price_per_hour * config.num_nodes

    def move_cost_s(self, old: Config | None, config: Config) -> float:
        restart = float(np.mean(self.restarts_s)) if self.restarts_s else FIRST_RESTART_GUESS_S
        if old == config:
            return 0.0
        if batch_change_only(old, config):
            return float(np.mean(self.batch_changes_s)) if self.batch_changes_s else FIRST_BATCH_CHANGE_GUESS_S
        return restart + (self.startup_cost_s if needs_new_vms(old, config) else 0.0)

    def launch(self, config: Config) -> None:
        self._type(config)
        if config not in self.configs:
            raise ThriftyError(f"configuration {config.label()} cannot run here")
        if config == self._current and self._proc is not None:
            return
        if self._clock_origin is None:
            self._clock_origin = time.monotonic()
        old = self._current
        if self._proc is not None and old is not None and batch_change_only(old, config) and \
                self._change_batch(old, config):
            return
        new_vms = needs_new_vms(self._current, config)
        self._stop()
        self._rows = []  # steps the old launch trained after its last window: counted, not measured
        self._bill()
        self._billing.launch(self.price_per_hour(config), new_vms)
        if new_vms:
            self._emulated_s += self.startup_cost_s  # billed at the new configuration's price
        self._current = config
        self._start()

    def measure(self, steps: int) -> Window:
        if self._current is None:
            raise ThriftyError("launch a configuration before measuring")
        self._resume_if_stopped()
        while len(self._rows) < steps and self._proc is not None:
            self._poll()
        window, self._rows = self._rows[:steps], self._rows[steps:]
        times = np.array([r["step_time_s"] for r in window], float)
        sync = float(np.mean([r["sync_time_s"] for r in window])) if window else None
        noisy = [r for r in window if "grad_sq" in r]
        noise = NoiseSample(np.array([r["grad_sq"] for r in noisy], float),
                            np.array([r["trace"] for r in noisy], float))
        return Window(times, noise, sync)

    def train_until(self, progress: float) -> None:
        self._resume_if_stopped()
        while self._proc is not None and self._progress < min(progress, self.target):
            self._poll()
        self._rows = []  # trained, not measured
        self._bill()

    def finish(self) -> None:
        self._resume_if_stopped()
        while self._proc is not None:
            self._poll()
        self._rows = []
        self._bill()

    def state(self) -> dict:
        return {"current": None if self._current is None else self._current.to_dict(),
                "progress": self._progress, "next_step": self._next_step, "elapsed_s": self.elapsed_s,
                "emulated_s": self._emulated_s, "billing": self._billing.state(), "billed_until": self._billed_until,
                "restarts_s": self.restarts_s, "batch_changes_s": self.batch_changes_s,
                "batch_requests": self._batch_requests, "launches": self._launches}

    def restore(self, state: dict) -> None:
        """Continue a killed search: the clock goes on from the stored time; the next window
        relaunches the job from its newest checkpoint (steps retrained after it cost time but
        count once)."""
        checkpoints = self.work_dir / "checkpoints"
        if state["next_step"] > 0 and not (checkpoints.is_dir() and any(checkpoints.glob("ckpt-*.bin"))):
            ran_here = any(self.work_dir.glob("launch-*.log")) or any(self.work_dir.glob("steps-*.jsonl"))
            if not ran_here:  # a new user's pass: a work folder moved away, and the job began again unsaid
                raise ThriftyError(f"--resume: the stored search had trained its job to step {state['next_step']}, "
                                   f"and --work-dir {self.work_dir} holds none of its launches: give the --work-dir it "
                                   "ran in, or start a new search without --resume")
            # killed before any checkpoint (launches checkpoint on a notice only): retrained, counted once
            log.warning("--resume: %s holds no checkpoint of the job (its launch was killed before one): it trains "
                        "again from step 0, and the steps to %d count once", self.work_dir, state["next_step"])
        self._current = None if state["current"] is None else Config(**state["current"])
        self._progress, self._next_step = state["progress"], state["next_step"]
        self._emulated_s, self.restarts_s = state["emulated_s"], list(state["restarts_s"])
        self.batch_changes_s = list(state.get("batch_changes_s", []))  # absent: stored before batch changes
        self._batch_requests = int(state.get("batch_requests", 0))
        self._billing.restore(state["billing"])
        self._billed_until = state["billed_until"]
        self._launches = state["launches"]
        self._clock_origin = time.monotonic() - (state["elapsed_s"] - self._emulated_s)

    @property
    def elapsed_s(self) -> float:
        if self._clock_origin is None:
            return 0.0
        if self._frozen_elapsed is not None:
            return self._frozen_elapsed
        return time.monotonic() - self._clock_origin + self._emulated_s

    @property
    def cost_usd(self) -> float:
        self._bill()
        return self._billing.cost_usd

    # the processes
    def _resume_if_stopped(self) -> None:
        """A restored search has no launch running: the job resumes from its checkpoint."""
        if self._proc is None and not self.done:
            self._start()

    def _running(self) -> tuple[subprocess.Popen, TextIO]:
        """The running launch and its log."""
        if self._proc is None or self._log is None:
            raise ThriftyError("no thrifty train launch is running")
        return self._proc, self._log

    def _start(self) -> None:
        config = self._current
        if config is None:
            raise ThriftyError("no configuration launched: nothing to start")
        self._launches += 1
        self.work_dir.mkdir(parents=True, exist_ok=True)
        checkpoints = self.work_dir / "checkpoints"
        resume = checkpoints.is_dir() and any(checkpoints.glob("ckpt-*.bin"))
        self._stream, self._stream_pos = self.work_dir / f"steps-{self._launches:03d}.jsonl", 0
        slowdown = 1.0 / self._type(config).speed
        command = [sys.executable, "-m", "thrifty.cli", "train", "--workload", self.workload,
                   "--nproc", str(config.num_workers), "--global-batch", str(config.global_batch),
                   "--policy", "uniform", "--b-max", str(max(c.global_batch for c in self.configs)),
                   "--slowdown", ",".join([f"{slowdown:g}"] * config.num_workers),
                   "--steps", str(self._last_step(config.global_batch)), "--checkpoint-every", "0",
                   "--run-dir", str(self.work_dir / "run"), "--step-stream", str(self._stream),
                   "--db", str(self.work_dir / "train.db"), "--seed", str(self.seed), "--json"]
        if resume:
            command.append("--resume")
        env = {**os.environ, ENV_DIR: str(checkpoints), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
        self._frozen_elapsed = None
        self._log = open(self.work_dir / f"launch-{self._launches:03d}.log", "w")
        self._proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True, preexec_fn=notice_when_parent_dies)
        log.info("launch %d: %s, %d workers at %g of this machine's speed, up to step %d%s; log %s", self._launches,
                 config.label(), config.num_workers, 1.0 / slowdown, self._last_step(config.global_batch),
                 ", resumed from its checkpoint" if resume else "", self._log.name)
        self._last_progress_at = time.monotonic()

    def _poll(self) -> None:
        """Read new step lines; notice when the launch ends."""
        got = self._read_stream()
        if got:
            return
        proc, launch_log = self._running()
        code = proc.poll()
        if code is None:
            if time.monotonic() - self._last_progress_at > self.timeout_s:
                self._kill()
                raise ThriftyError(f"thrifty train made no progress for {self.timeout_s:.0f} s; log: {launch_log.name}")
            time.sleep(POLL_S)
            return
        self._read_stream()
        self._ended(code)

    def _read_stream(self) -> bool:
        if self._stream is None or not self._stream.exists():
            return False
        with open(self._stream) as handle:
            handle.seek(self._stream_pos)
            text = handle.read()
        complete = text[:text.rfind("\n") + 1]
        self._stream_pos += len(complete.encode())
        rows = [json.loads(line) for line in complete.splitlines() if line.strip()]
        for row in rows:
            self._count(row)
        return bool(rows)

    def _count(self, row: dict) -> None:
        if self._stopped_at is not None:  # the first step after a move ends its pause
            self.restarts_s.append(max(time.monotonic() - self._stopped_at - row["step_time_s"], 0.0))
            self._stopped_at = None
            log.debug("the relaunch paused training for %.1f s", self.restarts_s[-1])
        self._last_progress_at = time.monotonic()
        if row["step"] < self._next_step:
            return  # retrained after a restored search's relaunch: already counted
        # this step, and any before it past the stored state that a restored search's launch resumed
        # beyond (a search stopped half-way checkpoints: close): they trained, at this batch
        if row["step"] > self._next_step:  # said once (a new user's pass: a resumed search's time looked too low)
            log.warning("steps %d-%d trained after the last stored window, before the search stopped: they count "
                        "in its progress, not in its time or cost (docs/search.md, --resume)",
                        self._next_step, row["step"] - 1)
        self._progress = self.schedule.advance(self._progress, row["step"] + 1 - self._next_step, row["global_batch"])
        self._next_step = row["step"] + 1
        self._rows.append(row)

    def _ended(self, code: int) -> None:
        _, launch_log = self._running()
        self._proc = None
        launch_log.close()
        self._frozen_elapsed = self.elapsed_s
        if code not in (0, PREEMPTED_EXIT):
            tail = Path(launch_log.name).read_text()[-2000:].strip().splitlines()
            raise ThriftyError(f"thrifty train exited with {code}: {tail[-1] if tail else 'no output'} "
                               f"(log: {launch_log.name})")
        if code == 0 and not self.done:  # the launch trained every step asked for: the target is reached
            self._progress = self.target

    def _change_batch(self, old: Config, config: Config) -> bool:
        """Ask the running launch (on `old`) to train on at `config`'s global batch, in place
        (train.batch_requests); True once it did, False when it refused or ended first (the
        caller relaunches). Steps trained meanwhile at the old batch count, unmeasured. The first
        last step asked for is an upper bound (the steps still to go at the smaller of the two
        batches: the steps trained while the request travels make at least that much progress
        each), so the launch cannot end short of the target; a second request sets it exactly."""
        reply = self._request(config.global_batch, self._last_step(min(old.global_batch, config.global_batch)))
        if reply is None or not reply["applied"] or reply["global_batch"] != config.global_batch:
            why = "the launch ended first" if reply is None else reply["reason"] or f"it runs {reply['global_batch']}"
            log.warning("the batch change to %d was not taken in place (%s): relaunching", config.global_batch, why)
            return False
        log.info("global batch %d -> %d in place after step %d", old.global_batch, config.global_batch, reply["step"])
        self.batch_changes_s.append(float(reply["change_s"]))
        self._current = config
        # the steps at the old batch while the request travelled: counted at the old batch, and the
        # run's last step, set from the progress when it was asked, set again from the progress now
        while self._next_step < reply["step"] and self._proc is not None:
            self._poll()
        self._rows = [r for r in self._rows if r["global_batch"] == config.global_batch]
        last = self._last_step(config.global_batch)
        if self._proc is not None and last != reply["steps"]:
            self._request(config.global_batch, last)  # refused only when the launch is past it: it ends
        return True

    def _last_step(self, global_batch: int) -> int:
        """The step after which the job reaches its target from here, at `global_batch`."""
        remaining = int(np.ceil(self.schedule.steps(self._progress, self.target, global_batch) - 1e-9))
        return self._next_step + max(remaining, 1)

    def _request(self, global_batch: int, steps: int) -> dict | None:
        """One batch request to the running launch and its reply; None when the launch ended first."""
        proc = self._ready()
        if proc is None:
            return None
        checkpoints = self.work_dir / "checkpoints"
        self._batch_requests += 1
        request = BatchRequest(self._batch_requests, global_batch, steps)
        (checkpoints / REPLY_NAME).unlink(missing_ok=True)  # a restored search may reuse an id: no stale answer
        write_request(checkpoints, request)
        proc.send_signal(signal.SIGUSR2)
        while self._proc is not None:
            reply = read_reply(checkpoints)
            if reply is not None and reply.get("id") == request.id:
                return reply
            self._poll()
        return None

    def _ready(self) -> subprocess.Popen | None:
        """The running launch once its signal handlers are in place (its ready file), or None when
        it ended first."""
        if self._proc is None:
            return None
        checkpoints = self.work_dir / "checkpoints"
        deadline = time.monotonic() + self.timeout_s
        while not ready_file(checkpoints, self._proc.pid).exists() and self._proc.poll() is None:
            if time.monotonic() > deadline:
                self._kill()
                raise ThriftyError("thrifty train never became ready for a checkpoint request")
            time.sleep(POLL_S)
        return self._proc

    def _stop(self) -> None:
        """Preemption notice to the running launch; waits until it checkpointed and exited."""
        proc = self._ready()
        if proc is None:
            return
        noticed_at = time.monotonic()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        while self._proc is not None:
            self._poll()
        self._frozen_elapsed = None
        self._stopped_at = noticed_at  # the next launch's first step ends the pause

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        if self._log is not None:
            self._log.close()
        self._proc = None

    def close(self) -> None:
        """End a launch that still runs when the search ends. One whose job reached its target trains
        to its last step: its final checkpoint and summary are the trained model (killed, it had
        left none when the target came inside the first window). Any other (a search stopped
        half-way: an error, Ctrl-C) gets the runner's notice and checkpoints, so `--resume` loses
        nothing (killed, it had lost every step since the launch began: launches checkpoint on
        notices only). One still starting (no ready file: no step trained) is killed at once, as is one
        that does not end within the timeout (or on a second Ctrl-C)."""
        proc = self._proc
        try:
            if proc is not None and proc.poll() is None:
                if self.done:
                    log.info("the job reached its target: waiting for its launch to end (up to %.0f s)", self.timeout_s)
                elif ready_file(self.work_dir / "checkpoints", proc.pid).exists():
                    log.warning("stopping the launch: it checkpoints first (up to %.0f s)", self.timeout_s)
                    proc.send_signal(signal.SIGTERM)
                else:  # still starting: no step trained since its checkpoint, nothing to save (it would train on)
                    return
                proc.wait(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("the launch did not end within %.0f s: killed", self.timeout_s)
        finally:
            self._kill()

    def _type(self, config: Config) -> LocalType:
        try:
            return self.types[config.instance_type]
        except KeyError:
            raise ThriftyError(f"instance type {config.instance_type!r} is not an emulated type here "
                               f"(known: {', '.join(sorted(self.types))})") from None

    def _bill(self) -> None:
        """Run the bill up to the clock."""
        now = self.elapsed_s
        self._billing.run(now - self._billed_until)
        self._billed_until = now


def local_search_settings(objective: Objective, backend: LocalBackend) -> SearchSettings:
    """How a search on the local backend decides: the job's stated noise schedule (the user's or
    the workload job model's, which also counts the job's progress) is the prior that the noise
    the trainer measures is weighed against (search.noise_estimate)."""
    return SearchSettings(objective=objective, noise_prior=backend.schedule)
