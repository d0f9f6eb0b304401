# SPDX-License-Identifier: MIT
"""The short-range repulsions of the nanoconfinement model (md.nanoconfinement), as energies (kJ/mol).

Weeks-Chandler-Andersen (Weeks, Chandler & Andersen, J. Chem. Phys. 54, 5237 (1971)):
U(r) = 4 eps ((s/r)^12 - (s/r)^6) + eps for r < 2^(1/6) s, eps = kT; ion-ion s = (d_i + d_j)/2 with r
the pair distance, ion-wall s = d/2 with r the distance from the ion centre to each wall plane.
"""

import torch

from thrifty.md.torch_physics.replicas import Replicas

WCA_REACH = 2 ** (1 / 6)  # the cut, in units of s: the minimum of the 12-6 potential


def wca(r: torch.Tensor, s: torch.Tensor, kt: float) -> torch.Tensor:
    """Elementwise WCA energy (0 past 2^(1/6) s)."""
    x = (s * s / (r * r)) ** 3
    return torch.where(r < WCA_REACH * s, 4 * kt * (x * x - x) + kt, torch.zeros_like(r))


def ion_ion_kj_mol(batch: Replicas, r: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """(R,) WCA over real pairs i < j; r and pairs from pairs.distances."""
    s = (batch.diameters_nm[:, :, None] + batch.diameters_nm[:, None, :]) / 2
    return 0.5 * torch.where(pairs, wca(r, s, batch.kt_kj_mol), torch.zeros_like(r)).sum((1, 2))


def wall_kj_mol(batch: Replicas, positions_nm: torch.Tensor) -> torch.Tensor:
    """(R,) WCA of each ion with the lower and the upper wall (padding sits far from both, masked)."""
    z = positions_nm[..., 2]
    s = batch.diameters_nm / 2
    lower, upper = (torch.where(batch.mask, wca(torch.where(batch.mask, r, torch.ones_like(r)), s, batch.kt_kj_mol),
                                torch.zeros_like(r))
                    for r in (z - batch.walls_nm[:, :1], batch.walls_nm[:, 1:] - z))
    return (lower + upper).sum(1)
