# SPDX-License-Identifier: MIT
"""The nanoconfinement model's potential energy per replica and term, and its forces.

A run's forces come from the hand-derived expressions of forces.py (no graph: the hot path). With
create_graph they are -dU/dx from torch.autograd.grad of the summed energies below, and the graph
kept differentiates through the dynamics with respect to parameters (diameters, charges, walls).
"""

import torch

from thrifty.md.torch_physics import ewald as ew
from thrifty.md.torch_physics import forces as analytic
from thrifty.md.torch_physics import short_range
from thrifty.md.torch_physics.pairs import distances
from thrifty.md.torch_physics.replicas import Replicas

TERMS = ("wca", "wall", "coulomb", "slab")  # coulomb: real + reciprocal + self (md.nanoconfinement.GROUPS)


def energies(batch: Replicas, setup: ew.Ewald, positions_nm: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each term's (R,) energy in kJ/mol."""
    _, r, pairs = distances(positions_nm, batch.box_nm, batch.mask)
    return {"wca": short_range.ion_ion_kj_mol(batch, r, pairs),
            "wall": short_range.wall_kj_mol(batch, positions_nm),
            "coulomb": ew.real_kj_mol(batch, setup, r, pairs) + ew.reciprocal_kj_mol(batch, setup, positions_nm)
            + ew.self_kj_mol(batch, setup),
            "slab": ew.slab_kj_mol(batch, setup, positions_nm)}


def energy_and_forces(batch: Replicas, setup: ew.Ewald, positions_nm: torch.Tensor,
                      terms: tuple[str, ...] = TERMS, create_graph: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """((R,) energy of `terms`, (R, N, 3) forces in kJ/mol/nm, zero on padding); by autograd, with the
    graph kept, when create_graph."""
    if not create_graph:
        with torch.no_grad():
            return analytic.energy_and_forces(batch, setup, positions_nm, terms)
    with torch.enable_grad():
        x = positions_nm if positions_nm.requires_grad else positions_nm.detach().requires_grad_(True)
        each = energies(batch, setup, x)
        if not terms:
            raise ValueError("energy_and_forces by autograd needs at least one term")
        energy = each[terms[0]]
        for t in terms[1:]:
            energy = energy + each[t]
        (gradient,) = torch.autograd.grad(energy.sum(), x, create_graph=True)
    return energy, -gradient
