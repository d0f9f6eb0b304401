"""A molecular-dynamics job that survives preemptions (`thrifty md run`).

It follows the checkpoint protocol of `thrifty run` (transient.protocol): resume from the newest
intact checkpoint, integrate in chunks, save when asked (SIGUSR1) or warned (SIGTERM, then exit
with PREEMPTED_EXIT). A checkpoint (md.checkpoint) holds OpenMM's own checkpoint plus the step
count and the accumulated density histogram, so on the Reference platform a run killed and resumed
any number of times ends bit for bit where an uninterrupted run ends; it is checked against this
run (system, platform, seed, --steps, profile sampling) before OpenMM loads it. Outputs:
thermo.csv (energies and temperature per chunk, md.thermo) as the run goes; at the end,
atomically, density_profile.csv (number density of each species along z, per nm^3, named for the
system: particle_per_nm3 for lj, cation_ and anion_per_nm3 for ions), final_state.npz and
summary.json (with the final energies).

The nanoconfinement system also writes profiles.csv (mol/L with block-average error bars,
md.profiles), profiles.png and its contact, peak and mid-plane densities in the summary. Without
--steps it equilibrates, then samples until every error bar is within the tolerance or the cap.
"""

import hashlib
import io
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import openmm
from openmm import unit

from thrifty.io import write_bytes_atomic, write_text_atomic
from thrifty.md import profiles as prof
from thrifty.md.checkpoint import MDCheckpoint, check_resume, pack, system_identity, unpack
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.systems import MDSystem, build, make_simulation
from thrifty.md.thermo import ThermoLog, degrees_of_freedom, thermo_row
from thrifty.transient.protocol import PREEMPTED_EXIT, JobCheckpoints


@dataclass(frozen=True)
class MDSettings:
    system: str = "ions"
    steps: int | None = 5000  # None: sample until the profiles converge, or cap_steps
    chunk: int = 100  # steps between samples and possible checkpoints
    platform: str = "Reference"
    seed: int = 0
    model: NanoconfinementModel | None = None  # the nanoconfinement system's parameters (None: defaults)
    equilibration_steps: int = 0  # the profiles sample chunks that end after this step
    samples_per_block: int = 10  # samples (chunks) per block of the block averages
    tolerance_molar: float = 0.02  # converged: every error bar at or below this
    cap_steps: int = 200_000  # without --steps, stop here if not converged

    @property
    def sampling(self) -> dict:
        """What a resume must share with the run it continues for its profiles to be that run's."""
        return {"equilibration_steps": self.equilibration_steps, "samples_per_block": self.samples_per_block}

    @property
    def last_step(self) -> int:
        return self.steps if self.steps is not None else self.cap_steps


def _z_range(md: MDSystem, context: openmm.Context) -> tuple[float, float]:
    if md.slit_nm is not None:
        return md.slit_nm
    box = context.getState().getPeriodicBoxVectors(asNumpy=True).value_in_unit(unit.nanometer)
    return 0.0, float(box[2][2])


def _sample(md: MDSystem, state: openmm.State, edges: np.ndarray) -> np.ndarray:
    z = state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)[:, 2]
    if md.slit_nm is None:  # periodic: wrap into the box
        z = np.mod(z - edges[0], edges[-1] - edges[0]) + edges[0]
    return prof.histogram(z, md.species, len(md.species_names), edges)


def _area_nm2(context: openmm.Context) -> float:
    box = context.getState().getPeriodicBoxVectors(asNumpy=True).value_in_unit(unit.nanometer)
    return float(box[0][0] * box[1][1])


def stop_reason(settings: MDSettings, step: int, p: prof.Profiles) -> str | None:
    """Why the run ends at `step` ("steps", "converged" or "cap"), or None to go on."""
    if settings.steps is not None:
        return "steps" if step >= settings.steps else None
    if prof.converged(p, settings.tolerance_molar):
        return "converged"
    return "cap" if step >= settings.cap_steps else None


def run_md(settings: MDSettings, out_dir: Path, checkpoints: JobCheckpoints) -> dict:
    """Run (or resume) the simulation and write its outputs; returns the summary."""
    try:
        return _run(settings, Path(out_dir), checkpoints)
    finally:  # however it ends (done, preempted, refused): the runner stops signalling us
        checkpoints.close()


def _run(settings: MDSettings, out_dir: Path, checkpoints: JobCheckpoints) -> dict:
    md = build(settings.system, settings.seed, settings.model)
    identity = system_identity(md)
    payload = checkpoints.latest()
    saved = None if payload is None else unpack(payload, checkpoints.directory)
    if saved is not None:  # before OpenMM sees it, and before the thermo log is cut back to it
        check_resume(saved, identity, settings.platform, settings.seed, settings.last_step, settings.sampling,
                     checkpoints.directory)
    context = make_simulation(md, settings.platform, settings.seed)
    edges = prof.edges_nm(_z_range(md, context), md.slit_nm is not None)
    area = _area_nm2(context)
    per_block = settings.samples_per_block
    dof = degrees_of_freedom(md.system)
    with ThermoLog(out_dir / "thermo.csv", None if saved is None else saved.step) as thermo:
        if saved is None:
            openmm.LocalEnergyMinimizer.minimize(context, 10.0, 200)
            step, samples, blocks = 0, 0, np.zeros((0, len(md.species_names), len(edges) - 1))
            thermo.append(thermo_row(context.getState(getEnergy=True), 0, md.timestep_ps, dof))
        else:
            context.loadCheckpoint(saved.openmm_state)
            step, samples, blocks = saved.step, saved.samples, saved.histogram
        integrator = context.getIntegrator()
        checkpoints.working()  # restored: under `thrifty run`, the restart's cost ends here
        while (stopped := stop_reason(settings, step, prof.profiles(blocks, samples, per_block, edges, area))) is None:
            n = min(settings.chunk, settings.last_step - step)
            integrator.step(n)
            step += n
            state = context.getState(getPositions=True, getEnergy=True)
            if step > settings.equilibration_steps:
                blocks = prof.add_sample(blocks, _sample(md, state, edges), samples, per_block)
                samples += 1
            thermo.append(thermo_row(state, step, md.timestep_ps, dof))
            if checkpoints.due():
                began = time.monotonic()  # the checkpoint's cost, reported to the runner
                thermo.sync()  # the log's rows reach the disk before the checkpoint that covers them
                checkpoints.save(pack(MDCheckpoint(identity, settings.platform, settings.seed, step, samples,
                                                   blocks, context.createCheckpoint(), settings.sampling)),
                                 began_s=began)
                if checkpoints.notice:
                    sys.exit(PREEMPTED_EXIT)
    summary = _write_outputs(md, context, settings, step, samples, blocks.sum(axis=0), edges, out_dir)
    if md.slit_nm is not None:
        summary |= write_profiles(md, settings, stopped, prof.profiles(blocks, samples, per_block, edges, area),
                                   samples, out_dir)
    write_text_atomic(out_dir / "summary.json", json.dumps(summary, indent=2))
    return summary


def write_profiles(md: MDSystem, settings: MDSettings, stopped: str, p: prof.Profiles, samples: int,
                    out_dir: Path) -> dict:
    """profiles.csv and profiles.png; returns what the summary says about them."""
    prof.write_csv(out_dir / "profiles.csv", p, md.species_names)
    title = f"{md.name}: " + ", ".join(f"{k} {v}" for k, v in md.parameters.items() if v is not None)
    prof.plot_png(out_dir / "profiles.png", p, md.species_names, title)
    return {"stopped": stopped, "equilibration_steps": settings.equilibration_steps, "samples": samples,
            "complete_blocks": p.complete_blocks, "bin_width_nm": p.bin_width_nm,
            "max_error_molar": p.max_error_molar() if p.complete_blocks >= 2 else None,
            "tolerance_molar": settings.tolerance_molar,
            "densities": prof.landmarks(p, md.species_names, md.radii_nm)}


def _write_outputs(md: MDSystem, context: openmm.Context, settings: MDSettings, step: int, samples: int,
                   histogram: np.ndarray, edges: np.ndarray, out_dir: Path) -> dict:
    state = context.getState(getPositions=True, getVelocities=True, getEnergy=True)
    positions = state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)
    velocities = state.getVelocities(asNumpy=True).value_in_unit(unit.nanometer / unit.picosecond)
    digest = write_final_state(md, step, samples, histogram, edges, _area_nm2(context), positions, velocities,
                               out_dir)
    thermo = thermo_row(state, step, md.timestep_ps, degrees_of_freedom(md.system))
    summary = {"system": settings.system, "particles": md.system.getNumParticles(), "steps": step,
               "platform": settings.platform,
               **{k: thermo[k] for k in ("potential_energy_kj_mol", "kinetic_energy_kj_mol", "temperature_k")},
               "state_sha256": digest}
    return summary


def write_final_state(md: MDSystem, step: int, samples: int, histogram: np.ndarray, edges: np.ndarray,
                      area_nm2: float, positions: np.ndarray, velocities: np.ndarray, out_dir: Path) -> str:
    """density_profile.csv and final_state.npz (positions nm, velocities nm/ps); returns the state's sha256."""
    volume = area_nm2 * (edges[1] - edges[0])
    density = histogram / max(samples, 1) / volume
    header = ",".join(["z_nm", *(f"{name}_per_nm3" for name in md.species_names)])
    csv = header + "\n" + "".join(f"{0.5 * (a + b):.4f}," + ",".join(f"{d:.6f}" for d in row) + "\n"
                                  for a, b, row in zip(edges[:-1], edges[1:], density.T))
    write_text_atomic(out_dir / "density_profile.csv", csv)
    buffer = io.BytesIO()
    np.savez(buffer, positions=positions, velocities=velocities, histogram=histogram, step=np.int64(step))
    write_bytes_atomic(out_dir / "final_state.npz", buffer.getvalue())
    return hashlib.sha256(positions.tobytes() + velocities.tobytes() + histogram.tobytes()).hexdigest()
