# SPDX-License-Identifier: MIT
"""R nanoconfinement systems in one set of padded tensors (units: nm, ps, kJ/mol, amu, e).

Replicas differ in h, valencies, concentration, diameters and box, hence in particle count: every
per-particle tensor is padded to the largest count with `mask` False on the padding (zero charge,
zero diameter, at the slit's mid-plane, unit mass), and every term of the energy ignores padding.
"""

from dataclasses import dataclass

import numpy as np
import torch

from thrifty.md.nanoconfinement import ION_MASS_AMU, NanoconfinementModel, ion_layout, kt_kj_mol, slit_nm


@dataclass(frozen=True)
class Replicas:
    charges_e: torch.Tensor  # (R, N) valencies (unscaled: the 1/80 is in the Coulomb constant)
    diameters_nm: torch.Tensor  # (R, N)
    masses_amu: torch.Tensor  # (R, N)
    mask: torch.Tensor  # (R, N) bool, False on padding
    box_nm: torch.Tensor  # (R, 3) lx, ly, padded Lz
    walls_nm: torch.Tensor  # (R, 2) z of the two wall planes in the box
    kt_kj_mol: float
    models: tuple[NanoconfinementModel, ...]


def replicas(models: list[NanoconfinementModel], seed: int = 0, dtype: torch.dtype = torch.float64,
             device: str | torch.device = "cpu") -> tuple[Replicas, torch.Tensor]:
    """The replicas and their start positions (R, N, 3): md.nanoconfinement's lattice for each model."""
    systems = [ion_layout(m, seed) for m in models]
    n = max(len(s.species) for s in systems)
    r = len(models)
    charges, diameters = np.zeros((r, n)), np.zeros((r, n))
    mask, masses = np.zeros((r, n), bool), np.ones((r, n))
    positions = np.zeros((r, n, 3))
    for i, (m, s) in enumerate(zip(models, systems, strict=True)):
        k = len(s.species)
        cation = s.species == 0
        charges[i, :k] = np.where(cation, m.z_plus, m.z_minus)
        diameters[i, :k] = np.where(cation, m.d_plus_nm, m.d_minus_nm)
        mask[i, :k], masses[i, :k] = True, ION_MASS_AMU
        positions[i, :k] = s.positions_nm
        positions[i, k:] = [m.side_nm / 2, m.side_nm / 2, m.box_z_nm / 2]
    as_tensor = lambda a: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
    batch = Replicas(as_tensor(charges), as_tensor(diameters), as_tensor(masses), torch.as_tensor(mask, device=device),
                     as_tensor([[m.side_nm, m.side_nm, m.box_z_nm] for m in models]),
                     as_tensor([slit_nm(m) for m in models]), kt_kj_mol(), tuple(models))
    return batch, as_tensor(positions)
