# SPDX-License-Identifier: MIT
"""What the nanoconfinement model fixes about a profile before any learning, on the surrogate's
reduced grid (md.profile_grid: `bins` cells of width h / bins across the slit, z from the mid-plane).

- Counts. The model puts N- = int(c 0.6022 L^2 h) anions (down to a multiple of z+) and
  N+ = |z-| N- / z+ cations in the slit (md.nanoconfinement.ion_counts), so each ion's density
  integrates over the slit to I = N / (0.6022 L^2) in M nm, and z+ I+ = |z-| I- exactly.
- Symmetry. The two walls are the same, so a profile is even about the mid-plane: the surrogate
  predicts the half at z >= 0 (`half` bins) and mirrors it; an MD profile is folded (the mirrored
  bins averaged, their error bars combined as independent: sqrt(e1^2 + e2^2) / 2).
- The flat baseline (no training): each ion's count spread evenly over the width its centre can
  reach, h - d (its centre stays d/2 from a wall), zero nearer the walls.
No torch; OpenMM (md.nanoconfinement) only once counts are computed.
"""

import numpy as np

from thrifty.md.params import PARAMETERS
from thrifty.md.profile_grid import reduced_grid

H, ZP, ZM, C, DP, DM = (PARAMETERS.index(p) for p in PARAMETERS)


def count_integrals(points: np.ndarray, box_nm: float | None) -> np.ndarray:
    """(n, 2): the integral over the slit of the cation and anion density, M nm, that the model's
    ion counts fix (box_nm: the side of the square wall; None: the model's default for c)."""
    from thrifty.md.nanoconfinement import AVOGADRO_PER_NM3_MOLAR, NanoconfinementModel, ion_counts  # OpenMM
    out = []
    for p in np.atleast_2d(points):
        model = NanoconfinementModel(h_nm=float(p[H]), z_plus=int(round(p[ZP])), z_minus=int(round(p[ZM])),
                                     c_molar=float(p[C]), d_plus_nm=float(p[DP]), d_minus_nm=float(p[DM]),
                                     box_nm=box_nm)
        n_plus, n_minus = ion_counts(model)
        out.append(np.array([n_plus, n_minus]) / (AVOGADRO_PER_NM3_MOLAR * model.side_nm ** 2))
    return np.array(out)


def integrals(points: np.ndarray, density: np.ndarray) -> np.ndarray:
    """(n, 2): each ion's density (n, 2, bins) integrated over the slit (sum times the cell h / bins)."""
    h = np.atleast_2d(points)[:, H]
    return density.sum(axis=-1) * (h / density.shape[-1])[:, None]


def net_charge(points: np.ndarray, density: np.ndarray) -> np.ndarray:
    """(n,): z+ I+ + z- I- in M nm (zero for an electroneutral slit)."""
    points = np.atleast_2d(points)
    total = integrals(points, density)
    return points[:, ZP] * total[:, 0] + points[:, ZM] * total[:, 1]


def fold(full: np.ndarray) -> np.ndarray:
    """The half at z >= 0 of profiles (..., bins), each bin the mean of it and its mirror image."""
    half = full.shape[-1] // 2
    return 0.5 * (full[..., half:] + full[..., :half][..., ::-1])


def fold_error(full: np.ndarray) -> np.ndarray:
    """Error bars of `fold`: the two bins' errors taken as independent."""
    half = full.shape[-1] // 2
    return 0.5 * np.sqrt(full[..., half:] ** 2 + full[..., :half][..., ::-1] ** 2)


def mirror(half: np.ndarray) -> np.ndarray:
    """Full profiles (..., 2 half) from their halves at z >= 0."""
    return np.concatenate([half[..., ::-1], half], axis=-1)


def reachable_fraction(points: np.ndarray, bins: int) -> np.ndarray:
    """(n, 2, bins): the share of each grid cell within (h - d) / 2 of the mid-plane, per ion."""
    points = np.atleast_2d(points)
    s = reduced_grid(bins)
    out = np.empty((len(points), 2, bins))
    for i, p in enumerate(points):
        h = p[H]
        cell = h / bins
        for ion, d in enumerate((p[DP], p[DM])):
            reach = max(h - d, 0.0) / 2
            low, high = s * h - cell / 2, s * h + cell / 2
            out[i, ion] = np.clip(np.minimum(high, reach) - np.maximum(low, -reach), 0.0, None) / cell
    return out


def flat_profiles(points: np.ndarray, box_nm: float | None, bins: int) -> np.ndarray:
    """(n, 2, bins): the flat baseline, each ion's count I spread over the width h - d it reaches."""
    points = np.atleast_2d(points)
    fraction = reachable_fraction(points, bins)
    width = fraction.sum(axis=-1) * (points[:, H] / bins)[:, None]
    return fraction * (count_integrals(points, box_nm) / np.maximum(width, 1e-12))[..., None]


def wall_boltzmann(points: np.ndarray, bins: int, samples: int = 16) -> np.ndarray:
    """(n, 2, bins): the Boltzmann factor exp(-U / kT) of the walls alone, the ideal-gas profile next
    to a wall: U is the model's ion-wall repulsion (md.nanoconfinement `_walls`), the shifted 12-6
    potential 4 ((s/r)^12 - (s/r)^6) + 1 in kT for r < 2^(1/6) s, s = d/2, r the distance from the
    ion centre to each wall. Averaged over each grid cell (`samples` points; on a split of the replay
    set the cell mean fitted held-out runs slightly better than a 0.05 nm window at the grid point,
    the MD bin md.profile_grid.to_grid resamples). 0 where an ion
    centre cannot be, 1 in the middle, with the soft edge the walls give."""
    points = np.atleast_2d(points)
    offsets = (np.arange(samples) + 0.5) / samples - 0.5
    s_grid = reduced_grid(bins)
    out = np.empty((len(points), 2, bins))
    for i, p in enumerate(points):
        h = p[H]
        z = (s_grid[:, None] + offsets[None, :] / bins) * h  # (bins, samples)
        for ion, d in enumerate((p[DP], p[DM])):
            sigma = d / 2
            energy = np.zeros_like(z)
            for r in (h / 2 + z, h / 2 - z):
                r = np.maximum(r, 1e-6)
                inside = r < 2 ** (1 / 6) * sigma
                energy += np.where(inside, 4 * ((sigma / r) ** 12 - (sigma / r) ** 6) + 1, 0.0)
            out[i, ion] = np.exp(-np.minimum(energy, 700.0)).mean(axis=1)
    return out
