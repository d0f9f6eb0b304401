# SPDX-License-Identifier: MIT
"""The online search: profile briefly, then after every measurement window refit, probe what the
rule (search.rule) says is worth its price, and settle on the best measured configuration;
once settled, re-check every `recheck_every` of the target.

Measurement window (adaptive): steps in chunks of `chunk_steps` until at least
`min_window_steps` ran, the relative standard error of the mean step time is at most
`target_rel_se` (2%: the mean is then within about +-3.3% at 90%) and that of the gradient noise
scale at most `noise_target_rel_se` (20%), or `max_window_steps` ran. 20%, not 10%: a measured
step's relative variance of B_noise is about 20 (sim.GRAD_SQ_SPREAD^2 + TRACE_SPREAD^2, measured
on digits and tabular), so 10% needs 2,000 measured steps and 20% 500, about one window of 400
steps with several ranks plus what the earlier windows pooled; a 20% error moves J, which varies
as 1/B + 1/B_noise, by at most 20% of its noise term. The noise scale's error is
the pooled estimate's (search.noise_estimate: every measured step of every window, forgotten
exponentially in progress): B_noise belongs to the job's progress, not to the configuration, so
once it is known a window needs no more of it than its step time needs. And a probe waits for it
only while it is winning: one that costs more per unit of progress than the incumbent, or that has
no incumbent meeting the deadline to compare with, ends on its step-time precision (every step it
waits costs its extra price; the settled windows measure the noise for nothing on the
configuration the job trains on).
Settled (no probe worth its price): the job trains on the best measured configuration in segments of
`recheck_every` of the target (5%); each segment starts with a window there (feeding its step time
and the noise scale; up to `max_settled_window_steps`, 3,200: those steps train the job anyway, and
one rank measures the noise every 8th step only); then, if B_noise drifted, or the latest decision
was taken on a noise scale not yet known to its precision target or with twice today's variance (a
settled window measures it to `settled_noise_target_rel_se`, 10%: between two batches whose J differ
by 6%, a 20% error in B_noise picks the wrong one), the rule runs again with the noise
scale now: if a probe is now worth its price it probes (and may move), and after it, or when none
is, the best measured configuration is chosen again, a move included if it pays for itself. Drifted:
the pooled estimate is within its precision target and |log(B_now / B_decided)| > DRIFT_Z
sqrt(se_now^2 + se_decided^2), the relative SEs of both (DRIFT_Z 4, not 2: the ratio of means is
skewed when its denominator's relative SE is 0.2, and the delta method understates its tail: with 3
a constant B_noise set off a spurious probe in 1 of 8 seeds of the tests' trace; 4 means a drift of
about 3x, and B_noise grows several-fold over a job). Otherwise the job stays: the rule re-run on
the estimate's noise alone (a constant B_noise known to +-20%) finds probes its earlier run
declined, and pays for them. `recheck_every` None: train to the end once settled.
Recoup: a move is taken only if the job still to run can pay it back. A probe needs, beyond
gain > price (search.rule), its expected gain weighted by its chance of winning to exceed
`recoup_factor` (3) times its price: a long shot whose expected gain is mostly one unlikely big win
loses its moves in most runs (tuned on benchmarks/irregular_traces.TUNE_SEEDS: with the step-time
fit on whole steps, the worst 3-hour median over the oracle was +18% at 1, +10% at 3, +9.7% at 4;
with compute and sync apart (search.belief), 3 sim seeds per row, at 4 one run of a 3-hour time
job stayed +53% over the oracle, declining a probe on its own VMs whose expected gain was 10x
its price; at 3 and 2.5 every row's worst was within +8%, at 2 the cost rows rose to +11%). The
check filters the candidates before the best is chosen (search.rule.pick_probe). The profile,
before any model exists, goes on after the start only while its remaining moves (a restart each,
or an in-place batch change on the start's VMs, and back to the start) cost at most `move_budget`
(5%) of the objective still to pay at the start's measured pace (steps left counted as (P - p) / B
while B_noise is not yet known: a few measured steps of one rank put it anywhere); otherwise there
is no model and the job trains where it started (a short job started on a good configuration stays
there). The same budget bounds each probe: its way there and back to the incumbent may cost at
most `move_budget` of the objective the incumbent still has to pay (beyond the move to the
incumbent that staying costs anyway, where the job is not on it). Without it a profile made
cheap by in-place batch changes let a short job (17 minutes at the oracle) take a 4-node probe
whose round trip was 17% of the job (bench_search_real: short time jobs started on the oracle
+0.0% median before the batch changes went in place, +16-21% on four workloads with them, at
most +4.1% with the bound). A job that states no noise scale takes the
start's global batch as its prior B_noise (search.noise_estimate.with_prior): after the profile
the pooled estimate rests on a handful of one-rank steps and had been 0 or infinite, which settled
jobs on the largest batch for good; and a settled window never outlasts its segment (one of 3,200
steps at batch 4,096 had trained 62% of a job before the first re-check).
A probe is cut short as soon as its measured 90% interval excludes it: even the interval's fast
end costs more per unit of progress than the incumbent, or misses the deadline.
The initial profile is `profile_configs` windows on the start's VM type at distinct local
batches (the step-time fit needs two; the smallest and largest beside the start's, so the fit
interpolates); they train the job like any window, nothing is lost. After the start they are cut
short like any probe once their interval excludes them (the fit needs their mean, not its
precision, and 10 steps of a large batch on the cheapest VM can take minutes: on the benchmark's
time rows this took 0.2-0.7 points off the overhead). They end on their step-time precision alone: the start is often one rank, which measures the noise every 8th step only
(perf.noise.noise_due), so waiting for B_noise there would stretch the slowest windows of the
search (a large local batch on the cheapest VM) up to `max_window_steps`; the probes that follow
bring the pooled estimate to its precision.
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.search.backend import Backend
from thrifty.search.belief import Z90, BeliefSettings, Measured, step_time_belief, step_time_floor
from thrifty.search.config import Config, batch_change_only, needs_new_vms
from thrifty.search.events import Prediction, Probe, Settled, WindowDone
from thrifty.search.noise_estimate import DEFAULT_MEMORY, NoiseEstimator, with_prior
from thrifty.search.noise_schedule import NoiseSchedule, progress_per_step
from thrifty.search.rule import Objective, expected_improvement, outlook, pick_probe, probe_price, recoups

SETTLED_CHUNK_STEPS = 100  # a settled window is never cut: few, large chunks
log = logging.getLogger(__name__)

DRIFT_Z = 4.0  # settled: re-decide when log B_noise moved this many standard errors


@dataclass(frozen=True)
class SearchSettings:
    objective: Objective = Objective()
    target_rel_se: float = 0.02
    min_window_steps: int = 20
    chunk_steps: int = 5
    max_window_steps: int = 400
    noise_target_rel_se: float = 0.20
    settled_noise_target_rel_se: float = 0.10  # settled windows cost nothing extra: measure B_noise tighter
    noise_memory: float = DEFAULT_MEMORY  # the noise estimate forgets over this fraction of the target
    recheck_every: float | None = 0.05  # settled: segments of this fraction of the target
    max_settled_window_steps: int = 3200  # 8 x 400: one rank measures the noise every 8th step
    profile_configs: int = 3
    recoup_factor: float = 3.0  # a probe's expected gain, weighted by its chance of winning, must be this x its price
    move_budget: float = 0.05  # the profile's moves, or a probe's way there and back, may cost at most this share of the remaining objective
    explore: bool = True  # False: `thrifty plan` alone, the profile's model and no probes
    belief: BeliefSettings = BeliefSettings()
    noise_prior: NoiseSchedule | None = None  # a stated B_noise(progress): the prior (search.noise_estimate)


@dataclass
class Outcome:
    time_s: float
    cost_usd: float
    final_config: Config
    probes: list[Probe] = field(default_factory=list)
    moves: int = 0
    stayed: bool = False  # the profile could not recoup its moves: the job trained where it started
    settled: list[Settled] = field(default_factory=list)  # the rest of the time and cost, where it went
    moves_in_place: int = 0  # of the moves, those that changed the global batch alone (no restart)
    declined: dict | None = None  # why it settled: the best probe it declined then (Search.next_probe)

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "cost_usd": self.cost_usd, "final_config": self.final_config.to_dict(),
                "probes": [p.to_dict() for p in self.probes], "moves": self.moves,
                "moves_in_place": self.moves_in_place, "stayed": self.stayed,
                "settled_segments": [s.to_dict() for s in self.settled], "declined": self.declined}

    @classmethod
    def from_dict(cls, data: dict) -> "Outcome":
        return cls(data["time_s"], data["cost_usd"], Config(**data["final_config"]),
                   [Probe.from_dict(p) for p in data["probes"]], data["moves"], bool(data.get("stayed", False)),
                   [Settled.from_dict(s) for s in data.get("settled_segments", [])],  # none stored before
                   int(data.get("moves_in_place", 0)),  # stored before batch changes went in place: none
                   data.get("declined"))  # stored before it was kept: none


class Search:
    """One search on one backend; `run(start)` trains the job to its target and reports."""

    def __init__(self, backend: Backend, settings: SearchSettings = SearchSettings(),
                 listeners: Sequence[Callable[[WindowDone], None]] = ()) -> None:
        self.backend, self.settings, self.listeners = backend, settings, list(listeners)
        self.candidates = backend.candidates()
        self.prices = np.array([backend.price_per_hour(c) for c in self.candidates])
        self.worker_price = {c.instance_type: p / c.num_workers for c, p in zip(self.candidates, self.prices, strict=False)}
        self.times: dict[Config, list[np.ndarray]] = {}
        self.syncs: dict[Config, list[float]] = {}  # mean sync time per chunk, when reported
        self.noise = NoiseEstimator(settings.noise_memory * backend.target)
        self.probes: list[Probe] = []
        self.settled_spend: list[Settled] = []
        self.moves = self.moves_in_place = 0
        self.settled = False  # once no probe was worth its price
        self.noise_decided = (float("nan"), float("inf"))  # B_noise and its rel. SE at the latest decision
        self.prediction: Prediction | None = None  # from the latest decision, for observers
        self._belief_of: set[Config] | None = None  # the configurations the cached fit saw
        self._belief: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))
        self.stay = False  # the profile could not recoup its moves: no model, train where it started
        self.start_batch: int | None = None  # the prior B_noise of a job that states none (noise_scale)
        # the best probe declined at the first decision without one since the last probe (Outcome.declined):
        # None at every stored window (a probe was just taken), so a resumed search needs none
        self.declined: dict | None = None

    def run(self, start: Config) -> Outcome:
        """Train to the target from `start`, or from where a restored search (search.saved_state)
        stopped: profile windows it already measured are skipped, and the rule never probes a
        measured configuration again."""
        profile = self.profile_configs(start)
        self.start_batch = start.global_batch
        for config in profile[len(self.probes):]:
            if self.backend.done or (self.probes and not self.profile_recoups(profile)):
                break
            self.window(config, noise_precision=False)
        # a profile that cannot recoup its moves leaves no model: the job stays where it started
        self.stay = len(self.probes) < len(profile)
        if self.stay and not self.backend.done:
            log.info("profile stopped after %d of %d windows: the job left could not recoup its moves; "
                     "staying on %s", len(self.probes), len(profile), self.running().label())
        probed = True  # a (restored) search continues after a window: decide
        while not self.backend.done:
            decide = probed or not self.settled or self.drifted()
            if decide:
                self.noise_decided = (self.noise.value, self.noise.rel_se)
            choice = self.next_probe() if self.settings.explore and decide and not self.stay else None
            if choice is not None:
                self.window(choice)
            else:
                self.settled_segment(decide)
            probed = choice is not None
        return Outcome(self.backend.elapsed_s, self.backend.cost_usd, self.running(), self.probes, self.moves,
                       self.stay, self.settled_spend, self.moves_in_place, self.declined)

    def running(self) -> Config:
        """The configuration the job trains on (there is one once the first window launched)."""
        current = self.backend.current
        if current is None:
            raise ThriftyError("the search has not launched a configuration yet")
        return current

    def profile_configs(self, start: Config) -> list[Config]:
        """The start, then the same type and shape at its smallest and largest other local batch
        (a wide design: the fit interpolates instead of extrapolating), else the nearest others."""
        if start not in self.candidates:
            raise ThriftyError(f"start configuration {start.label()} is not among the backend's configurations")
        same = [c for c in self.candidates if c.instance_type == start.instance_type and c != start]
        shape = sorted((c for c in same if (c.num_nodes, c.num_workers) == (start.num_nodes, start.num_workers)),
                       key=lambda c: c.local_batch)
        ends = list(dict.fromkeys(shape[:1] + shape[-1:]))
        same.sort(key=lambda c: (abs(np.log(c.local_batch / start.local_batch)),
                                 abs(np.log(c.num_workers / start.num_workers)), c))
        chosen, batches = [start], {start.local_batch}
        for config in ends + same:
            if len(chosen) >= self.settings.profile_configs:
                break
            if config not in chosen and (config.local_batch not in batches or len(batches) >= 2):
                chosen.append(config)
                batches.add(config.local_batch)
        if len(batches) < 2:  # checked before the first window (session.run_stored): nothing stored in vain
            raise ThriftyError(f"the search fits its model to the start's VM type at two local batch sizes at "
                               f"least, and {start.instance_type} has one ({start.local_batch:g}) among the "
                               "configurations: give it more, or start on a type that has them (--start)")
        return chosen

    def launch(self, config: Config) -> None:
        if self.backend.current is not None and self.backend.current != config:
            in_place = batch_change_only(self.backend.current, config)
            self.moves += 1
            self.moves_in_place += in_place
            log.info("move %d: %s -> %s at %.1f%% of the target%s", self.moves, self.backend.current.label(),
                     config.label(), 100.0 * self.backend.progress / self.backend.target,
                     " (the batch alone, in place)" if in_place else "")
        self.backend.launch(config)

    def drifted(self) -> bool:
        """Settled: whether B_noise is known to its precision target and moved from the latest
        decision's by more than DRIFT_Z standard errors of the difference, or the latest decision
        had it less precisely: before the target, or with a variance twice today's (module
        docstring)."""
        n, (before, before_se), target = self.noise, self.noise_decided, self.settings.noise_target_rel_se
        if n.rel_se > target:
            return False
        if before_se > target or n.rel_se <= before_se / np.sqrt(2):  # decided on B_noise known less well
            return True
        return bool(abs(np.log(n.value / before)) > DRIFT_Z * np.hypot(n.rel_se, before_se))

    def settled_segment(self, decide: bool) -> None:
        """Settle on the best measured configuration (with `decide`; else stay) and train one
        segment there (module docstring), or to the end without re-checks."""
        config = self.running() if self.stay or not decide else self.best_measured()
        self.settled = True
        before = (self.backend.elapsed_s, self.backend.cost_usd, self.backend.progress)
        self.launch(config)
        if self.settings.recheck_every is None:
            self.backend.finish()
        else:
            end = self.backend.progress + self.settings.recheck_every * self.backend.target
            segment_steps = self.backend.steps_to(end)  # a window never outlasts its segment
            self.measure_window(config, None, chunk_steps=SETTLED_CHUNK_STEPS,
                                max_steps=max(min(self.settings.max_settled_window_steps, segment_steps), 1),
                                noise_target=self.settings.settled_noise_target_rel_se)
            self.backend.train_until(end)
        self._spent_settled(config, *before)

    def _spent_settled(self, config: Config, elapsed_s: float, cost_usd: float, progress: float) -> None:
        """Add what the segment since (elapsed_s, cost_usd, progress) took on `config` to the
        settled spend, merged with the segment before it when no window came between."""
        b, windows = self.backend, len(self.probes)
        spent = Settled(config, windows, b.elapsed_s - elapsed_s, max(round(b.cost_usd - cost_usd, 12), 0.0),
                        (b.progress - progress) / b.target)
        last = self.settled_spend[-1] if self.settled_spend else None
        if last is not None and (last.config, last.after_windows) == (config, windows):
            self.settled_spend[-1] = Settled(config, windows, last.wall_time_s + spent.wall_time_s,
                                             last.cost_usd + spent.cost_usd, last.progress + spent.progress)
        else:
            self.settled_spend.append(spent)

    def window(self, config: Config, *, cut: bool = True, noise_precision: bool = True) -> None:
        """One adaptive measurement window on `config`, recorded as a probe; `noise_precision`
        False: it ends on its step-time precision alone (the profile, module docstring)."""
        cost_before, elapsed_before = self.backend.cost_usd, self.backend.elapsed_s
        threshold = self.cut_threshold(config) if cut else None
        self.launch(config)
        times, window_syncs, cut_short = self.measure_window(config, threshold, noise_precision, probe=True)
        if len(times):
            # a window inside a minimum already billed costs nothing: no float residue (+-5e-20)
            stats, cost = Measured.of(times), max(round(self.backend.cost_usd - cost_before, 12), 0.0)
            self.probes.append(Probe(
                config, len(times), float(times.mean()), cost, cut_short,
                float(stats.rel_se * stats.mean_s) if len(times) > 1 else None,
                float(np.mean(window_syncs)) if window_syncs else None, self.backend.elapsed_s - elapsed_before,
                cost * 3600 / self.backend.price_per_hour(config)))
            self._tell()

    def measure_window(self, config: Config, threshold: float | None, noise_precision: bool = True, *,
                       chunk_steps: int | None = None, max_steps: int | None = None, probe: bool = False,
                       noise_target: float | None = None) -> tuple[np.ndarray, list[float], bool]:
        """Measure the running `config` until the window's rule (module docstring) ends it or the
        probe is cut short against `threshold`; (step times, sync times, cut short). A settled
        window, never cut, measures in larger chunks (fewer checks: the sim stays fast) and up to
        `max_steps`. Every chunk
        feeds the noise estimate, the sync times and, at the end, the configuration's times."""
        s = self.settings
        chunks, window_syncs, cut_short = [], [], False
        while not self.backend.done:
            measured = self.backend.measure(chunk_steps or s.chunk_steps)
            chunks.append(measured.step_time_s)
            self.noise.add(self.backend.progress, measured.noise.grad_sq, measured.noise.trace)
            if measured.sync_time_s is not None:
                self.syncs.setdefault(config, []).append(measured.sync_time_s)
                window_syncs.append(measured.sync_time_s)
            stats = Measured.of(np.concatenate(chunks))
            noise_known = (not noise_precision or self.noise.rel_se <= (noise_target or s.noise_target_rel_se)
                           or (probe and (threshold is None or self.per_progress(config, stats.mean_s) > threshold)))
            if stats.steps >= (max_steps or s.max_window_steps) or (stats.steps >= s.min_window_steps
                                                                    and stats.rel_se <= s.target_rel_se
                                                                    and noise_known):
                break
            if threshold is not None and len(chunks) >= 2 and \
                    self.per_progress(config, stats.mean_s * np.exp(-Z90 * stats.rel_se)) > threshold:
                cut_short = True
                break
        times = np.concatenate(chunks) if chunks else np.zeros(0)
        if len(times):
            self.times.setdefault(config, []).append(times)
        return times, window_syncs, cut_short

    def _tell(self) -> None:
        """Every listener learns of the window just measured (the recorder stores it)."""
        event = WindowDone(len(self.probes) - 1, self.probes[-1], self.backend.elapsed_s, self.backend.cost_usd,
                           self.backend.progress, self.backend.target, sum(p.cost_usd for p in self.probes),
                           self.prediction)
        for listener in self.listeners:
            listener(event)

    def noise_scale(self) -> float:
        """B_noise now: the ratio of the recent measured steps' mean tr(Sigma) to their mean
        |G|^2, combined with the stated noise scale at this progress where there is one
        (search.noise_estimate)."""
        prior = self.settings.noise_prior
        if prior is not None:
            return with_prior(self.noise, prior.at(self.backend.progress))
        if self.noise.steps == 0:
            raise ThriftyError("the backend measured no gradient noise yet")
        if self.start_batch is not None:  # no stated B_noise: the start's global batch, the user's guess
            return with_prior(self.noise, self.start_batch)
        return self.noise.value

    def per_progress(self, config: Config, step_time_s: float) -> float:
        """Objective per unit of progress at this step time: r T (1/B + 1/B_noise); infinite when
        the rest of the job at this pace would miss the deadline."""
        price = self.backend.price_per_hour(config)
        steps_per_progress = 1 / config.global_batch + 1 / self.noise_scale()
        deadline = self.settings.objective.deadline_s
        left = self.backend.target - self.backend.progress
        if deadline is not None and self.backend.elapsed_s + left * steps_per_progress * step_time_s > deadline:
            return float("inf")
        return float(self.settings.objective.rate(price)) * step_time_s * steps_per_progress

    def cut_threshold(self, config: Config) -> float | None:
        """The incumbent's objective per unit of progress, or None (nothing to compare with yet)."""
        if not self.times or config in self.times:
            return None
        values = [self.per_progress(c, Measured.of(np.concatenate(t)).mean_s) for c, t in self.times.items()]
        best = min(values)
        return best if np.isfinite(best) else None

    def _outlook(self, objective: Objective):
        mu, sd = self.belief()
        left = self.backend.target - self.backend.progress
        batches = np.array([c.global_batch for c in self.candidates], float)
        steps_left = left * (1 / batches + 1 / self.noise_scale())
        current = self.backend.current
        move_s = np.array([self.backend.move_cost_s(current, c) for c in self.candidates])
        time_left = (objective.deadline_s or np.inf) - self.backend.elapsed_s
        return outlook(objective, objective.rate(self.prices), steps_left, mu, sd, move_s, time_left,
                       step_time_floor(self.candidates, mu, sd)), move_s

    def _incumbent(self):
        """(objective used, outlook, move seconds, incumbent index): decide on time while no
        measured configuration meets the deadline."""
        objective = self.settings.objective
        o, move_s = self._outlook(objective)
        is_measured = np.array([c in self.times for c in self.candidates])
        feasible = is_measured & o.feasible()
        if not feasible.any():
            objective = Objective("time", objective.deadline_s)
            o, move_s = self._outlook(objective)
            feasible = is_measured
        values = np.where(feasible, o.point(), np.inf)
        return objective, o, move_s, is_measured, values

    def next_probe(self) -> Config | None:
        objective, o, move_s, is_measured, values = self._incumbent()
        self.prediction = predicted_best(self.candidates, o, objective.kind)
        inc = int(np.argmin(values))
        y = float(values[inc])
        gain, win = expected_improvement(y, o)
        incumbent = self.candidates[inc]
        back_s = np.array([self.backend.move_cost_s(c, incumbent) for c in self.candidates])
        home = float(move_s[inc] * o.rate[inc])
        noise_scale = self.noise_scale()
        batches = np.array([c.global_batch for c in self.candidates], float)
        floor = self.backend.minimum_billed_s if objective.kind == "cost" else 0.0
        new_vms = np.array([needs_new_vms(self.backend.current, c) for c in self.candidates])
        price = probe_price(o, y, win, self.expected_window_steps(), progress_per_step(batches, noise_scale),
                            self.backend.target - self.backend.progress, move_s * o.rate,
                            back_s * o.rate[inc], home, move_in_s=move_s, billed_floor_s=np.where(new_vms, floor, 0.0))
        # a probe's round trip (there, and back to the incumbent) beyond the move home that staying
        # costs anyway, within the move budget of what the incumbent still has to pay; the whole round
        # trip, whatever the chance of winning: weighting the way back by the chance of losing put 4-16
        # more short time jobs past 5% (docs/search.md)
        round_trip = move_s * o.rate + back_s * o.rate[inc] - home
        affordable = round_trip <= self.settings.move_budget * y
        recouping = recoups(gain, win, price, self.settings.recoup_factor)
        chosen = pick_probe(gain, price, ~is_measured & affordable & recouping)
        shown = chosen if chosen is not None else int(np.argmax(np.where(is_measured, -np.inf, gain - price)))
        declined = ("no probe recoups its price" if not (~is_measured & recouping).any()
                    else "no probe that recoups its price fits the move budget")
        log.debug("%s probe %s: expected gain %.4g (chance %.2f) against its price %.4g (%s)",
                  "taking" if chosen is not None else f"{declined}; the best declined:",
                  self.candidates[shown].label(), gain[shown], win[shown], price[shown], objective.kind)
        if chosen is not None:
            self.declined = None
        elif self.declined is None and not is_measured[shown]:  # why the search settles, for its report
            reason = ("move budget" if not affordable[shown] else "recoup" if not recouping[shown] else "price")
            self.declined = {"config": self.candidates[shown].to_dict(), "objective": objective.kind,
                             "expected_gain": float(gain[shown]), "chance": float(win[shown]),
                             "price": float(price[shown]), "reason": reason, "objective_left": y,
                             "round_trip": float(round_trip[shown]),
                             "move_budget": self.settings.move_budget, "recoup_factor": self.settings.recoup_factor}
        return None if chosen is None else self.candidates[chosen]

    def profile_recoups(self, profile: list[Config]) -> bool:
        """Whether the rest of the profile's moves (one restart each, and back to the start) cost
        at most `move_budget` of the objective still to pay at the start's measured pace."""
        start = profile[0]
        rate = float(self.settings.objective.rate(self.backend.price_per_hour(start)))
        # steps left >= (P - p) / B: B_noise counts only once known to its target (a few measured
        # steps of one rank put it anywhere, 1.7 for a true 635, and the job would look 300x longer)
        known = self.noise.rel_se <= self.settings.noise_target_rel_se
        steps_left = (self.backend.target - self.backend.progress) * (
            1 / start.global_batch + (1 / self.noise_scale() if known else 0.0))
        left = rate * steps_left * Measured.of(np.concatenate(self.times[start])).mean_s
        rest = profile[len(self.probes):]
        sources: list[Config | None] = [self.backend.current, *rest]
        moves_s = sum(self.backend.move_cost_s(a, b) for a, b in zip(sources, [*rest, start], strict=True))
        return bool(moves_s * rate <= self.settings.move_budget * left)

    def best_measured(self) -> Config:
        """Where to settle: least remaining objective including the move there."""
        _, o, move_s, _, values = self._incumbent()
        return self.candidates[int(np.argmin(values + move_s * o.rate))]

    def expected_window_steps(self) -> float:
        """max(min steps, (relative sd of one step / target relative SE)^2), from what was seen."""
        rel_sd = [np.std(t, ddof=1) / t.mean() for ts in self.times.values() for t in ts if len(t) > 1]
        need = (float(np.median(rel_sd)) / self.settings.target_rel_se) ** 2 if rel_sd else 0.0
        return float(min(max(self.settings.min_window_steps, need), self.settings.max_window_steps))

    def belief(self) -> tuple[np.ndarray, np.ndarray]:
        """(mu, sd) of every candidate's log mean step time (search.belief). The model is refitted
        whenever a configuration is measured for the first time (every probe); more steps of a
        measured one (the settled re-check windows) update its own mean and standard error, not
        the fit (the fit is what costs: thousands of simulated searches a minute need it rare).
        A checkpoint follows a probe, whose new configuration forces a refit, so a resumed search
        decides exactly as an uninterrupted one."""
        measured = self.measured()
        if self._belief_of != set(measured):
            self._belief = step_time_belief(self.candidates, measured, self.worker_price, self.settings.belief)
            self._belief_of = set(measured)
        mu, sd = self._belief[0].copy(), self._belief[1].copy()
        for i, c in enumerate(self.candidates):
            if c in measured:
                mu[i], sd[i] = np.log(measured[c].mean_s), measured[c].rel_se
        return mu, sd

    def measured(self) -> dict[Config, Measured]:
        return {c: Measured.of(np.concatenate(t), float(np.mean(self.syncs[c])) if c in self.syncs else None)
                for c, t in self.times.items()}


def predicted_best(candidates: list[Config], o, kind: str) -> Prediction:
    """The candidate with the least mean remaining objective among those the model expects to meet
    the deadline (all, when none does), with J's 90% interval r K exp(mu +- Z90 sd); `kind` is the
    objective J is in (time while no measured configuration meets the deadline)."""
    point = o.point()
    best = int(np.argmin(np.where(o.feasible(), point, np.inf) if o.feasible().any() else point))
    low, high = o.scale[best] * np.exp(np.maximum(o.mu[best] + np.array([-Z90, Z90]) * o.sd[best], o.floor[best]))
    return Prediction(candidates[best], kind, float(point[best]), float(low), float(high))
