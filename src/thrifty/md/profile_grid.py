# SPDX-License-Identifier: MIT
"""The surrogate's representation of a density profile: a fixed grid in reduced position.

Runs of different wall separation h have different z ranges, so every profile is resampled onto
the same `bins` points of reduced position s = (z - z_mid) / h in [-1/2, 1/2] (bin centres
s_k = -1/2 + (k + 1/2) / bins), z_mid being the slit's mid-plane: the midpoint of the profile's
first and last z. Resampling is linear interpolation in z; a grid point beyond the profile's first
or last z takes that end's value. A prediction maps back with z_nm = s * h (measured from the
mid-plane). Densities are in molar throughout.

Contact, peak and mid-plane densities (the quantities Kadupitiya, Fox & Jadhao report): contact is
the density of the layer touching a wall, the largest density within one ion diameter d of it
(h/2 - |z| <= d), averaged over both walls (`contact_density`). The MD summary
(md.profiles.landmarks) reads the same bins (`contact_bins`) the same way, so surrogate and MD
contact densities compare. Why the largest and not the value at the distance of closest approach
h/2 - d/2: the profile jumps from 0 to its contact value there, so a value read exactly at d/2
depends on where the jump falls between bins (a bin straddling it averages the empty layer with the
peak) and on the resolution (0.05 nm MD bins, h/50 on the grid). The layer's maximum moves little
with binning, and it is the contact peak, which is what the paper's contact density describes as
far as this code's sources tell (its exact recipe is not quoted here). In a slit narrower than two
diameters (h < 2 d) the layers of the two walls overlap and there is no layer one diameter wide at
either wall: the contact density is then the density at closest approach, the bin holding
z = +-(h/2 - d/2) (an ion centre touching the wall), so with all ions in the middle it is the
middle bin's density.
Peak is the largest density anywhere; mid-plane is the density at s = 0 (interpolated on the grid).
"""

import numpy as np

DEFAULT_BINS = 50


def reduced_grid(bins: int = DEFAULT_BINS) -> np.ndarray:
    """The bin centres in s = (z - z_mid) / h."""
    return -0.5 + (np.arange(bins) + 0.5) / bins


def to_grid(z_nm: np.ndarray, values: np.ndarray, h_nm: float, bins: int = DEFAULT_BINS) -> np.ndarray:
    """`values` (one per z, or one row per quantity) resampled onto the reduced grid."""
    z_nm = np.asarray(z_nm, float)
    s = (z_nm - 0.5 * (z_nm[0] + z_nm[-1])) / h_nm
    grid = reduced_grid(bins)
    return np.apply_along_axis(lambda row: np.interp(grid, s, row), -1, np.asarray(values, float))


def to_z_nm(h_nm: float, bins: int = DEFAULT_BINS) -> np.ndarray:
    """The grid in nm from the mid-plane, for a slit of width h."""
    return reduced_grid(bins) * h_nm


def contact_bins(z_nm: np.ndarray, h_nm: float, d_nm: float) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the bins at most one ion diameter from the left and from the right wall
    (h/2 - |z| <= d, z from the mid-plane; each wall's outermost bin at least); if h < 2 d, each
    wall's bin of closest approach, nearest z = -+(h/2 - d/2)."""
    z_nm = np.asarray(z_nm, float)
    if h_nm < 2 * d_nm:
        closest = max(h_nm - d_nm, 0.0) / 2
        left = int(np.argmin(np.abs(z_nm + closest)))
        right = len(z_nm) - 1 - int(np.argmin(np.abs(z_nm[::-1] - closest)))  # the mirror's tie: the other side
        return np.array([left]), np.array([right])
    near = h_nm / 2 - np.abs(z_nm) <= d_nm
    near[[0, -1]] = True
    return np.flatnonzero(near & (z_nm < 0)), np.flatnonzero(near & (z_nm > 0))


def contact_density(profile: np.ndarray, z_nm: np.ndarray, h_nm: float, d_nm: float) -> np.ndarray:
    """The largest density within one diameter of each wall, averaged over the two walls (last axis: bins)."""
    profile = np.asarray(profile, float)
    left, right = contact_bins(z_nm, h_nm, d_nm)
    return 0.5 * (profile[..., left].max(axis=-1) + profile[..., right].max(axis=-1))


def features(profile: np.ndarray, h_nm: float, d_nm: float) -> dict[str, np.ndarray]:
    """Contact, peak and mid-plane density of profiles on the grid (last axis: bins)."""
    profile = np.asarray(profile, float)
    grid = reduced_grid(profile.shape[-1])
    contact = contact_density(profile, grid * h_nm, h_nm, d_nm)
    mid = np.apply_along_axis(lambda row: np.interp(0.0, grid, row), -1, profile)
    return {"contact": contact, "peak": profile.max(axis=-1), "mid": mid}
