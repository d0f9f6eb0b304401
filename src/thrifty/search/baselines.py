# SPDX-License-Identifier: MIT
"""Baselines in the same harness as the search: same backend, same windows, same accounting.

- exhaustive: every configuration one window (start first), then the best measured.
- random: the search's number of windows on random configurations, then the best measured.
- plan alone: the initial profile's model (search.belief), no probes; settles on the best
  predicted configuration, measured or not (`thrifty plan` without the loop).
- Ernest (Venkataraman et al., NSDI 2016): NNLS on t = th0 + th1 b + th2 log n + th3 n (b the
  local batch, n the workers) per VM type from the profile plus one window per other type, and no
  statistical-efficiency term: steps to target = target / B, as Ernest assumes a fixed amount of
  work. Settles on its best predicted configuration.
- user defaults: no search at all; `fixed(config)` trains on one configuration from the start.
The oracle is `fixed` on the truly best configuration (search.harness finds it).
"""

import numpy as np

from thrifty.search.backend import Backend
from thrifty.search.config import Config
from thrifty.search.loop import Outcome, Search, SearchSettings


class Exhaustive(Search):
    def next_probe(self) -> Config | None:
        return next((c for c in self.candidates if c not in self.times), None)

    def cut_threshold(self, config: Config) -> float | None:
        return None  # every configuration gets its full window


class RandomSearch(Exhaustive):
    """Random unmeasured configurations until `windows` windows were measured."""

    def __init__(self, backend: Backend, settings: SearchSettings, windows: int, seed: int) -> None:
        super().__init__(backend, settings)
        self.windows, self.rng = windows, np.random.default_rng(seed)

    def next_probe(self) -> Config | None:
        left = [c for c in self.candidates if c not in self.times]
        if len(self.probes) >= self.windows or not left:
            return None
        return left[int(self.rng.integers(len(left)))]


class PlanAlone(Search):
    def next_probe(self) -> Config | None:
        return None

    def best_measured(self) -> Config:
        _, o, move_s, _, _ = self._incumbent()
        values = np.where(o.feasible(), o.point(), np.inf)
        return self.candidates[int(np.argmin(values + move_s * o.rate))]


class Ernest(Search):
    """One window per VM type beyond the profile, then NNLS predictions (module docstring)."""

    def next_probe(self) -> Config | None:
        seen = {c.instance_type for c in self.times}
        return next((c for c in sorted(self.candidates, key=lambda c: (c.num_workers, c))
                     if c.instance_type not in seen), None)

    def cut_threshold(self, config: Config) -> float | None:
        return None

    def best_measured(self) -> Config:
        from scipy.optimize import nnls
        measured = self.measured()
        predicted = np.empty(len(self.candidates))
        for name in {c.instance_type for c in self.candidates}:
            rows = [c for c in measured if c.instance_type == name]
            features = np.array([[1, c.local_batch, np.log(c.num_workers), c.num_workers] for c in rows])
            theta, _ = nnls(features, np.array([measured[c].mean_s for c in rows]))
            for i, c in enumerate(self.candidates):
                if c.instance_type == name:
                    predicted[i] = theta @ [1, c.local_batch, np.log(c.num_workers), c.num_workers]
        left = self.backend.target - self.backend.progress
        steps = left / np.array([c.global_batch for c in self.candidates], float)
        objective = self.settings.objective
        seconds = steps * np.maximum(predicted, 1e-9)
        values = seconds * objective.rate(self.prices)
        if objective.deadline_s is not None:
            values = np.where(self.backend.elapsed_s + seconds <= objective.deadline_s, values, np.inf)
        return self.candidates[int(np.argmin(values))]


def fixed(backend: Backend, config: Config) -> Outcome:
    """Train on one configuration from the start (the oracle and the user defaults)."""
    backend.launch(config)
    backend.finish()
    return Outcome(backend.elapsed_s, backend.cost_usd, config)


def user_defaults(candidates: list[Config], prices: dict[Config, float], batch: int) -> dict[str, Config]:
    """What users pick without a tool, at their default global batch: the most workers on offer
    (the cheapest such), and the cheapest $/h configuration."""
    at_batch = [c for c in candidates if c.global_batch == batch] or candidates
    return {"defaults_most_workers": min(at_batch, key=lambda c: (-c.num_workers, prices[c], c)),
            "defaults_cheapest": min(at_batch, key=lambda c: (prices[c], c))}
