# SPDX-License-Identifier: MIT
"""Slab Ewald electrostatics of the nanoconfinement model, batched over replicas (kJ/mol).

Charges q (valencies) in water of eps_r 80: Coulomb constant ONE_4PI_EPS0 / 80. The box is periodic
in 3D with Lz padded (>= 3 h), and the Yeh-Berkowitz term removes the interaction of the slab's
periodic images along z (Yeh & Berkowitz, J. Chem. Phys. 111, 3155 (1999)). Ewald sum (e.g. Frenkel
& Smit, "Understanding Molecular Simulation", 2nd ed., ch. 12.1), Gaussian units times the constant:
- real space: sum_{i<j, r<rc} q_i q_j erfc(alpha r) / r (minimum image; rc = real_space_reach_nm, below)
- reciprocal: (2 pi / V) sum_{k != 0, |k| <= k_max} exp(-k^2 / 4 alpha^2) / k^2 |S(k)|^2, S(k) = sum_j q_j
  exp(i k.r_j), k = 2 pi (nx/Lx, ny/Ly, nz/Lz); half of the k-space, counted twice (S(-k) = S(k)*)
- self: -alpha / sqrt(pi) sum_j q_j^2
- slab: (2 pi / V) M_z^2, M_z = sum_j q_j z_j (Yeh & Berkowitz 1999, eq. 11; neutral systems)
The splitting is the engine's own, not the model's cutoff (what OpenMM's PME wants): rc is chosen
for the least work a step, between half and all of the longest reach the minimum image allows,
min(lx/2, ly/2, Lz - h) (an ion's nearest z image is at least Lz - h away). The real-space pairs come
from a Verlet list (neighbours), whose size grows with rc (the share of the slit within rc + skin,
list_pays), and the k-space sum needs (cutoff / rc)^3 as many k-vectors: the step's work is
    PAIR_COST x listed pairs + ions x k-vectors,
PAIR_COST the cost of one listed pair in ion-k-vector terms (fitted below). For the default system
(406 ions, 15 x 15 x 9 nm) that is rc 4.5 nm (568 k-vectors, 26k listed pairs) instead of the
longest, 6 nm (241, 46k): 0.86x the CPU time a step in float64, 0.90x in float32 (the timings
below). A system whose list would hold every pair (list_pays False) sums its pairs dense at the
longest reach, which then costs the fewest k-vectors.
The total is the same Ewald sum at the same tolerance. Parameters from the tolerance
delta (the model's ewald_tolerance): alpha = sqrt(-ln(2 delta)) / rc, OpenMM's choice, so that
erfc(alpha rc) ~ delta; k_max = 2 alpha sqrt(-ln delta), so the neglected
Gaussian factor exp(-k_max^2 / 4 alpha^2) = delta. The relative error is then at most about delta:
for the default system (406 ions, 15 x 15 x 9 nm) at rc 6 nm and the default delta 5e-4 (alpha 0.44/nm,
241 k-vectors; with the model's rc 2.5 nm it would be 3340) the Coulomb energy of a thermal
configuration is off by 8e-5 and the forces by 1.3e-4 (rms over rms) of a delta 1e-9 sum; at 1e-5
(889 k-vectors) by 1.6e-6 and 2.6e-6. tests/md/test_torch_engine.py checks |error| <= 10 delta
against the converged direct sum of test_nanoconfinement, down to delta 1e-12.
"""

import math
from dataclasses import dataclass

import torch

from thrifty.md.nanoconfinement import ONE_4PI_EPS0, WATER_PERMITTIVITY, NanoconfinementModel, ion_counts
from thrifty.md.torch_physics.neighbours import SKIN_NM, NeighbourList
from thrifty.md.torch_physics.replicas import Replicas
from thrifty.md.torch_physics.short_range import WCA_REACH

COULOMB = ONE_4PI_EPS0 / WATER_PERMITTIVITY  # kJ mol^-1 nm e^-2 for valencies in water


GROUP_FILL = 0.7  # size_groups: least ion count in a group, as a share of its largest


@dataclass(frozen=True)
class SizeGroup:
    """Replicas of similar size that forces.py evaluates together, cut to their own padding."""
    index: torch.Tensor  # (G,) their rows in the batch
    ions: int  # the largest ion count among them
    k_vectors: int  # the most k-vectors among them
    models: tuple[NanoconfinementModel, ...]


@dataclass(frozen=True)
class Ewald:
    alpha_per_nm: torch.Tensor  # (R,)
    k_per_nm: torch.Tensor  # (R, K, 3) half of the k-space, padded
    weight_nm: torch.Tensor  # (R, K) 2 * (2 pi / V) exp(-k^2/4 alpha^2) / k^2; 0 on padding
    volume_nm3: torch.Tensor  # (R,)
    reach_nm: torch.Tensor  # (R,) real-space cutoff of the splitting (real_space_reach_nm)
    groups: tuple[SizeGroup, ...] = ()  # size_groups; () evaluates the batch as one group
    neighbours: NeighbourList | None = None  # the pairs within reach_nm for forces.pair_terms; None: dense (list_pays)


def size_groups(ions: list[int], k_vectors: list[int], models: tuple[NanoconfinementModel, ...],
                device: torch.device) -> tuple[SizeGroup, ...]:
    """Sorted by ion count, a group holds the replicas with at least GROUP_FILL of its largest count:
    the pair work of a group is then at most 1 / GROUP_FILL^2 times what its ions need, and its
    k-space work at most 1 / GROUP_FILL times the spread of its k-vector counts (which grow with Lz, hence h),
    where one pad for the whole batch would cost (N_max / N_min)^2 and N_max / N_min. Fixed for a run
    (the counts never change), so computed once here rather than every step."""
    groups: list[list[int]] = []
    for i in sorted(range(len(ions)), key=lambda i: -ions[i]):
        if groups and ions[i] >= GROUP_FILL * ions[groups[-1][0]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return tuple(SizeGroup(torch.tensor(g, device=device), ions[g[0]], max(k_vectors[i] for i in g),
                           tuple(models[i] for i in g)) for g in groups)


def _half_space(n: tuple[int, int, int]) -> torch.Tensor:
    """Integer vectors m != 0 with m_x > 0, or m_x = 0 and m_y > 0, or m_x = m_y = 0 and m_z > 0."""
    axes = [torch.arange(-k, k + 1) for k in n]
    m = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    x, y, z = m.unbind(-1)
    return m[(x > 0) | ((x == 0) & (y > 0)) | ((x == 0) & (y == 0) & (z > 0))]


# A listed pair's work a step (gathers, minimum image, erfc, exp, the scattered sums: ~25 passes over
# the list) in units of one ion x k-vector term of the reciprocal sum (a phase, its cos and sin, four
# matmul terms). Fitted on the default system, one thread of this 2-core machine, CPU time a step after
# 20 warm-up steps, medians of 3 (float64 / float32): rc 6 nm 5.08 / 3.33 ms, 5 nm 4.33 / 3.00,
# 4.5 nm 4.35 / 3.00; solving time = base + a pairs + b ions k-vectors gives a / b = 12 in both.
PAIR_COST = 12.0
REACH_CANDIDATES = 21  # rc tried from half the longest reach to all of it


def longest_reach_nm(model: NanoconfinementModel) -> float:
    """The longest real-space cutoff the minimum image allows (module doc)."""
    return min(model.side_nm / 2, model.box_z_nm - model.h_nm)


def listed_share(model: NanoconfinementModel, list_reach_nm: float) -> float:
    """The share of the slit within list_reach_nm of an ion: min(4/3 pi r^3, pi r^2 h) / (lx ly h) (a
    sphere, or a cylinder once it spans the slit)."""
    r = list_reach_nm
    return min(4 / 3 * math.pi * r ** 3, math.pi * r ** 2 * model.h_nm) / (model.side_nm ** 2 * model.h_nm)


def list_pays(model: NanoconfinementModel, skin_nm: float = SKIN_NM) -> bool:
    """Whether a Verlet list at the longest reach would leave pairs out (listed_share below 1). A
    list that holds every pair saves nothing and costs its gathers and scattered sums (measured, CPU
    time: 1.5x the dense pass for one replica of 18 ions in a 4 nm box); the default system's list at
    6 nm holds 0.56 of the pairs (estimate 0.57), and its pair terms take 0.3x the dense pass."""
    return listed_share(model, longest_reach_nm(model) + skin_nm) < 1


def k_vectors(model: NanoconfinementModel, delta: float, reach_nm: float) -> tuple[float, torch.Tensor, torch.Tensor]:
    """(alpha, k (K, 3), k^2 (K,)) of the splitting at reach_nm and tolerance delta (module doc)."""
    alpha = math.sqrt(-math.log(2 * delta)) / reach_nm
    k_max = 2 * alpha * math.sqrt(-math.log(delta))
    box = torch.tensor([model.side_nm, model.side_nm, model.box_z_nm], dtype=torch.float64)
    nx, ny, nz = (math.ceil(k_max * float(side) / (2 * math.pi)) for side in box)
    m = _half_space((nx, ny, nz))
    k = 2 * math.pi * m.to(torch.float64) / box
    k2 = (k * k).sum(-1)
    return alpha, k[k2 <= k_max ** 2], k2[k2 <= k_max ** 2]


def real_space_reach_nm(model: NanoconfinementModel, tolerance: float | None = None) -> float:
    """The real-space cutoff of the splitting (module doc): with a list, the rc of REACH_CANDIDATES
    from half the longest reach to all of it with the least PAIR_COST x listed pairs + ions x
    k-vectors; without one, the longest."""
    longest = longest_reach_nm(model)
    if not list_pays(model):
        return longest
    candidates = (longest * (0.5 + 0.5 * i / (REACH_CANDIDATES - 1)) for i in range(REACH_CANDIDATES))
    return min(candidates, key=lambda reach: splitting_work(model, reach, tolerance))


def splitting_work(model: NanoconfinementModel, reach_nm: float, tolerance: float | None = None) -> float:
    """A step's modelled work at real-space reach reach_nm: PAIR_COST x listed pairs (the pairs within
    reach + skin, listed_share) + ions x k-vectors, in ion-k-vector terms."""
    delta = model.ewald_tolerance if tolerance is None else tolerance
    ions = sum(ion_counts(model))
    listed = ions * (ions - 1) / 2 * min(1.0, listed_share(model, reach_nm + SKIN_NM))
    return PAIR_COST * listed + ions * len(k_vectors(model, delta, reach_nm)[1])


def prepare_ewald(batch: Replicas, tolerance: float | None = None) -> Ewald:
    """Each replica's alpha and k-vectors from its reach, box and tolerance (None: its model's)."""
    dtype, device = batch.box_nm.dtype, batch.box_nm.device
    alphas, ks, weights, reaches = [], [], [], []
    for model in batch.models:
        delta = model.ewald_tolerance if tolerance is None else tolerance
        reaches.append(real_space_reach_nm(model, delta))
        alpha, k, k2 = k_vectors(model, delta, reaches[-1])
        alphas.append(alpha)
        ks.append(k)
        volume = model.side_nm ** 2 * model.box_z_nm
        weights.append(2 * 2 * math.pi / volume * torch.exp(-k2 / (4 * alpha ** 2)) / k2)
    size = max(len(k) for k in ks)
    k_pad = torch.zeros(len(ks), size, 3, dtype=torch.float64)
    w_pad = torch.zeros(len(ks), size, dtype=torch.float64)
    for i, (k, w) in enumerate(zip(ks, weights, strict=True)):
        k_pad[i, :len(k)], w_pad[i, :len(w)] = k, w
    reach = torch.tensor(reaches, dtype=dtype, device=device)
    groups = size_groups(batch.mask.sum(-1).tolist(), [len(k) for k in ks], batch.models, batch.mask.device)
    for model, rc in zip(batch.models, reaches, strict=True):  # the list holds the pairs within reach: the WCA pairs must be among them
        wca_reach = WCA_REACH * max(model.d_plus_nm, model.d_minus_nm)
        if rc <= wca_reach:
            raise ValueError(f"the real-space reach {rc} nm is within the WCA reach {wca_reach:.3f} nm")
    neighbours = NeighbourList(reach) if any(list_pays(m) for m in batch.models) else None
    return Ewald(torch.tensor(alphas, dtype=dtype, device=device), k_pad.to(dtype=dtype, device=device),
                 w_pad.to(dtype=dtype, device=device), batch.box_nm.prod(-1), reach, groups,
                 neighbours)


def real_kj_mol(batch: Replicas, setup: Ewald, r: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """(R,) real-space sum over pairs i < j within the reach; r and pairs from pairs.distances."""
    q = batch.charges_e
    inside = pairs & (r < setup.reach_nm[:, None, None])
    term = q[:, :, None] * q[:, None, :] * torch.special.erfc(setup.alpha_per_nm[:, None, None] * r) / r
    return COULOMB * 0.5 * torch.where(inside, term, torch.zeros_like(r)).sum((1, 2))


def reciprocal_kj_mol(batch: Replicas, setup: Ewald, positions_nm: torch.Tensor) -> torch.Tensor:
    """(R,) reciprocal-space sum (padding has q = 0, padded k-vectors weight 0)."""
    phase = positions_nm @ setup.k_per_nm.transpose(1, 2)  # (R, N, K)
    q = batch.charges_e[:, None, :]
    cos, sin = (q @ torch.cos(phase))[:, 0], (q @ torch.sin(phase))[:, 0]
    return COULOMB * (setup.weight_nm * (cos * cos + sin * sin)).sum(-1)


def self_kj_mol(batch: Replicas, setup: Ewald) -> torch.Tensor:
    return -COULOMB * setup.alpha_per_nm / math.sqrt(math.pi) * (batch.charges_e ** 2).sum(-1)


def slab_kj_mol(batch: Replicas, setup: Ewald, positions_nm: torch.Tensor) -> torch.Tensor:
    dipole = (batch.charges_e * positions_nm[..., 2]).sum(-1)
    return COULOMB * 2 * math.pi / setup.volume_nm3 * dipole ** 2
