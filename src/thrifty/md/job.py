"""A molecular-dynamics job that survives preemptions (`thrifty md run`).

It follows the checkpoint protocol of `thrifty run` (transient.protocol): resume from the newest
intact checkpoint, integrate in chunks, save when asked (SIGUSR1) or warned (SIGTERM, then exit
with PREEMPTED_EXIT). A checkpoint (md.checkpoint) holds OpenMM's own checkpoint plus the step
count and the accumulated density histogram, so on the Reference platform a run killed and resumed
any number of times ends bit for bit where an uninterrupted run ends; it is checked against this
run (system, platform, seed, --steps) before OpenMM loads it. Outputs: thermo.csv (energies and
temperature per chunk, md.thermo) as the run goes; at the end, atomically, density_profile.csv
(number density of each species along z, per nm^3, named for the system: particle_per_nm3 for lj,
cation_ and anion_per_nm3 for ions), final_state.npz and summary.json (with the final energies).
"""

import hashlib
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import openmm
from openmm import unit

from thrifty.io import write_bytes_atomic, write_text_atomic
from thrifty.md.checkpoint import MDCheckpoint, check_resume, pack, system_identity, unpack
from thrifty.md.systems import MDSystem, build, make_simulation
from thrifty.md.thermo import ThermoLog, degrees_of_freedom, thermo_row
from thrifty.transient.protocol import PREEMPTED_EXIT, JobCheckpoints

BINS = 60


@dataclass(frozen=True)
class MDSettings:
    system: str = "ions"
    steps: int = 5000
    chunk: int = 100  # steps between samples and possible checkpoints
    platform: str = "Reference"
    seed: int = 0


def _z_range(md: MDSystem, context: openmm.Context) -> tuple[float, float]:
    if md.confinement_nm is not None:
        return 1.5, 1.5 + md.confinement_nm
    box = context.getState().getPeriodicBoxVectors(asNumpy=True).value_in_unit(unit.nanometer)
    return 0.0, float(box[2][2])


def _sample(md: MDSystem, state: openmm.State, z_range: tuple[float, float]) -> np.ndarray:
    z = state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)[:, 2]
    if md.confinement_nm is None:  # periodic: wrap into the box
        z = np.mod(z - z_range[0], z_range[1] - z_range[0]) + z_range[0]
    return np.stack([np.histogram(z[md.species == s], bins=BINS, range=z_range)[0]
                     for s in range(len(md.species_names))]).astype(float)


def run_md(settings: MDSettings, out_dir: Path, checkpoints: JobCheckpoints) -> dict:
    """Run (or resume) the simulation and write its outputs; returns the summary."""
    try:
        return _run(settings, Path(out_dir), checkpoints)
    finally:  # however it ends (done, preempted, refused): the runner stops signalling us
        checkpoints.close()


def _run(settings: MDSettings, out_dir: Path, checkpoints: JobCheckpoints) -> dict:
    md = build(settings.system, settings.seed)
    identity = system_identity(md)
    payload = checkpoints.latest()
    saved = None if payload is None else unpack(payload, checkpoints.directory)
    if saved is not None:  # before OpenMM sees it, and before the thermo log is cut back to it
        check_resume(saved, identity, settings.platform, settings.seed, settings.steps, checkpoints.directory)
    context = make_simulation(md, settings.platform, settings.seed)
    z_range = _z_range(md, context)
    dof = degrees_of_freedom(md.system)
    with ThermoLog(out_dir / "thermo.csv", None if saved is None else saved.step) as thermo:
        if saved is None:
            openmm.LocalEnergyMinimizer.minimize(context, 10.0, 200)
            step, samples, histogram = 0, 0, np.zeros((len(md.species_names), BINS))
            thermo.append(thermo_row(context.getState(getEnergy=True), 0, md.timestep_ps, dof))
        else:
            context.loadCheckpoint(saved.openmm_state)
            step, samples, histogram = saved.step, saved.samples, saved.histogram
        integrator = context.getIntegrator()
        while step < settings.steps:
            n = min(settings.chunk, settings.steps - step)
            integrator.step(n)
            step += n
            state = context.getState(getPositions=True, getEnergy=True)
            histogram += _sample(md, state, z_range)
            samples += 1
            thermo.append(thermo_row(state, step, md.timestep_ps, dof))
            if checkpoints.due():
                thermo.sync()  # the log's rows reach the disk before the checkpoint that covers them
                checkpoints.save(pack(MDCheckpoint(identity, settings.platform, settings.seed, step, samples,
                                                   histogram, context.createCheckpoint())))
                if checkpoints.notice:
                    sys.exit(PREEMPTED_EXIT)
    return _write_outputs(md, context, settings, step, samples, histogram, z_range, out_dir)


def _write_outputs(md: MDSystem, context: openmm.Context, settings: MDSettings, step: int, samples: int,
                   histogram: np.ndarray, z_range: tuple[float, float], out_dir: Path) -> dict:
    state = context.getState(getPositions=True, getVelocities=True, getEnergy=True)
    positions = state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)
    velocities = state.getVelocities(asNumpy=True).value_in_unit(unit.nanometer / unit.picosecond)
    box = context.getState().getPeriodicBoxVectors(asNumpy=True).value_in_unit(unit.nanometer)
    edges = np.linspace(*z_range, BINS + 1)
    volume = float(box[0][0] * box[1][1]) * (edges[1] - edges[0])
    density = histogram / max(samples, 1) / volume
    header = ",".join(["z_nm", *(f"{name}_per_nm3" for name in md.species_names)])
    csv = header + "\n" + "".join(f"{0.5 * (a + b):.4f}," + ",".join(f"{d:.6f}" for d in row) + "\n"
                                  for a, b, row in zip(edges[:-1], edges[1:], density.T))
    write_text_atomic(out_dir / "density_profile.csv", csv)
    buffer = io.BytesIO()
    np.savez(buffer, positions=positions, velocities=velocities, histogram=histogram, step=np.int64(step))
    write_bytes_atomic(out_dir / "final_state.npz", buffer.getvalue())
    digest = hashlib.sha256(positions.tobytes() + velocities.tobytes() + histogram.tobytes()).hexdigest()
    thermo = thermo_row(state, step, md.timestep_ps, degrees_of_freedom(md.system))
    summary = {"system": settings.system, "particles": md.system.getNumParticles(), "steps": step,
               "platform": settings.platform,
               **{k: thermo[k] for k in ("potential_energy_kj_mol", "kinetic_energy_kj_mol", "temperature_k")},
               "state_sha256": digest}
    write_text_atomic(out_dir / "summary.json", json.dumps(summary, indent=2))
    return summary
