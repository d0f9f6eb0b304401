# SPDX-License-Identifier: MIT
"""Number-density profiles along z: histograms in blocks, block-average error bars, convergence.

Each sample (one per chunk of steps, after equilibration) adds its per-species histogram of z to
the current block; a block holds `samples_per_block` samples. The profile is the mean over all
samples; its error bar in each bin is the standard error of the complete blocks' means,
sd(block means) / sqrt(blocks) (Flyvbjerg & Petersen, J. Chem. Phys. 91, 461 (1989): blocks long
against the correlation time make the means independent). Between walls the bins are
BIN_WIDTH_NM wide (the last is stretched or shrunk to end on the wall), densities are in mol/L,
and a run has converged when at least MIN_BLOCKS blocks are complete and every bin's error bar is
at or below the tolerance: an absolute one (molar), or with `relative`, the larger of that share of
the bin's density and the absolute floor (so a dilute mid-plane is not "converged" at several
times its own density, nor a dense contact peak held to a dilute bin's bar).

Between two identical walls a profile is even about the mid-plane: `profiles(..., symmetric=True)`
averages each block's histogram with its mirror image before the mean and the block-average error,
so the error bars of the symmetrised profile account for the two halves' correlation (the bins
must be symmetric about the mid-plane, as `edges_nm` makes them between walls).
"""

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from thrifty.io import write_bytes_atomic, write_text_atomic
from thrifty.md.profile_grid import contact_bins

BIN_WIDTH_NM = 0.05
PERIODIC_BINS = 60  # across the box, for a system without walls
MIN_BLOCKS = 10
PER_NM3_PER_MOLAR = 0.6022  # N_A * 1 mol/L in nm^-3


def edges_nm(z_range_nm: tuple[float, float], walls: bool) -> np.ndarray:
    """Bin edges: BIN_WIDTH_NM-wide bins between walls (h / round(h / width) exactly), else PERIODIC_BINS."""
    low, high = z_range_nm
    bins = max(1, round((high - low) / BIN_WIDTH_NM)) if walls else PERIODIC_BINS
    return np.linspace(low, high, bins + 1)


def histogram(z_nm: np.ndarray, species: np.ndarray, n_species: int, edges: np.ndarray) -> np.ndarray:
    """(species, bins) counts of one configuration."""
    return np.stack([np.histogram(z_nm[species == s], bins=edges)[0] for s in range(n_species)]).astype(float)


def add_sample(blocks: np.ndarray, counts: np.ndarray, sample: int, samples_per_block: int) -> np.ndarray:
    """`blocks` (blocks, species, bins) with sample number `sample` (0-based) added to its block."""
    block = sample // samples_per_block
    if block == len(blocks):
        blocks = np.concatenate([blocks, np.zeros((1, *counts.shape))])
    blocks[block] += counts
    return blocks


@dataclass(frozen=True)
class Profiles:
    z_nm: np.ndarray  # bin centres, measured from the mid-plane
    molar: np.ndarray  # (species, bins) mean density, mol/L
    error_molar: np.ndarray  # (species, bins) standard error from block means; NaN with < 2 blocks
    complete_blocks: int
    bin_width_nm: float

    def max_error_molar(self) -> float:
        return float(np.max(self.error_molar)) if self.complete_blocks >= 2 else math.inf


def profiles(blocks: np.ndarray, samples: int, samples_per_block: int, edges: np.ndarray,
             area_nm2: float, symmetric: bool = False) -> Profiles:
    """Mean and block-average error bars; `symmetric`: of the blocks averaged with their mirror images."""
    if symmetric:
        blocks = 0.5 * (blocks + blocks[..., ::-1])
    bin_volume_molar = area_nm2 * np.diff(edges) * PER_NM3_PER_MOLAR  # count / this = mol/L
    mean = blocks.sum(axis=0) / max(samples, 1) / bin_volume_molar
    complete = samples // samples_per_block
    if complete >= 2:
        block_means = blocks[:complete] / samples_per_block / bin_volume_molar
        error = block_means.std(axis=0, ddof=1) / math.sqrt(complete)
    else:
        error = np.full_like(mean, np.nan)
    centres = 0.5 * (edges[:-1] + edges[1:]) - 0.5 * (edges[0] + edges[-1])
    return Profiles(centres, mean, error, complete, float(np.round(edges[1] - edges[0], 12)))


def converged(p: Profiles, tolerance_molar: float, relative: float | None = None) -> bool:
    """MIN_BLOCKS complete and every error bar <= tolerance_molar, or with `relative` (e.g. 0.1) <= the
    larger of relative x the bin's density and tolerance_molar (then the absolute floor)."""
    if p.complete_blocks < MIN_BLOCKS:
        return False
    allowed = tolerance_molar if relative is None else np.maximum(relative * np.abs(p.molar), tolerance_molar)
    return bool(np.all(p.error_molar <= allowed))


def _at(p: Profiles, s: int, bins: list[int]) -> tuple[float, float]:
    """Mean density of species s over `bins` and its error (the bins' errors taken as independent)."""
    error = math.sqrt(sum(p.error_molar[s, b] ** 2 for b in bins)) / len(bins)
    return float(np.mean(p.molar[s, bins])), error


def landmarks(p: Profiles, names: tuple[str, ...], radii_nm: tuple[float, ...] | None) -> dict[str, dict]:
    """Per species: mid-plane density (the bins at z = 0, symmetrised), peak density and where, and the
    contact density (needs the radii, d = 2 r): the largest density within one diameter of each wall
    (in a slit narrower than 2 d: the density at closest approach, h/2 - d/2 from the mid-plane), the
    two walls averaged, with the error of those bins; the surrogate's definition
    (md.profile_grid.contact_bins, where the choice is argued)."""
    half_nm = -p.z_nm[0] + 0.5 * (p.z_nm[1] - p.z_nm[0]) if len(p.z_nm) > 1 else 0.0

    def nearest(z: float) -> int:
        return int(np.argmin(np.abs(p.z_nm - z)))
    middle = sorted({nearest(0.0), len(p.z_nm) - 1 - nearest(0.0)})
    out = {}
    for s, name in enumerate(names):
        peak = int(np.argmax(p.molar[s]))
        mid, mid_err = _at(p, s, middle)
        row = {"midplane_molar": mid, "midplane_err": mid_err, "peak_molar": float(p.molar[s, peak]),
               "peak_err": float(p.error_molar[s, peak]), "peak_z_nm": float(p.z_nm[peak])}
        if radii_nm is not None:
            walls = contact_bins(p.z_nm, 2 * half_nm, 2 * radii_nm[s])
            contact, contact_err = _at(p, s, sorted({int(b[np.argmax(p.molar[s, b])]) for b in walls}))
            row |= {"contact_molar": contact, "contact_err": contact_err}
        out[name] = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
    return out


def write_csv(path: Path, p: Profiles, names: tuple[str, ...]) -> None:
    """z_nm, then <species>_molar and <species>_err per species (e.g. cation_molar, cation_err, ...)."""
    header = ",".join(["z_nm", *(f"{n}_{c}" for n in names for c in ("molar", "err"))])
    rows = "".join(f"{z:.4f}," + ",".join(f"{p.molar[s, b]:.6f},{p.error_molar[s, b]:.6f}"
                                          for s in range(len(names))) + "\n"
                   for b, z in enumerate(p.z_nm))
    write_text_atomic(path, header + "\n" + rows)


def plot_png(path: Path, p: Profiles, names: tuple[str, ...], title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for s, name in enumerate(names):
        ax.errorbar(p.z_nm, p.molar[s], yerr=np.nan_to_num(p.error_molar[s]), label=name, capsize=2, lw=1)
    ax.set_xlabel("z (nm, from the mid-plane)")
    ax.set_ylabel("density (mol/L)")
    ax.set_title(title, fontsize=7, wrap=True)
    ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
