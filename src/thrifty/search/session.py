# SPDX-License-Identifier: MIT
"""One search with its store: every window is recorded (a probe row and the checkpoint, one
transaction), and a search of the same request continues from its last window on resume.

The request key is a hash of everything that decides the search's course: the trace (rows and
prices), the job (noise schedule, target), the objective, the sim's knobs, the start and the seed.
A resume continues the newest stored search with that key; a finished one is returned as stored,
so resuming a completed run measures nothing. The workload key (the trace's hash, for sim) names
what was measured, for reading the probes back. A local search's request is `local_request`'s;
`job_targets` says where the target and the noise scale come from when the options leave them out."""

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

from thrifty.errors import ThriftyError
from thrifty.search.config import Config
from thrifty.search.events import WindowDone
from thrifty.search.harness import Scenario
from thrifty.search.loop import Outcome, Search
from thrifty.search.rule import Objective
from thrifty.search.saved_state import restore_search, search_state
from thrifty.store import PROBE_COLUMNS, Store

if TYPE_CHECKING:
    from thrifty.perf.jobmodel import JobModel
    from thrifty.search.local import LocalBackend


def _digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def trace_key(scenario: Scenario) -> str:
    """The workload key of a sim search: what its probes measured is the trace (a row's launches
    enter only where it has several, so a trace of one launch a row keeps the key it had)."""
    return "trace:" + _digest([[r.config.to_dict(), r.step_time_s, r.sync_time_s, r.price_per_hour]
                               + ([[[x.step_time_s, x.sync_time_s] for x in r.launches]] if r.launches else [])
                               for r in scenario.rows])[:16]


def request_of(scenario: Scenario, start: Config, seed: int) -> dict:
    s = scenario
    return {"backend": "sim", "trace": trace_key(s), "progress": s.schedule.progress.tolist(),
            "noise_scale": s.schedule.noise_scale.tolist(), "objective": s.objective.kind,
            "deadline_s": s.objective.deadline_s, "measurement_noise": s.measurement_noise,
            "restart_cost_s": s.restart_cost_s, "startup_cost_s": s.startup_cost_s,
            "batch_change_cost_s": s.batch_change_cost_s,
            "start": start.to_dict(), "seed": seed}


def local_request(local: "LocalBackend", workload_key: str, objective: Objective, start: Config, seed: int) -> dict:
    """The request of a local search: the workload, the emulated types and their configurations,
    the noise schedule, the objective, the start-up cost, the start, the seed and the job's folder."""
    return {"backend": "local", "workload": workload_key, "types": [asdict(t) for t in local.types.values()],
            "configs": [c.to_dict() for c in local.candidates()], "progress": local.schedule.progress.tolist(),
            "noise_scale": local.schedule.noise_scale.tolist(), "objective": objective.kind,
            "deadline_s": objective.deadline_s, "startup_cost_s": local.startup_cost_s, "start": start.to_dict(),
            "seed": seed, "work_dir": str(local.work_dir.resolve())}


def job_targets(job: "JobModel | None", workload: str | None, target_samples: float | None,
                noise_scale: float | None, noise_scale_trace: object | None) -> tuple[float, float | None, dict]:
    """(E_min, constant B_noise or None for a trace, where each came from): those given, else the
    workload's job model's: B_noise measured, E_min = S_min B_noise, the samples at small batch of
    S(B) = S_min (1 + B_noise / B) (McCandlish et al. 2018). A recipe's job model has neither."""
    origin = {"target_samples_source": "options", "noise_scale_source": "options"}
    missing = [text for text, given in (("--target-samples", target_samples),
                                        ("--noise-scale (or --noise-scale-trace)", noise_scale or noise_scale_trace))
               if given is None]
    if missing:
        if job is None:
            raise ThriftyError(f"give {' and '.join(missing)} (no workload job model to take them from)")
        if job.recipe is not None:  # its steps are epochs at a batch range: no B_noise, no S_min
            raise ThriftyError(f"{workload}'s job model takes its steps from a published recipe "
                               f"({job.recipe['source']}), which gives no gradient noise scale: give "
                               f"{' and '.join(missing)}")
        if noise_scale is None and noise_scale_trace is None:
            noise_scale, origin["noise_scale_source"] = job.noise_scale, "workload profile"
        if target_samples is None:
            target_samples, origin["target_samples_source"] = job.s_min * job.noise_scale, "workload profile"
    assert target_samples is not None  # given, or taken from the job model above
    return target_samples, noise_scale, {**origin, "target_samples": target_samples, "noise_scale": noise_scale}


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
        search.profile_configs(start)  # a start the search cannot profile is refused before a row is stored
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
