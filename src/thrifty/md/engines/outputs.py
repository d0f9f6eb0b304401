# SPDX-License-Identifier: MIT
"""A finished replica's files, the same for every engine (written atomically, at the end):
density_profile.csv (number density of each species along z, per nm^3), final_state.npz
(positions nm, velocities nm/ps, the summed histogram, the step), and between walls profiles.csv
(mol/L with block-average error bars, md.profiles) and profiles.png; for the nanoconfinement model
also params.json (the point, as md.runs reads it, so an `md run` folder trains the surrogate).
summary.json is the loop's (md.engines.job_loop)."""

import hashlib
import io
import json
from pathlib import Path

import numpy as np

from thrifty.io import write_bytes_atomic, write_text_atomic
from thrifty.md import profiles as prof
from thrifty.md.engines.protocol import ReplicaLayout
from thrifty.md.params import PARAMETERS
from thrifty.md.runs import PARAMS_FILE
from thrifty.md.sampling_settings import SamplingSettings


def write_final_state(layout: ReplicaLayout, step: int, samples: int, histogram: np.ndarray, edges: np.ndarray,
                      positions: np.ndarray, velocities: np.ndarray, out_dir: Path) -> str:
    """density_profile.csv and final_state.npz; returns the state's sha256."""
    volume = layout.area_nm2 * (edges[1] - edges[0])
    density = histogram / max(samples, 1) / volume
    header = ",".join(["z_nm", *(f"{name}_per_nm3" for name in layout.species_names)])
    csv = header + "\n" + "".join(f"{0.5 * (a + b):.4f}," + ",".join(f"{d:.6f}" for d in row) + "\n"
                                  for a, b, row in zip(edges[:-1], edges[1:], density.T, strict=True))
    write_text_atomic(out_dir / "density_profile.csv", csv)
    buffer = io.BytesIO()
    np.savez(buffer, positions=positions, velocities=velocities, histogram=histogram, step=np.int64(step))
    write_bytes_atomic(out_dir / "final_state.npz", buffer.getvalue())
    return hashlib.sha256(positions.tobytes() + velocities.tobytes() + histogram.tobytes()).hexdigest()


def write_profiles(layout: ReplicaLayout, settings: SamplingSettings, stopped: str | None, p: prof.Profiles,
                   samples: int, out_dir: Path) -> dict:
    """profiles.csv and profiles.png; returns what the summary says about them."""
    prof.write_csv(out_dir / "profiles.csv", p, layout.species_names)
    title = f"{layout.system}: " + ", ".join(f"{k} {v}" for k, v in layout.parameters.items() if v is not None)
    prof.plot_png(out_dir / "profiles.png", p, layout.species_names, title)
    return {"stopped": stopped, "equilibration_steps": settings.equilibration_steps, "samples": samples,
            "complete_blocks": p.complete_blocks, "bin_width_nm": p.bin_width_nm,
            "max_error_molar": p.max_error_molar() if p.complete_blocks >= 2 else None,
            "tolerance_molar": settings.tolerance_molar, "relative_tolerance": settings.relative_tolerance,
            "symmetrised": True,  # between walls, each block averaged with its mirror image (md.engines.job_loop)
            "densities": prof.landmarks(p, layout.species_names, layout.radii_nm)}


def point(layout: ReplicaLayout) -> dict | None:
    """The nanoconfinement point (md.params.PARAMETERS) of a replica; None for another system."""
    if layout.system != "nanoconfinement":
        return None
    return {name: layout.parameters[name] for name in PARAMETERS}


def write_params(layout: ReplicaLayout, out_dir: Path) -> None:
    """params.json, for the nanoconfinement model: the point as md.runs reads it."""
    found = point(layout)
    if found is not None:
        write_text_atomic(out_dir / PARAMS_FILE, json.dumps(found, sort_keys=True) + "\n")
