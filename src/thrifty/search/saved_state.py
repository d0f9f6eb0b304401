# SPDX-License-Identifier: MIT
"""A search's saved state (what a killed `thrifty search` resumes from; not a training checkpoint):
everything the loop knows (every step time measured, sync times, the noise-scale estimator's sums,
probes, moves) plus the backend's own state, as JSON-ready data.

Stored after every window (search.record), so a killed search restarts from its last finished
window: with the sim the continuation is exact (the generator's state is part of it), floats
survive JSON unchanged (Python writes the shortest repr that reads back to the same double)."""

import numpy as np

from thrifty.search.config import Config
from thrifty.search.events import Probe, Settled
from thrifty.search.loop import Search
from thrifty.search.noise_estimate import NoiseEstimator


def search_state(search: Search) -> dict:
    return {"times": [[c.to_dict(), [t.tolist() for t in ts]] for c, ts in search.times.items()],
            "syncs": [[c.to_dict(), s] for c, s in search.syncs.items()],
            "noise": search.noise.state(), "probes": [p.to_dict() for p in search.probes],
            "settled_spend": [s.to_dict() for s in search.settled_spend],
            "moves": search.moves, "moves_in_place": search.moves_in_place, "settled": search.settled,
            "noise_decided": search.noise_decided, "backend": search.backend.state()}


def restore_search(search: Search, state: dict) -> None:
    """Put `state` (search_state's) into a fresh Search on a fresh backend of the same request."""
    search.times = {Config(**c): [np.array(t, float) for t in ts] for c, ts in state["times"]}
    search.syncs = {Config(**c): list(s) for c, s in state["syncs"]}
    search.noise = NoiseEstimator.from_state(state["noise"])
    search.probes = [Probe.from_dict(p) for p in state["probes"]]
    search.settled_spend = [Settled.from_dict(s) for s in state.get("settled_spend", [])]  # none in older states
    search.moves, search.settled = state["moves"], state["settled"]
    search.moves_in_place = state.get("moves_in_place", 0)  # none in older states
    search.noise_decided = tuple(state["noise_decided"])
    search.backend.restore(state["backend"])
