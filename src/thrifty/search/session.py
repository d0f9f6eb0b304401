# SPDX-License-Identifier: MIT
"""One search with its store: every window is recorded (a probe row and the checkpoint, one
transaction), and a search of the same request continues from its last window on resume.

The request key is a hash of everything that decides the search's course: the trace (rows and
prices), the job (noise schedule, target), the objective, the sim's knobs, the start and the seed.
A resume continues the newest stored search with that key; a finished one is returned as stored,
so resuming a completed run measures nothing. The workload key (the trace's hash, for sim) names
what was measured, for reading the probes back."""

import hashlib
import json
from collections.abc import Callable, Sequence

from thrifty.errors import ThriftyError
from thrifty.search.config import Config
from thrifty.search.events import WindowDone
from thrifty.search.harness import Scenario
from thrifty.search.loop import Outcome, Search
from thrifty.search.saved_state import restore_search, search_state
from thrifty.store import PROBE_COLUMNS, Store


def _digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def trace_key(scenario: Scenario) -> str:
    """The workload key of a sim search: what its probes measured is the trace."""
    return "trace:" + _digest([[r.config.to_dict(), r.step_time_s, r.sync_time_s, r.price_per_hour]
                               for r in scenario.rows])[:16]


def request_of(scenario: Scenario, start: Config, seed: int) -> dict:
    s = scenario
    return {"backend": "sim", "trace": trace_key(s), "progress": s.schedule.progress.tolist(),
            "noise_scale": s.schedule.noise_scale.tolist(), "objective": s.objective.kind,
            "deadline_s": s.objective.deadline_s, "measurement_noise": s.measurement_noise,
            "restart_cost_s": s.restart_cost_s, "startup_cost_s": s.startup_cost_s,
            "start": start.to_dict(), "seed": seed}


def probe_row(event: WindowDone) -> dict:
    p = event.probe
    row = {**p.config.to_dict(), **{k: v for k, v in p.to_dict().items() if k != "config"}}
    return {k: row[k] for k in PROBE_COLUMNS}


def run_search(scenario: Scenario, seed: int, start: Config, store: Store | None = None, *, resume: bool = False,
               listeners: Sequence[Callable[[WindowDone], None]] = ()) -> tuple[Outcome, Search | None]:
    """The sim search of `scenario` with `seed` from `start` (see run_stored)."""
    search = Search(scenario.backend(seed), scenario.settings(), listeners)
    return run_stored(search, request_of(scenario, start, seed), trace_key(scenario), seed, start, store,
                      resume=resume)


def run_stored(search: Search, request: dict, workload_key: str, seed: int, start: Config, store: Store | None,
               *, resume: bool = False) -> tuple[Outcome, Search | None]:
    """Run `search` from `start`, recording every window under `request` (any backend); (outcome,
    the Search, None when a finished stored search was returned as stored). Without a store
    nothing is recorded."""
    if store is None:
        return search.run(start), search
    key = _digest(request)
    stored = store.latest_search(key) if resume else None
    if stored is not None and stored[2] is not None:
        return Outcome.from_dict(stored[2]), None
    if stored is None:
        search_id = store.start_search(workload_key, key, seed, request)
    else:
        search_id = stored[0]
        if stored[1] is not None:
            restore_search(search, stored[1])
    search.listeners.insert(0, lambda e: store.save_search_window(search_id, e.index, probe_row(e),
                                                                  search_state(search)))
    outcome = search.run(start)
    store.finish_search(search_id, outcome.to_dict())
    return outcome, search


def require_stored(store: Store, requests: Sequence[dict]) -> None:
    """A resume with nothing of these requests stored is a mistake (another trace or option?)."""
    if not any(store.latest_search(_digest(request)) for request in requests):
        raise ThriftyError(f"--resume: no search with these options is stored in {store.path} "
                           "(the trace or workload, target, noise scale, objective, knobs, start and seed must match)")
