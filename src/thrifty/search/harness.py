# SPDX-License-Identifier: MIT
"""Searches and baselines over seeds on one trace, with overheads against the oracle.

overhead_time = time / oracle_time - 1 and overhead_cost = cost / oracle_cost - 1 (fractions;
the oracle trains from the start on the configuration that is truly best for the objective,
found by running every configuration of the trace to the target without noise or moves, at the
mean of its launches where the trace measured several: what it costs in expectation)."""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.quantities import fmt_duration
from thrifty.search.baselines import Ernest, Exhaustive, PlanAlone, RandomSearch, fixed, user_defaults
from thrifty.search.config import Config
from thrifty.search.loop import Outcome, Search, SearchSettings
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.search.sim import BATCH_CHANGE_COST_S, SimBackend
from thrifty.search.trace import TraceRow

STRATEGIES = ("search", "exhaustive", "random", "plan_alone", "ernest", "defaults_most_workers",
              "defaults_cheapest")


@dataclass(frozen=True)
class Scenario:
    """One trace, one job (noise schedule) and one objective, with the sim's knobs."""

    rows: list[TraceRow]
    schedule: NoiseSchedule
    objective: Objective = Objective()
    measurement_noise: float = 0.03
    restart_cost_s: float = 60.0
    startup_cost_s: float = 60.0
    batch_change_cost_s: float = BATCH_CHANGE_COST_S

    def backend(self, seed: int, *, draw_launches: bool = True) -> SimBackend:
        return SimBackend(self.rows, self.schedule, seed=seed, measurement_noise=self.measurement_noise,
                          restart_cost_s=self.restart_cost_s, startup_cost_s=self.startup_cost_s,
                          batch_change_cost_s=self.batch_change_cost_s,
                          draw_launches=draw_launches)

    def settings(self) -> SearchSettings:
        """The search's settings: the objective, and the job's stated noise schedule as the prior its
        measured B_noise is weighed against (search.noise_estimate), as the local backend's is."""
        return SearchSettings(objective=self.objective, noise_prior=self.schedule)


def oracle(scenario: Scenario) -> Outcome:
    """The truly best configuration, trained from the start; an error if none meets the deadline."""
    best, best_value = None, np.inf
    deadline = scenario.objective.deadline_s
    for row in scenario.rows:
        outcome = fixed(scenario.backend(0, draw_launches=False), row.config)
        value = outcome.time_s if scenario.objective.kind == "time" else outcome.cost_usd
        if (deadline is None or outcome.time_s <= deadline) and value < best_value:
            best, best_value = outcome, value
    if best is None:  # only a deadline leaves none
        assert deadline is not None
        fastest = min(fixed(scenario.backend(0, draw_launches=False), r.config).time_s for r in scenario.rows)
        raise ThriftyError(f"no configuration of the trace meets the deadline of {fmt_duration(deadline)} "
                           f"(the fastest takes {fmt_duration(fastest)})")
    return best


def run_strategy(scenario: Scenario, name: str, seed: int, start: Config, probe_windows: int = 0) -> Outcome:
    """One run of `name` (see STRATEGIES); `probe_windows` sizes random search like the search."""
    backend, settings = scenario.backend(seed), scenario.settings()
    makers: dict[str, Callable[[], Search]] = {
        "search": lambda: Search(backend, settings),
        "exhaustive": lambda: Exhaustive(backend, settings),
        "random": lambda: RandomSearch(backend, settings, probe_windows, seed),
        "plan_alone": lambda: PlanAlone(backend, settings),
        "ernest": lambda: Ernest(backend, settings)}
    if name in makers:
        return makers[name]().run(start)
    prices = {r.config: r.price_per_hour for r in scenario.rows}
    defaults = user_defaults([r.config for r in scenario.rows], prices, start.global_batch)
    if name not in defaults:
        raise ThriftyError(f"unknown strategy {name!r}: choose from {', '.join(STRATEGIES)}")
    return fixed(backend, defaults[name])


def with_overheads(outcome: Outcome, best: Outcome) -> dict:
    return {**outcome.to_dict(), "oracle_time_s": best.time_s, "oracle_cost_usd": best.cost_usd,
            "overhead_time": outcome.time_s / best.time_s - 1, "overhead_cost": outcome.cost_usd / best.cost_usd - 1}


def medians(per_seed: list[dict]) -> dict:
    """Median of every number the seeds share, and p90 of the overheads."""
    keys = ("time_s", "cost_usd", "oracle_time_s", "oracle_cost_usd", "overhead_time", "overhead_cost")
    out = {k: float(np.median([r[k] for r in per_seed])) for k in keys}
    out["probes"] = float(np.median([len(r["probes"]) for r in per_seed]))
    out["moves"] = float(np.median([r["moves"] for r in per_seed]))
    out["moves_in_place"] = float(np.median([r["moves_in_place"] for r in per_seed]))
    out["exploration_cost_usd"] = float(np.median([sum(p["cost_usd"] for p in r["probes"]) for r in per_seed]))
    for k in ("overhead_time", "overhead_cost"):
        out[f"p90_{k}"] = float(np.percentile([r[k] for r in per_seed], 90))
    return out


def default_start(rows: list[TraceRow]) -> Config:
    """Where a search of a trace starts without --start (cheapest_start of its configurations)."""
    return cheapest_start({r.config: r.price_per_hour for r in rows})


NEAR_BATCH = 0.05  # a global batch split into whole local batches over an odd worker count moves this much


def cheapest_start(prices: dict[Config, float]) -> Config:
    """The user default a person would pick: the cheapest $/h configuration at the middle global
    batch (the lower median of the distinct values, standing in for the workload's default), so
    the search has to earn its keep. Where some placements are uneven, their whole local batches
    round the global one (511 on 7 workers beside 512), so any batch within NEAR_BATCH of the
    middle counts as it (the nearest on a tie)."""
    batches = sorted({c.global_batch for c in prices})
    middle = batches[(len(batches) - 1) // 2]
    near_share = NEAR_BATCH if any(c.num_workers % c.num_nodes for c in prices) else 0.0
    near = [c for c in prices if abs(c.global_batch - middle) <= near_share * middle]
    return min(near, key=lambda c: (prices[c], abs(c.global_batch - middle), c))
