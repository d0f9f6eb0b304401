# SPDX-License-Identifier: MIT
"""Hand-derived forces of every term, the hot path of a run (no autograd graph is built); the pair
terms over the pairs of a Verlet list (neighbours), the rest per size group.

potential.energy_and_forces uses these unless the graph is kept for gradients through the dynamics
(create_graph); tests/md/test_torch_engine.py checks them against autograd of potential.energies to
1e-10 relative. Energies as in short_range and ewald; F_i = -dU/dr_i:
- WCA, U = 4 kT (x^2 - x) + kT with x = (s/r)^6: dU/dr = -24 kT (2 x^2 - x) / r; on the pair
  vector d_ij = r_i - r_j, F_i = -(dU/dr) d_ij / r. A wall at distance r = z - z_low (or z_high - z)
  pushes along +z (or -z) with -dU/dr.
- real-space Coulomb, U = C q_i q_j erfc(a r) / r: dU/dr = -C q_i q_j (erfc(a r) / r + 2 a / sqrt(pi)
  exp(-a^2 r^2)) / r.
- reciprocal, U = C sum_k w_k (A_k^2 + B_k^2) with A_k = sum_j q_j cos(k.r_j), B_k = sum_j q_j sin(k.r_j):
  F_i = 2 C q_i sum_k w_k (A_k sin(k.r_i) - B_k cos(k.r_i)) k.
- slab, U = C (2 pi / V) M_z^2: F_i,z = -C (4 pi / V) M_z q_i.
"""

import math

import torch

from thrifty.md.torch_physics import ewald as ew
from thrifty.md.torch_physics.pairs import distances
from thrifty.md.torch_physics.replicas import Replicas
from thrifty.md.torch_physics.short_range import WCA_REACH


def _wca(r: torch.Tensor, s: torch.Tensor, kt: float,
         inside: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(U, -dU/dr / r): WCA energy and its radial force over r, 0 outside `inside` or past the cut."""
    x = (s * s / (r * r)) ** 3
    inside = r < WCA_REACH * s if inside is None else inside & (r < WCA_REACH * s)
    zero = torch.zeros_like(r)
    return (torch.where(inside, 4 * kt * (x * x - x) + kt, zero),
            torch.where(inside, 24 * kt * (2 * x * x - x) / (r * r), zero))


def _dense_pair_terms(batch: Replicas, setup: ew.Ewald, positions_nm: torch.Tensor,
                      terms: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """pair_terms in one dense all-pairs pass with the minimum image (pairs.distances), per size group:
    for batches whose list would hold every pair (ewald.list_pays)."""
    delta, r, pairs = distances(positions_nm, batch.box_nm, batch.mask)
    r2 = r * r
    energy = torch.zeros_like(r)
    over_r = torch.zeros_like(r)  # -dU/dr / r of each pair
    if "wca" in terms:
        s = (batch.diameters_nm[:, :, None] + batch.diameters_nm[:, None, :]) / 2
        u, f = _wca(r, s, batch.kt_kj_mol, pairs)
        energy, over_r = energy + u, over_r + f
    if "coulomb" in terms:
        inside = pairs & (r < setup.reach_nm[:, None, None])
        alpha = setup.alpha_per_nm[:, None, None]
        qq = ew.COULOMB * batch.charges_e[:, :, None] * batch.charges_e[:, None, :]
        erfc_over_r = torch.special.erfc(alpha * r) / r
        gauss = 2 * alpha / math.sqrt(math.pi) * torch.exp(-alpha * alpha * r2)
        zero = torch.zeros_like(r)
        energy = energy + torch.where(inside, qq * erfc_over_r, zero)
        over_r = over_r + torch.where(inside, qq * (erfc_over_r + gauss) / r2, zero)
    forces = (over_r[..., None] * delta).sum(2)
    return 0.5 * energy.sum((1, 2)), forces


def pair_terms(batch: Replicas, setup: ew.Ewald, positions_nm: torch.Tensor,
               terms: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """((R,) energy, (R, N, 3) forces) of the ion-ion WCA (if "wca" in terms) and the real-space
    Coulomb sum (if "coulomb"), over the pairs within the splitting's reach from setup.neighbours
    (a Verlet list; the WCA reach is shorter, ewald.prepare_ewald checks)."""
    neighbours = setup.neighbours
    if neighbours is None:
        raise ValueError("pair_terms needs a Verlet list (setup.neighbours); dense setups use the all-pairs pass")
    near = neighbours.listed(positions_nm, batch.box_nm, batch.mask)  # every listed pair, those past r_cut as zeros
    r = torch.sqrt(near.r2_nm2)
    r2 = r * r  # from r, as the dense pass (_dense_pair_terms) has it, not the listed r2
    energy = torch.zeros_like(r)
    over_r = torch.zeros_like(r)  # -dU/dr / r of each pair
    if "wca" in terms:  # the few pairs within the batch's longest WCA reach (~1% of the listed pairs), all within r_cut
        d = batch.diameters_nm.reshape(-1)
        close = (r < WCA_REACH * float(batch.diameters_nm.max())).nonzero().squeeze(1)
        s = (d.index_select(0, near.first.index_select(0, close)) + d.index_select(0, near.second.index_select(0, close))) / 2
        u, f = _wca(r.index_select(0, close), s, batch.kt_kj_mol)
        energy.index_add_(0, close, u)
        over_r.index_add_(0, close, f)
    if "coulomb" in terms:
        q = batch.charges_e.reshape(-1)
        alpha = neighbours.per_pair("alpha", lambda replica, _, __: setup.alpha_per_nm.index_select(0, replica))
        minus_alpha2 = neighbours.per_pair("-alpha^2", lambda *_: -alpha * alpha)
        gauss_scale = neighbours.per_pair("2 alpha / sqrt(pi)", lambda *_: 2 * alpha / math.sqrt(math.pi))
        qq = neighbours.per_pair("qq", lambda _, first, second: ew.COULOMB * q.index_select(0, first)
                                 * q.index_select(0, second))
        qq = torch.where(near.within, qq, torch.zeros_like(qq))
        inverse_r = 1 / r
        erfc_over_r = torch.special.erfc(alpha * r) * inverse_r
        gauss = gauss_scale * torch.exp(minus_alpha2 * r2)
        energy = energy + qq * erfc_over_r
        over_r = over_r + qq * (erfc_over_r + gauss) * (inverse_r * inverse_r)
    pair_force = over_r * near.delta_nm  # (3, L) on the first ion; the second gets its opposite
    forces = torch.zeros(3, positions_nm.shape[0] * positions_nm.shape[1], dtype=r.dtype, device=r.device)
    for axis in range(3):  # 1-D index_add_: a serial sum in the list's order, the first ions' then the seconds'
        forces[axis].index_add_(0, near.first, pair_force[axis])
        forces[axis].index_add_(0, near.second, pair_force[axis], alpha=-1)
    total = torch.zeros(positions_nm.shape[0], dtype=r.dtype, device=r.device).index_add_(0, near.replica, energy)
    return total, forces.T.reshape(positions_nm.shape)


def wall_term(batch: Replicas, positions_nm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """((R,) energy, (R, N, 3) forces) of the two walls (padding is masked)."""
    z = positions_nm[..., 2]
    s = batch.diameters_nm / 2
    energy = torch.zeros_like(z)
    push_up = torch.zeros_like(z)
    for r, sign in ((z - batch.walls_nm[:, :1], 1.0), (batch.walls_nm[:, 1:] - z, -1.0)):
        r = torch.where(batch.mask, r, torch.ones_like(r))
        u, f = _wca(r, s, batch.kt_kj_mol, batch.mask)
        energy, push_up = energy + u, push_up + sign * f * r
    forces = torch.zeros_like(positions_nm)
    forces[..., 2] = push_up
    return energy.sum(1), forces


def reciprocal_term(batch: Replicas, setup: ew.Ewald, positions_nm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """((R,) energy, (R, N, 3) forces) of the reciprocal sum plus the self term (ewald)."""
    phase = positions_nm @ setup.k_per_nm.transpose(1, 2)  # (R, N, K)
    cos, sin = torch.cos(phase), torch.sin(phase)
    q = batch.charges_e
    a = (q[:, None, :] @ cos)[:, 0]  # (R, K)
    b = (q[:, None, :] @ sin)[:, 0]
    energy = ew.COULOMB * (setup.weight_nm * (a * a + b * b)).sum(-1) + ew.self_kj_mol(batch, setup)
    weighted_k = setup.weight_nm[..., None] * setup.k_per_nm  # (R, K, 3); the sum over k as two matmuls
    forces = 2 * ew.COULOMB * q[..., None] * (sin @ (a[..., None] * weighted_k) - cos @ (b[..., None] * weighted_k))
    return energy, forces


def slab_term(batch: Replicas, setup: ew.Ewald, positions_nm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """((R,) energy, (R, N, 3) forces) of the Yeh-Berkowitz correction."""
    dipole = (batch.charges_e * positions_nm[..., 2]).sum(-1)
    factor = ew.COULOMB * 2 * math.pi / setup.volume_nm3
    forces = torch.zeros_like(positions_nm)
    forces[..., 2] = -2 * factor[:, None] * dipole[:, None] * batch.charges_e
    return factor * dipole ** 2, forces


def _group_terms(batch: Replicas, setup: ew.Ewald, positions_nm: torch.Tensor, terms: tuple[str, ...],
                 dense_pairs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    parts = [(positions_nm.new_zeros(positions_nm.shape[0]), torch.zeros_like(positions_nm))]
    if dense_pairs and ("wca" in terms or "coulomb" in terms):
        parts.append(_dense_pair_terms(batch, setup, positions_nm, terms))
    if "wall" in terms:
        parts.append(wall_term(batch, positions_nm))
    if "coulomb" in terms:
        parts.append(reciprocal_term(batch, setup, positions_nm))
    if "slab" in terms:
        parts.append(slab_term(batch, setup, positions_nm))
    energy, forces = parts[0]
    for e, f in parts[1:]:
        energy, forces = energy + e, forces + f
    return energy, forces


def energy_and_forces(batch: Replicas, setup: ew.Ewald, positions_nm: torch.Tensor,
                      terms: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """((R,) energy of `terms`, (R, N, 3) forces), zero forces on padding. With a neighbour list the
    pair terms cover the whole batch in one pass (the list is flat: no padded pairs); the rest, and
    dense pair terms without a list, per each of setup.groups (replicas of similar size,
    ewald.size_groups), cut to its own padding."""
    dense = setup.neighbours is None
    if not dense and ("wca" in terms or "coulomb" in terms):
        energy, forces = pair_terms(batch, setup, positions_nm, terms)
    else:
        energy, forces = positions_nm.new_zeros(positions_nm.shape[0]), torch.zeros_like(positions_nm)
    if len(setup.groups) <= 1:
        rest_energy, rest_forces = _group_terms(batch, setup, positions_nm, terms, dense)
        return energy + rest_energy, forces + rest_forces
    for group in setup.groups:
        index, n, k = group.index, group.ions, group.k_vectors
        part = Replicas(batch.charges_e[index, :n], batch.diameters_nm[index, :n], batch.masses_amu[index, :n],
                        batch.mask[index, :n], batch.box_nm[index], batch.walls_nm[index], batch.kt_kj_mol,
                        group.models)
        part_setup = ew.Ewald(setup.alpha_per_nm[index], setup.k_per_nm[index, :k], setup.weight_nm[index, :k],
                              setup.volume_nm3[index], setup.reach_nm[index])
        rest_energy, rest_forces = _group_terms(part, part_setup, positions_nm[index, :n], terms, dense)
        energy[index] += rest_energy
        forces[index, :n] += rest_forces
    return energy, forces
