# SPDX-License-Identifier: MIT
"""The engine protocol: what md.engines.job_loop needs of an MD engine, and what it hands back.

An engine advances R replicas together (R = 1 for OpenMM; the torch engine batches R systems of
different sizes) and knows nothing of sampling, stopping, logs or checkpoints' timing: the loop
does those, the same way for every engine. The calls, in the loop's order:

    saved = engine.read(payload, where)  # a checkpoint of this very run, or one ThriftyError line
    engine.start() | engine.restore(saved)
    engine.advance(n); engine.positions_z_nm(); engine.energies(step)   # per chunk
    engine.payload(progress, sampling)   # when a checkpoint is due
    engine.final_state()                 # positions and velocities for final_state.npz
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class ReplicaLayout:
    """One replica as the loop samples and reports it."""

    system: str  # "lj", "ions" or "nanoconfinement"
    parameters: dict[str, Any]  # the builder's arguments: a checkpoint's identity, the plot's title
    species: np.ndarray  # per particle: an index into species_names
    species_names: tuple[str, ...]  # names the profile columns, e.g. cation_molar
    z_range_nm: tuple[float, float]  # the walls' z (walls), else the periodic box's extent in z
    walls: bool  # a slit: profiles in mol/L between the walls; else z is wrapped into the box
    area_nm2: float  # lx ly
    timestep_ps: float
    radii_nm: tuple[float, ...] | None = None  # per species: an ion touches a wall at this distance
    record: dict[str, Any] | None = None  # the full parameters for summary.json (default: parameters)

    @property
    def particles(self) -> int:
        return len(self.species)


@dataclass(frozen=True)
class Progress:
    """What the loop carries from chunk to chunk, and every checkpoint holds."""

    step: int
    samples: int  # density samples summed in blocks
    blocks: list[np.ndarray]  # per replica: (blocks, species, bins) particle counts, md.profiles


@dataclass(frozen=True)
class Saved:
    """A checkpoint read back: the loop's progress, what the run that wrote it was asked for (the
    loop checks them against this run), and the engine's own state."""

    progress: Progress
    seed: int
    sampling: dict
    state: Any


class Engine(Protocol):
    name: str  # "openmm" or "torch": the summary's engine
    seed: int
    layouts: list[ReplicaLayout]

    def read(self, payload: bytes, where: Path) -> Saved:
        """The checkpoint in `payload`; one of another engine, system, platform or precision is refused
        in one ThriftyError line that says why and what to give."""
        ...

    def start(self) -> None:
        """The start configuration (OpenMM minimises it), velocities drawn from the seed."""
        ...

    def restore(self, saved: Saved) -> None: ...

    def advance(self, steps: int) -> None: ...

    def positions_z_nm(self) -> list[np.ndarray]:
        """Per replica, its particles' z (nm): what the loop samples."""
        ...

    def energies(self, step: int) -> list[dict[str, float]]:
        """Per replica, a thermo.csv row (md.thermo.COLUMNS) at `step`."""
        ...

    def payload(self, progress: Progress, sampling: dict) -> bytes: ...

    def final_state(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per replica, positions (nm) and velocities (nm/ps) as float64."""
        ...

    def describe(self) -> dict[str, Any]:
        """Keys for every replica's summary: engine, platform, and the engine's own (dtype, replicas)."""
        ...
