# SPDX-License-Identifier: MIT
"""What a campaign runs: batch simulations. A task hands a batch of points one checkpoint schedule:

    simulation.run_batch(points: list[dict], work_dirs: list[Path], checkpoints) -> list[dict]

A simulation resumes from `checkpoints.latest()` (the newest intact checkpoint; a damaged newest
one falls back to the one before, transient.protocol), works in chunks, calls `checkpoints.due()`
after each chunk and `checkpoints.save(payload)` when it says so, and returns one result per point
holding at least `steps` (MD steps run in all) and `converged` (it stopped because its profiles'
block-averaged error bars fell below the tolerance, rather than at its step cap). The MD runs
(md.campaign.nanoconfinement_runs, on either engine) speak it. A scalar simulation function

    simulate(params: dict, work_dir: Path, checkpoints) -> dict

(the stand-in, or your own `package.module:function`) runs as a batch of one (OnePointAtATime).
"""

import importlib
from pathlib import Path
from typing import Protocol, runtime_checkable

from thrifty.errors import ThriftyError
from thrifty.transient.protocol import JobCheckpoints


class SimulationFn(Protocol):
    def __call__(self, params: dict, work_dir: Path, checkpoints: JobCheckpoints) -> dict: ...


@runtime_checkable
class BatchSimulation(Protocol):
    """Runs several points as one job: one run folder per point, one set of checkpoints for the batch,
    one result per point in the points' order."""

    def run_batch(self, points: list[dict], work_dirs: list[Path], checkpoints: JobCheckpoints) -> list[dict]: ...


class OnePointAtATime:
    """A scalar simulation function as a batch simulation of batches of one."""

    def __init__(self, simulate: SimulationFn) -> None:
        self.simulate = simulate

    def run_batch(self, points: list[dict], work_dirs: list[Path], checkpoints: JobCheckpoints) -> list[dict]:
        if len(points) != 1:
            raise ThriftyError(f"a simulation function runs one point at a time, not a batch of {len(points)}: "
                               f"give --replicas 1")
        return [self.simulate(points[0], work_dirs[0], checkpoints)]


def as_batch(simulation: BatchSimulation | SimulationFn) -> BatchSimulation:
    return simulation if isinstance(simulation, BatchSimulation) else OnePointAtATime(simulation)


BUILT_IN = {"standin": "thrifty.md.campaign.standin:StandIn",
            "nanoconfinement": "thrifty.md.campaign.nanoconfinement_runs:NanoconfinementRuns"}


def resolve_simulation(spec: str) -> BatchSimulation:
    """A built-in name or `package.module:attribute` (a simulation function or batch simulation, or a
    class whose default instance is one), as a batch simulation."""
    target = BUILT_IN.get(spec, spec)
    module, _, attribute = target.partition(":")
    if not module or not attribute:
        raise ThriftyError(f"unknown simulation {spec!r}: give {', '.join(BUILT_IN)} or package.module:function")
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ThriftyError(f"cannot load simulation {spec!r}: {exc}") from None
    return as_batch(found() if isinstance(found, type) else found)
