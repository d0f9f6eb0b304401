# SPDX-License-Identifier: MIT
"""Langevin dynamics for the replicas: BAOAB (Leimkuhler & Matthews, Appl. Math. Res. Express 2013, 34).

One step of dt: B v += dt/2 F/m; A x += dt/2 v; O v = c v + sqrt((1 - c^2) kT / m) xi with
c = exp(-gamma dt); A x += dt/2 v; new forces F(x); B v += dt/2 F/m. One force evaluation a step.
Its positions follow the same update as OpenMM's LangevinMiddleIntegrator (whose velocities sit half
a step off), and with gamma = 0 it is velocity Verlet (NVE). x and y are wrapped into the box after
each step (z is not: the slab term needs the ions' z, and the walls keep them in the slit).
"""

import math
from dataclasses import dataclass, replace

import torch

from thrifty.md.nanoconfinement import TEMPERATURE_K, TIMESTEP_PS
from thrifty.md.torch_physics.ewald import Ewald
from thrifty.md.torch_physics.potential import energy_and_forces
from thrifty.md.torch_physics.replicas import Replicas

FRICTION_PER_PS = 1.0  # as md.engines.openmm_systems.make_simulation


@dataclass(frozen=True)
class State:
    positions_nm: torch.Tensor  # (R, N, 3)
    velocities_nm_ps: torch.Tensor  # (R, N, 3), zero on padding
    forces_kj_mol_nm: torch.Tensor  # (R, N, 3) at positions_nm
    potential_kj_mol: torch.Tensor  # (R,)


def start(batch: Replicas, setup: Ewald, positions_nm: torch.Tensor, generator: torch.Generator | None = None,
          temperature_k: float = TEMPERATURE_K) -> State:
    """Positions with Maxwell-Boltzmann velocities at temperature_k (zero on padding) and their forces."""
    scale = torch.sqrt(batch.kt_kj_mol * temperature_k / TEMPERATURE_K / batch.masses_amu)[..., None]
    noise = torch.randn(positions_nm.shape, generator=generator, dtype=positions_nm.dtype,
                        device=positions_nm.device)
    energy, forces = energy_and_forces(batch, setup, positions_nm)
    return State(positions_nm, noise * scale * batch.mask[..., None], forces, energy)


def restore(batch: Replicas, setup: Ewald, positions_nm: torch.Tensor, velocities_nm_ps: torch.Tensor) -> State:
    """A state from checkpointed positions and velocities; its forces recomputed (what the step that made
    the positions computed, so a resumed run continues bit for bit)."""
    energy, forces = energy_and_forces(batch, setup, positions_nm)
    return State(positions_nm, velocities_nm_ps, forces, energy)


def kinetic_kj_mol(batch: Replicas, state: State) -> torch.Tensor:
    return 0.5 * (batch.masses_amu[..., None] * state.velocities_nm_ps ** 2).sum((1, 2))


def temperature_k(batch: Replicas, state: State) -> torch.Tensor:
    """(R,) instantaneous temperature, 3 N degrees of freedom (no constraints, no centre-of-mass removal)."""
    dof = 3 * batch.mask.sum(-1)
    return 2 * kinetic_kj_mol(batch, state) / (dof * batch.kt_kj_mol / TEMPERATURE_K)


def step(batch: Replicas, setup: Ewald, state: State, dt_ps: float = TIMESTEP_PS,
         friction_per_ps: float = FRICTION_PER_PS, generator: torch.Generator | None = None,
         create_graph: bool = False) -> State:
    """One BAOAB step for all replicas; create_graph keeps the graph for gradients through the step."""
    inverse_mass = (batch.mask / batch.masses_amu)[..., None]  # zero on padding: it never moves
    v = state.velocities_nm_ps + 0.5 * dt_ps * state.forces_kj_mol_nm * inverse_mass
    x = state.positions_nm + 0.5 * dt_ps * v
    if friction_per_ps > 0:
        c = math.exp(-friction_per_ps * dt_ps)
        xi = torch.randn(v.shape, generator=generator, dtype=v.dtype, device=v.device)
        v = c * v + math.sqrt(1 - c * c) * torch.sqrt(batch.kt_kj_mol * inverse_mass) * xi
    x = x + 0.5 * dt_ps * v
    side = batch.box_nm[:, None, :2]
    x = torch.cat([x[..., :2] - side * torch.floor(x[..., :2] / side), x[..., 2:]], -1)
    energy, forces = energy_and_forces(batch, setup, x, create_graph=create_graph)
    v = v + 0.5 * dt_ps * forces * inverse_mass
    return replace(state, positions_nm=x, velocities_nm_ps=v, forces_kj_mol_nm=forces, potential_kj_mol=energy)
