# SPDX-License-Identifier: MIT
"""The OpenMM engine: one system (lj, ions or the nanoconfinement model) on one OpenMM platform.

Its checkpoint (md.engines.openmm_checkpoint) holds OpenMM's own checkpoint (positions,
velocities, box, the integrator's random-number state) with the loop's progress, so on the
Reference platform a resumed run ends bit for bit where an uninterrupted one ends. A fresh run
starts from the system's lattice after an energy minimisation (LocalEnergyMinimizer, tolerance
10 kJ/mol/nm, 200 iterations).

A chunk is stepped in slices of about SLICE_S of wall time: `integrator.step` is one C call, and
Python runs no signal handler until it returns (a new user's pass: a first Ctrl-C was heard only
after a 28 s chunk, and a second one, sent meanwhile, was lost). Slices are bit-identical to one
call on the Reference platform (tests/md: stepping 1000 steps in pieces or at once).
"""

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import openmm
from openmm import unit

from thrifty.md.engines.choices import SYSTEMS
from thrifty.md.engines.openmm_checkpoint import MDCheckpoint, check_resume, pack, system_identity, unpack
from thrifty.md.engines.openmm_nanoconfinement import nanoconfinement_system
from thrifty.md.engines.openmm_systems import MDSystem, confined_ions, lennard_jones_fluid, make_simulation
from thrifty.md.engines.protocol import Progress, ReplicaLayout, Saved
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.thermo import GAS_CONSTANT_KJ_MOL_K

SLICE_S = 0.2  # wall time of one integrator.step call: how long a signal may wait


def build(name: str, seed: int = 0, model: NanoconfinementModel | None = None) -> MDSystem:
    """The named system; `model` is the NanoconfinementModel for nanoconfinement (None: its defaults)."""
    if name == "lj":
        return lennard_jones_fluid(seed=seed)
    if name == "ions":
        return confined_ions(seed=seed)
    if name == "nanoconfinement":
        return nanoconfinement_system(model or NanoconfinementModel(), seed)
    raise ValueError(f"unknown MD system {name!r}; choose {', '.join(SYSTEMS)}")


def degrees_of_freedom(system: openmm.System) -> int:
    """3N minus constraints, minus 3 when the centre-of-mass motion is removed (as OpenMM counts)."""
    removed = any(isinstance(f, openmm.CMMotionRemover) for f in system.getForces())
    return 3 * system.getNumParticles() - system.getNumConstraints() - (3 if removed else 0)


def thermo_row(state: openmm.State, step: int, timestep_ps: float, dof: int) -> dict[str, float]:
    kinetic_kj_mol = state.getKineticEnergy().value_in_unit(unit.kilojoule_per_mole)
    return {"step": step, "time_ps": step * timestep_ps,
            "potential_energy_kj_mol": state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole),
            "kinetic_energy_kj_mol": kinetic_kj_mol,
            # equipartition: KE = dof k_B T / 2 (per mole: R instead of k_B)
            "temperature_k": 2 * kinetic_kj_mol / (dof * GAS_CONSTANT_KJ_MOL_K)}


def layout(md: MDSystem, model: NanoconfinementModel | None = None) -> ReplicaLayout:
    box = np.array([v.value_in_unit(unit.nanometer) for v in md.system.getDefaultPeriodicBoxVectors()])
    record = None if model is None else {**asdict(model), "box_nm": model.side_nm, "box_z_nm": model.box_z_nm}
    return ReplicaLayout(md.name, md.parameters, md.species, md.species_names,
                         md.slit_nm if md.slit_nm is not None else (0.0, float(box[2][2])), md.slit_nm is not None,
                         float(box[0][0] * box[1][1]), md.timestep_ps, md.radii_nm, record)


class OpenMMEngine:
    """One replica: the named system on `platform` (Reference: bit-reproducible)."""

    name = "openmm"

    def __init__(self, system: str = "ions", platform: str = "Reference", seed: int = 0,
                 model: NanoconfinementModel | None = None) -> None:
        self.platform, self.seed = platform, seed
        self.md = build(system, seed, model)
        self.identity = system_identity(self.md)
        self.layouts = [layout(self.md, (model or NanoconfinementModel()) if system == "nanoconfinement" else None)]
        self.dof = degrees_of_freedom(self.md.system)
        self._context: openmm.Context | None = None
        self._slice_steps = 10  # steps in one integrator.step call (advance)

    @property
    def context(self) -> openmm.Context:
        if self._context is None:
            raise RuntimeError("start() or restore() the engine first")
        return self._context

    def read(self, payload: bytes, where: Path) -> Saved:
        saved = unpack(payload, where)
        check_resume(saved, self.identity, self.platform, where)
        return Saved(Progress(saved.step, saved.samples, [saved.histogram]), saved.seed, saved.sampling,
                     saved.openmm_state)

    def start(self) -> None:
        self._context = make_simulation(self.md, self.platform, self.seed)
        openmm.LocalEnergyMinimizer.minimize(self._context, 10.0, 200)

    def restore(self, saved: Saved) -> None:
        self._context = make_simulation(self.md, self.platform, self.seed)
        self._context.loadCheckpoint(saved.state)

    def advance(self, steps: int) -> None:
        """`steps` more steps, in slices of about SLICE_S (module docstring), each sized from the last."""
        integrator = self.context.getIntegrator()
        while steps > 0:
            n = min(self._slice_steps, steps)
            began = time.perf_counter()
            integrator.step(n)
            steps -= n
            took = time.perf_counter() - began
            # at most 4x larger a slice (a fast first one is no rate), never below one step
            self._slice_steps = max(1, min(4 * n, int(n * SLICE_S / took) if took > 0 else 4 * n))

    def positions_z_nm(self) -> list[np.ndarray]:
        state = self.context.getState(getPositions=True)
        return [state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)[:, 2]]

    def energies(self, step: int) -> list[dict[str, float]]:
        return [thermo_row(self.context.getState(getEnergy=True), step, self.md.timestep_ps, self.dof)]

    def payload(self, progress: Progress, sampling: dict) -> bytes:
        return pack(MDCheckpoint(self.identity, self.platform, self.seed, progress.step, progress.samples,
                                 progress.blocks[0], self.context.createCheckpoint(), sampling))

    def final_state(self) -> list[tuple[np.ndarray, np.ndarray]]:
        state = self.context.getState(getPositions=True, getVelocities=True)
        return [(state.getPositions(asNumpy=True).value_in_unit(unit.nanometer),
                 state.getVelocities(asNumpy=True).value_in_unit(unit.nanometer / unit.picosecond))]

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "platform": self.platform}
