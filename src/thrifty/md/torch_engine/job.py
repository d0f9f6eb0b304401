"""`thrifty md run --system nanoconfinement --engine torch`: the MD job of md.job on the torch engine.

One replica (R = 1) of the torch engine (BAOAB Langevin, slab Ewald) runs the loop of md.job: sample
the ions' z every chunk after the equilibration into md.profiles' blocks, stop at --steps, or when
converged or at the cap, and write the same outputs (profiles.csv, profiles.png, density_profile.csv,
final_state.npz, thermo.csv and summary.json with the same keys, plus "engine" and "dtype"). It starts
from the model's lattice without an energy minimisation (md.torch_engine.sampling).

Checkpoints follow `thrifty run`'s protocol (transient.protocol: saved when asked, exit
PREEMPTED_EXIT after a notice) and hold positions, velocities, the torch.Generator's state, the step
and the profile blocks, with the run's identity (engine, dtype, device, system and parameters);
forces are recomputed from the positions on resume, which is what the step computes, so on the CPU a
resumed run ends bit for bit where an uninterrupted one ends. A checkpoint of another engine, dtype,
device, system, seed or sampling is refused in one line.
"""

import io
import json
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from thrifty.errors import ThriftyError
from thrifty.io import write_text_atomic
from thrifty.md import profiles as prof
from thrifty.md.checkpoint import FORMAT as OPENMM_FORMAT
from thrifty.md.checkpoint import START_OVER, TORCH_PREFIX, check_continuation
from thrifty.md.job import MDSettings, stop_reason, write_final_state, write_profiles
from thrifty.md.nanoconfinement import NanoconfinementModel, nanoconfinement_system
from thrifty.md.systems import MDSystem
from thrifty.md.thermo import ThermoLog
from thrifty.md.torch_engine import integrator as it
from thrifty.md.torch_engine.ewald import prepare_ewald
from thrifty.md.torch_engine.replicas import Replicas, replicas
from thrifty.transient.protocol import PREEMPTED_EXIT, JobCheckpoints

FORMAT = TORCH_PREFIX + "1"
DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class TorchCheckpoint:
    identity: dict  # identity() of the run that wrote it
    seed: int
    step: int
    samples: int
    histogram: np.ndarray  # (blocks, species, bins) counts, md.profiles
    positions_nm: np.ndarray  # (N, 3) in the run's dtype
    velocities_nm_ps: np.ndarray  # (N, 3)
    rng_state: np.ndarray  # torch.Generator.get_state(), uint8
    sampling: dict  # MDSettings.sampling of the run that wrote it


def identity(md: MDSystem, dtype: str, device: str) -> dict:
    return {"engine": "torch", "dtype": dtype, "device": torch.device(device).type, "system": md.name,
            "parameters": md.parameters, "particles": len(md.species)}


def pack(c: TorchCheckpoint) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, format=FORMAT, identity=json.dumps(c.identity), seed=np.int64(c.seed), step=np.int64(c.step),
             samples=np.int64(c.samples), histogram=c.histogram, positions=c.positions_nm,
             velocities=c.velocities_nm_ps, rng_state=c.rng_state, sampling=json.dumps(c.sampling))
    return buffer.getvalue()


def unpack(payload: bytes, where: Path) -> TorchCheckpoint:
    """The checkpoint in `payload`; one of the OpenMM engine or of anything else is refused in one line."""
    try:
        with np.load(io.BytesIO(payload)) as data:
            written = str(data["format"]) if "format" in data.files else None
            if written == OPENMM_FORMAT:
                raise ThriftyError(f"the checkpoint in {where} was written by the OpenMM engine (--engine openmm); "
                                   f"this run is --engine torch: give --engine openmm, or {START_OVER}")
            if written != FORMAT:
                raise ValueError
            return TorchCheckpoint(json.loads(str(data["identity"])), int(data["seed"]), int(data["step"]),
                                   int(data["samples"]), data["histogram"].copy(), data["positions"].copy(),
                                   data["velocities"].copy(), data["rng_state"].copy(),
                                   json.loads(str(data["sampling"])))
    except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile):
        raise ThriftyError(f"the newest checkpoint in {where} was not written by this version of "
                           f"`thrifty md run --engine torch` ({FORMAT}): {START_OVER}") from None


def check_resume(saved: TorchCheckpoint, this: dict, seed: int, steps: int, sampling: dict, where: Path) -> None:
    """Refuse, in one line, a resume that would not continue the run asked for."""
    for key, option in (("engine", "--engine"), ("dtype", "--dtype"), ("device", "--device")):
        if saved.identity.get(key) != this[key]:
            raise ThriftyError(f"the checkpoint in {where} is for {option} {saved.identity.get(key)}, this run asked "
                               f"for {option} {this[key]}: give {option} {saved.identity.get(key)}, or {START_OVER}")
    if saved.identity != this:
        theirs = ", ".join(f"{k}={v}" for k, v in saved.identity["parameters"].items())
        raise ThriftyError(f"the checkpoint in {where} is for system {saved.identity['system']} "
                           f"({saved.identity['particles']} particles, {theirs}), this run is {this['system']} "
                           f"({this['particles']} particles): resume with the same parameters, or {START_OVER}")
    check_continuation(saved.seed, seed, saved.sampling, sampling, saved.step, steps, where)


def thermo_rows(batch: Replicas, state: it.State, step: int) -> list[dict[str, float]]:
    """One thermo.csv row per replica (temperature: integrator.temperature_k, 3 N degrees of freedom)."""
    return [{"step": step, "time_ps": step * it.TIMESTEP_PS, "potential_energy_kj_mol": u, "kinetic_energy_kj_mol": k,
             "temperature_k": t}
            for u, k, t in zip(state.potential_kj_mol.tolist(), it.kinetic_kj_mol(batch, state).tolist(),
                               it.temperature_k(batch, state).tolist())]


def run_torch_md(settings: MDSettings, out_dir: Path, checkpoints: JobCheckpoints, dtype: str = "float64",
                 device: str = "cpu") -> dict:
    """Run (or resume) the nanoconfinement model on the torch engine and write md.job's outputs."""
    try:
        return _run(settings, Path(out_dir), checkpoints, dtype, device)
    finally:
        checkpoints.close()


def _run(settings: MDSettings, out_dir: Path, checkpoints: JobCheckpoints, dtype: str, device: str) -> dict:
    if settings.system != "nanoconfinement":
        raise ThriftyError(f"the torch engine runs --system nanoconfinement only, not {settings.system}")
    if dtype not in DTYPES:
        raise ThriftyError(f"unknown --dtype {dtype!r}; choose {', '.join(DTYPES)}")
    model = settings.model or NanoconfinementModel()
    md = nanoconfinement_system(model, settings.seed)  # names, radii, slit and start lattice
    this = identity(md, dtype, device)
    payload = checkpoints.latest()
    saved = None if payload is None else unpack(payload, checkpoints.directory)
    if saved is not None:
        check_resume(saved, this, settings.seed, settings.last_step, settings.sampling, checkpoints.directory)
    batch, positions = replicas([model], settings.seed, DTYPES[dtype], device)
    setup = prepare_ewald(batch)
    generator = torch.Generator(device=device).manual_seed(settings.seed)
    edges = prof.edges_nm(md.slit_nm, True)
    area = model.side_nm ** 2
    per_block = settings.samples_per_block
    with ThermoLog(out_dir / "thermo.csv", None if saved is None else saved.step) as thermo:
        if saved is None:
            state = it.start(batch, setup, positions, generator)
            step, samples, blocks = 0, 0, np.zeros((0, len(md.species_names), len(edges) - 1))
            thermo.append(thermo_rows(batch, state, 0)[0])
        else:
            to = dict(dtype=DTYPES[dtype], device=device)
            state = it.restore(batch, setup, torch.as_tensor(saved.positions_nm, **to)[None],
                               torch.as_tensor(saved.velocities_nm_ps, **to)[None])
            generator.set_state(torch.from_numpy(saved.rng_state))
            step, samples, blocks = saved.step, saved.samples, saved.histogram
        checkpoints.working()  # restored: under `thrifty run`, the restart's cost ends here
        while (stopped := stop_reason(settings, step, prof.profiles(blocks, samples, per_block, edges, area))) is None:
            n = min(settings.chunk, settings.last_step - step)
            for _ in range(n):
                state = it.step(batch, setup, state, generator=generator)
            step += n
            if step > settings.equilibration_steps:
                z = state.positions_nm[0, :, 2].double().cpu().numpy()
                blocks = prof.add_sample(blocks, prof.histogram(z, md.species, len(md.species_names), edges),
                                         samples, per_block)
                samples += 1
            thermo.append(thermo_rows(batch, state, step)[0])
            if checkpoints.due():
                began = time.monotonic()  # the checkpoint's cost, reported to the runner
                thermo.sync()
                checkpoints.save(pack(TorchCheckpoint(
                    this, settings.seed, step, samples, blocks, state.positions_nm[0].cpu().numpy(),
                    state.velocities_nm_ps[0].cpu().numpy(), generator.get_state().numpy(), settings.sampling)),
                    began_s=began)
                if checkpoints.notice:
                    sys.exit(PREEMPTED_EXIT)
    final = thermo_rows(batch, state, step)[0]
    digest = write_final_state(md, step, samples, blocks.sum(axis=0), edges, area,
                               state.positions_nm[0].double().cpu().numpy(),
                               state.velocities_nm_ps[0].double().cpu().numpy(), out_dir)
    summary = {"system": settings.system, "particles": len(md.species), "steps": step,
               "platform": f"torch-{this['device']}",
               **{k: final[k] for k in ("potential_energy_kj_mol", "kinetic_energy_kj_mol", "temperature_k")},
               "state_sha256": digest, "engine": "torch", "dtype": dtype}
    summary |= write_profiles(md, settings, stopped, prof.profiles(blocks, samples, per_block, edges, area),
                              samples, out_dir)
    write_text_atomic(out_dir / "summary.json", json.dumps(summary, indent=2))
    return summary
