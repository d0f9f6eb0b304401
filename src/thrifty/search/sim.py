# SPDX-License-Identifier: MIT
"""`sim`: a trace-driven cloud. Step times come from a trace with lognormal measurement noise;
progress follows the noise schedule (search.noise_schedule); time and money follow cloud billing.

Billing per second with a one-minute minimum per VM lifetime (search.billing). A move costs
`restart_cost_s` (checkpoint, relaunch, resume) and, when new VMs are needed (another type, or
more nodes), `startup_cost_s` more; both are billed and make no progress. A move that changes the
global batch alone (search.config.batch_change_only) is taken in place, as `thrifty train` takes a
batch request: no restart, `batch_change_cost_s` (default BATCH_CHANGE_COST_S). The first launch pays
the start-up cost. A configuration not in the trace cannot run. A configuration the trace measured
on several launches (search.trace) runs, each time it is launched, as one of them drawn at random
(`draw_launches`; without it, as their mean: the oracle's expectation)."""

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.perf.noise import noise_due
from thrifty.search.backend import NoiseSample, ScheduledJob, Window
from thrifty.search.billing import MINIMUM_BILLED_S, Billing
from thrifty.search.config import Config, batch_change_only, needs_new_vms
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.trace import Launch, TraceRow

GRAD_SQ_SPREAD, TRACE_SPREAD = 3.9, 2.2  # per-step relative sd of the estimates (module docstring)
# an in-place batch change on a GPU VM: the data loader's workers refill at the new batch and the
# first steps at new shapes pay cuDNN's algorithm search and the allocator's growth (an assumption:
# seconds, not the minute a relaunch takes; `thrifty search --backend local` measures its own)
BATCH_CHANGE_COST_S = 5.0


class SimBackend(ScheduledJob):
    """One simulated job on one trace; a new instance per search (it carries the job's state)."""

    minimum_billed_s = MINIMUM_BILLED_S

    def __init__(self, rows: list[TraceRow], schedule: NoiseSchedule, *, seed: int = 0,
                 measurement_noise: float = 0.03, grad_sq_spread: float = GRAD_SQ_SPREAD,
                 trace_spread: float = TRACE_SPREAD, restart_cost_s: float = 60.0,
                 startup_cost_s: float = 60.0, batch_change_cost_s: float = BATCH_CHANGE_COST_S,
                 draw_launches: bool = True) -> None:
        self.rows = {r.config: r for r in rows}
        self.draw_launches = draw_launches
        self.schedule = schedule
        self.rng = np.random.default_rng(seed)
        self.measurement_noise = measurement_noise
        self.grad_sq_spread, self.trace_spread = grad_sq_spread, trace_spread
        self.restart_cost_s, self.startup_cost_s = restart_cost_s, startup_cost_s
        self.batch_change_cost_s = batch_change_cost_s
        self._current: Config | None = None
        self._launch: Launch | None = None  # what the current configuration's launch landed on
        self._progress = self._elapsed_s = 0.0
        self._steps = 0  # steps trained: which of them measure the noise
        self._billing = Billing()

    def candidates(self) -> list[Config]:
        return sorted(self.rows)

    def price_per_hour(self, config: Config) -> float:
        return self._row(config).price_per_hour

    def move_cost_s(self, old: Config | None, config: Config) -> float:
        if old is None:
            return self.startup_cost_s
        if old == config:
            return 0.0
        if batch_change_only(old, config):
            return self.batch_change_cost_s
        return self.restart_cost_s + (self.startup_cost_s if needs_new_vms(old, config) else 0.0)

    def launch(self, config: Config) -> None:
        row = self._row(config)
        if config == self._current:
            return
        pause_s = self.move_cost_s(self._current, config)
        self._billing.launch(row.price_per_hour, needs_new_vms(self._current, config))
        self._current, self._launch = row.config, self._land(row)
        self._run(pause_s)

    def _land(self, row: TraceRow) -> Launch:
        """The launch this launch of `row` lands on (module docstring); a row of one launch draws
        nothing, so such traces replay exactly as before launches existed."""
        if self.draw_launches and len(row.launches) > 1:
            return row.launches[int(self.rng.integers(len(row.launches)))]
        return row.mean

    def measure(self, steps: int) -> Window:
        row, launch = self._require_current()
        batch = row.config.global_batch
        remaining = self.schedule.steps(self._progress, self.target, batch)
        steps = int(min(steps, np.ceil(remaining - 1e-9)))
        # lognormal with mean 1, so the trace's value is the mean step time
        sigma = self.measurement_noise
        times = launch.step_time_s * self.rng.lognormal(-sigma**2 / 2, sigma, size=max(steps, 0))
        noise = self._noise(sum(noise_due(self._steps + k + 1, row.config.num_workers) for k in range(len(times))))
        self._steps += len(times)
        self._progress = self.schedule.advance(self._progress, steps, batch)
        self._run(float(times.sum()))
        sync = None if launch.sync_time_s is None else launch.sync_time_s * float(
            self.rng.lognormal(-sigma**2 / 2, sigma))  # the window's mean sync, measured like a step
        return Window(times, noise, sync)

    def _noise(self, steps: int) -> NoiseSample:
        """`steps` measured steps' estimates (module docstring): means 1 and B_noise(progress)."""
        shape = 1 / self.trace_spread**2  # gamma: relative sd 1 / sqrt(shape)
        grad_sq = self.rng.normal(1.0, self.grad_sq_spread, size=steps)
        trace = self.rng.gamma(shape, self.schedule.at(self._progress) / shape, size=steps)
        return NoiseSample(grad_sq, trace)

    def train_until(self, progress: float) -> None:
        """The steps to `progress` at the mean step time (noise averages out over many steps)."""
        row, launch = self._require_current()
        batch = row.config.global_batch
        end = min(progress, self.target)
        steps = max(np.ceil(self.schedule.steps(self._progress, end, batch) - 1e-9), 0.0)
        self._steps += int(steps)
        self._progress = self.target if end >= self.target else self.schedule.advance(self._progress, steps, batch)
        self._run(float(steps) * launch.step_time_s)

    def finish(self) -> None:
        self.train_until(self.target)

    def state(self) -> dict:
        """The job's checkpoint (JSON-ready): configuration, progress, clocks, billing and the
        random generator's state, so a restored sim draws exactly the steps the original would."""
        return {"current": None if self._current is None else self._current.to_dict(),
                "launch": None if self._launch is None else [self._launch.step_time_s, self._launch.sync_time_s],
                "progress": self._progress, "steps": self._steps, "elapsed_s": self._elapsed_s,
                "billing": self._billing.state(),
                "rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self._current = None if state["current"] is None else self._row(Config(**state["current"])).config
        landed = state.get("launch")  # absent in a state saved before launches existed: the row's own
        self._launch = (None if self._current is None else Launch(*landed) if landed is not None
                        else self.rows[self._current].mean)
        self._progress, self._steps, self._elapsed_s = state["progress"], state["steps"], state["elapsed_s"]
        self._billing.restore(state["billing"])
        self.rng.bit_generator.state = state["rng"]

    @property
    def elapsed_s(self) -> float:
        return self._elapsed_s

    @property
    def cost_usd(self) -> float:
        return self._billing.cost_usd

    def _row(self, config: Config) -> TraceRow:
        try:
            return self.rows[config]
        except KeyError:
            raise ThriftyError(f"configuration {config.label()} is not in the trace: sim cannot run it") from None

    def _require_current(self) -> tuple[TraceRow, Launch]:
        if self._current is None or self._launch is None:
            raise ThriftyError("launch a configuration before measuring")
        return self.rows[self._current], self._launch

    def _run(self, seconds: float) -> None:
        self._elapsed_s += seconds
        self._billing.run(seconds)
