# SPDX-License-Identifier: MIT
"""Active learning as a campaign's sampler (`thrifty md sweep --sampler active`; md.campaign.point_samplers protocol).

Batch by batch, one point per free worker:
- batch 0, the initial design: the random sampler's first `initial_runs` points (space-filling in
  expectation, and the same in every driver for a seed);
- once a batch has completed, the surrogate (md.surrogate's ensemble, trained on every completed
  run) picks the next batch with md.surrogate.active.pick_batch: the largest expected reduction of the
  model's uncertainty (against the MD noise) over a fresh uniform candidate pool of the space, no
  pick within DEFAULT_MIN_DISTANCE (unit box) of a run already made or picked;
- before that, the batches the surrogate picked are its held-out test: each scored by the surrogate
  trained on the runs before it, pooled over the latest batches until they hold MIN_STOP_RUNS runs
  (md.surrogate.active.stopping_test, with the flat, nearest-run and Gaussian-process baselines fitted on the
  same runs beside it), and the campaign stops (no more points) when the share of bins within 2 MD
  error bars reaches `target_within_error` on at least MIN_STOP_RUNS such runs.
Every batch is stored (md.campaign.store.add_batch) before its points are returned for submission;
a restarted driver gets the unfinished points of the last batch back first, not a new pick (the
surrogate's training is stochastic, so a new pick would be other points), and their runs resume
from their checkpoints. The surrogate trains on the run folders (md.runs: params.json beside
profiles.csv, as md.campaign.nanoconfinement_runs writes them), so the space names md.params.PARAMETERS;
a parameter the space leaves out takes the value the simulation wrote for it.
torch is imported only when a surrogate is trained (md.surrogate).
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.md.campaign.point_samplers import RandomSampler, point_key
from thrifty.md.campaign.store import CampaignStore
from thrifty.md.params import PARAMETERS, ParameterBox
from thrifty.md.runs import Run, read_run
from thrifty.md.space import ParameterSpace
from thrifty.md.surrogate.active import (
    DEFAULT_POOL,
    DEFAULT_TARGET,
    MIN_STOP_RUNS,
    HeldOut,
    Predicts,
    StopTest,
    pick_batch,
    stopping_test,
)

if TYPE_CHECKING:
    from thrifty.md.surrogate import SurrogateConfig

MIN_INITIAL_RUNS = 5  # md.surrogate.train_ensemble needs 5 runs

log = logging.getLogger(__name__)


class Surrogate(Predicts, Protocol):
    def disagreement(self, points: np.ndarray) -> np.ndarray: ...


Trainer = Callable[[list[Run]], Surrogate]


def check_active(space: ParameterSpace, target_within_error: float, initial_runs: int, budget_runs: int) -> None:
    """One-line errors for settings an active campaign cannot run with (before anything starts)."""
    if not 0 < target_within_error <= 1:
        raise ThriftyError(f"--target-within-error must be in (0, 1], got {target_within_error:g}")
    if initial_runs < MIN_INITIAL_RUNS:
        raise ThriftyError(f"--initial-runs must be at least {MIN_INITIAL_RUNS} (the surrogate trains on "
                           f"at least 5 runs), got {initial_runs}")
    if budget_runs < initial_runs:
        raise ThriftyError(f"--budget-runs ({budget_runs}) is smaller than the initial design "
                           f"(--initial-runs {initial_runs})")
    unknown = [name for name in space.names if name not in PARAMETERS]
    if unknown:
        raise ThriftyError(f"--sampler active trains the surrogate on {', '.join(PARAMETERS)}; the space "
                           f"names {', '.join(unknown)}")


def ensemble_trainer(config: "SurrogateConfig | None" = None, box_nm: float | None = None) -> Trainer:
    """md.surrogate.train_ensemble with `config` (default: the default one for runs in a box of side
    `box_nm`, the campaign's --box-nm; None: the model's default side), torch imported on the first
    training."""
    def train(runs: list[Run]) -> Surrogate:
        from thrifty.md.surrogate import SurrogateConfig, train_ensemble
        return train_ensemble(runs, config or SurrogateConfig(box_nm=box_nm))
    return train


@dataclass(frozen=True)
class Outcome:
    stopped: str  # "target", "budget" or "no points left"
    test: StopTest | None  # the last held-out test (None: no batch picked by the surrogate completed)

    def to_dict(self, target_within_error: float) -> dict:
        """The campaign's surrogate report: the held-out share within 2 MD error bars ("within_error"
        for the CLI), and the scores of the surrogate and the baselines on those runs."""
        test = None if self.test is None else {"within_error": self.test.within_2_bars,
                                               "metric": "share of bins within 2 MD error bars",
                                               "scores": self.test.scores, "runs": self.test.runs}
        return {"stopped": self.stopped, "target_within_error": target_within_error, "held_out": test}


class ActiveSampler:
    """The sampler of `--sampler active`. `next_points` returns the whole unfinished stored batch
    (the campaign submits as many as it has room for and asks again), or, once it has completed,
    nothing (the target is met, or no candidate is left) or a new batch of up to k points.
    `train` turns completed runs into a surrogate (default: md.surrogate's ensemble)."""

    def __init__(self, space: ParameterSpace, store: CampaignStore, work_dir: Path, *,
                 target_within_error: float = DEFAULT_TARGET, initial_runs: int = 8, seed: int = 0,
                 train: Trainer | None = None, pool_size: int = DEFAULT_POOL, min_stop_runs: int = MIN_STOP_RUNS,
                 box_nm: float | None = None) -> None:
        self.space, self.store, self.work_dir = space, store, Path(work_dir)
        self.target, self.initial_runs, self.seed, self.pool_size = target_within_error, initial_runs, seed, pool_size
        self.min_stop_runs, self.box_nm = min_stop_runs, box_nm
        self.train = train or ensemble_trainer(box_nm=box_nm)
        self.test: StopTest | None = None
        self._runs: dict[str, Run] = {}
        self._models: dict[frozenset[str], Surrogate] = {}  # by the run ids each trained on

    def next_points(self, completed: Sequence[dict], k: int) -> list[dict]:
        done = {run["run_id"] for run in completed}
        batches = self.store.batches()
        if batches:
            waiting = [params for run_id, params in batches[-1] if run_id not in done]
            if waiting:
                return waiting  # the batch in flight, or left unfinished by a dead driver
        if not batches:
            initial = RandomSampler(self.space, self.seed).next_points(completed, self.initial_runs)
            log.info("initial design: %d random points", len(initial))
            return self._store(initial)
        self._test_batches(done, batches)
        if self.test is not None and self.test.met:
            log.info("stop: the target is met (%.3f of bins within 2 bars on %d unseen runs, target %.3f)",
                     self.test.within_2_bars, self.test.runs, self.target)
            return []
        picked = self._pick(self._fit(done), done, k, len(batches))
        log.info("batch %d: %d points picked by the surrogate trained on %d runs", len(batches), len(picked), len(done))
        return self._store(picked)

    def outcome(self, completed: Sequence[dict], budget_runs: int) -> Outcome:
        """Why the campaign ended, and the held-out accuracy of its last completed picked batch."""
        done = {run["run_id"] for run in completed}
        batches = self.store.batches()
        if batches and all(run_id in done for run_id, _ in batches[-1]):
            self._test_batches(done, batches)
        if self.test is not None and self.test.met:
            return Outcome("target", self.test)
        return Outcome("budget" if len(done) >= budget_runs else "no points left", self.test)

    def _store(self, points: list[dict]) -> list[dict]:
        if points:
            self.store.add_batch([(point_key(p), p) for p in points])
        return points

    def _read(self, run_ids: set[str]) -> list[Run]:
        for run_id in sorted(run_ids - set(self._runs)):
            self._runs[run_id] = read_run(self.work_dir / run_id)
        return [self._runs[run_id] for run_id in sorted(run_ids)]

    def _fit(self, run_ids: set[str]) -> Surrogate:
        key = frozenset(run_ids)
        if key not in self._models:
            self._models[key] = self.train(self._read(set(run_ids)))
        return self._models[key]

    def _test_batches(self, done: set[str], batches: list[list[tuple[str, dict]]]) -> None:
        """Score the latest batches the surrogate picked (not the initial design), newest first until
        they hold min_stop_runs runs, each with the surrogate trained on the runs before it (the one
        that picked it, or after a restart one trained on the same earlier runs) and the baselines
        fitted on those runs."""
        from thrifty.md.surrogate.baselines import baselines
        tests, runs, seen = [], 0, set(done)
        for batch in reversed(batches[1:]):
            ids = {run_id for run_id, _ in batch} & seen
            seen -= {run_id for run_id, _ in batch}
            model, before = self._fit(seen), self._read(seen)
            tests.append(HeldOut(model, self._read(ids), baselines(before, self.box_nm, model.config.bins)))
            runs += len(ids)
            if runs >= self.min_stop_runs:
                break
        if tests:
            self.test = stopping_test(tests, self.target, self.min_stop_runs)
            log.info("stop test on %d unseen runs: %.3f of bins within 2 bars (target %.3f, at least %d runs): %s",
                     self.test.runs, self.test.within_2_bars, self.target, self.min_stop_runs,
                     "met" if self.test.met else "not met")

    def _pick(self, model: Surrogate, done: set[str], k: int, batch: int) -> list[dict]:
        fixed = next(iter(self._runs.values())).point  # values of the parameters the space leaves out
        rng = np.random.default_rng([self.seed, batch])
        pool = [p for p in self._candidates(rng) if point_key(p) not in done]
        pool = list({point_key(p): p for p in pool}.values())  # a space of listed values repeats points
        if not pool:
            return []
        taken = np.stack([run.point for run in self._read(done)])
        chosen = pick_batch(model, self._array(pool, fixed), min(k, len(pool)), self._box(fixed), taken=taken)
        return [pool[i] for i in chosen]

    def _candidates(self, rng: np.random.Generator) -> list[dict]:
        """A uniform pool of the space: uniform in each range, a uniform choice among listed values."""
        columns = {p.name: rng.choice(np.asarray(p.values, float), self.pool_size) if p.values
                   else rng.uniform(*p.bounds(), self.pool_size) for p in self.space.parameters}
        return [{name: float(column[i]) for name, column in columns.items()} for i in range(self.pool_size)]

    def _array(self, points: list[dict], fixed: np.ndarray) -> np.ndarray:
        out = np.tile(fixed, (len(points), 1))
        for j, name in enumerate(PARAMETERS):
            if name in self.space.names:
                out[:, j] = [p[name] for p in points]
        return out

    def _box(self, fixed: np.ndarray) -> ParameterBox:
        """The space as a box (a list of values spans its smallest to its largest) for the pick's
        distance rule."""
        ranges = {p.name: p.bounds() for p in self.space.parameters}
        low = tuple(ranges.get(name, (v, v))[0] for name, v in zip(PARAMETERS, fixed.tolist(), strict=True))
        high = tuple(ranges.get(name, (v, v))[1] for name, v in zip(PARAMETERS, fixed.tolist(), strict=True))
        return ParameterBox(low, high)
