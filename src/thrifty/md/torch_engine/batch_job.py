"""R campaign points as one batched torch job (`thrifty md sweep --engine torch --replicas R`).

The replicas of md.torch_engine.replicas advance together (one generator, one BAOAB step for all,
as md.torch_engine.sampling.sample_profiles: with the same seed, chunk and sampling the profiles are
that function's); each replica samples its ions' z into md.profiles' blocks every chunk after the
equilibration. The batch stops when every replica's profiles have converged (every block-averaged
error bar at or below the tolerance) or at the cap; a replica that converged early keeps sampling
until then (its error bars only shrink on average), and its summary says "converged" if its final
profiles are.

Each point gets its own run folder with the outputs of `thrifty md run --engine torch`
(md.torch_engine.job): params.json, profiles.csv, profiles.png, density_profile.csv, thermo.csv,
final_state.npz and summary.json. The batch's checkpoint (transient.protocol, saved when the
campaign's DP schedule says so) holds every replica's positions, velocities and profile blocks, the
generator's state and the step, with the batch's identity; forces are recomputed from positions on
resume, so on the CPU in float64 a resumed batch ends bit for bit where an uninterrupted one ends.
"""

import contextlib
import io
import json
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from thrifty.errors import ThriftyError
from thrifty.io import write_text_atomic
from thrifty.md import profiles as prof
from thrifty.md.checkpoint import START_OVER, TORCH_PREFIX
from thrifty.md.job import MDSettings, stop_reason, write_final_state, write_profiles
from thrifty.md.nanoconfinement import nanoconfinement_system
from thrifty.md.nanoconfinement_run import model_at, write_params
from thrifty.md.thermo import ThermoLog
from thrifty.md.torch_engine import integrator as it
from thrifty.md.torch_engine.ewald import prepare_ewald
from thrifty.md.torch_engine.job import DTYPES, identity, thermo_rows
from thrifty.md.torch_engine.replicas import replicas
from thrifty.transient.protocol import JobCheckpoints

FORMAT = TORCH_PREFIX + "batch-1"


@dataclass(frozen=True)
class TorchBatchRun:
    """Settings every batch of a campaign shares (the points vary); defaults as md.nanoconfinement_run."""

    chunk: int = 100
    equilibration_steps: int = 20_000
    samples_per_block: int = 10
    tolerance_molar: float = 0.02
    cap_steps: int = 200_000
    box_nm: float | None = None
    cutoff_nm: float = 2.5
    seed: int = 0
    dtype: str = "float64"
    device: str = "cpu"

    def run_batch(self, points: list[dict], work_dirs: list[Path], checkpoints: JobCheckpoints) -> list[dict]:
        """Run (or resume) the points as one batch; each point's result, as md.nanoconfinement_run's."""
        try:
            return [{**summary, "converged": summary["stopped"] == "converged", "settings": asdict(self)}
                    for summary in _run(self, points, [Path(w) for w in work_dirs], checkpoints)]
        finally:
            checkpoints.close()


def _pack(this: list[dict], step: int, samples: int, blocks: list[np.ndarray], state: it.State,
          generator: torch.Generator) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, format=FORMAT, identity=json.dumps(this), step=np.int64(step), samples=np.int64(samples),
             positions=state.positions_nm.cpu().numpy(), velocities=state.velocities_nm_ps.cpu().numpy(),
             rng_state=generator.get_state().numpy(), **{f"blocks_{i}": b for i, b in enumerate(blocks)})
    return buffer.getvalue()


def _unpack(payload: bytes, this: list[dict], where: Path) -> tuple[int, int, list[np.ndarray], dict]:
    """(step, samples, blocks, arrays) of a checkpoint of this very batch; anything else in one line."""
    try:
        with np.load(io.BytesIO(payload)) as data:
            if str(data["format"]) != FORMAT:
                raise ValueError
            saved = json.loads(str(data["identity"]))
            arrays = {k: data[k].copy() for k in ("positions", "velocities", "rng_state")}
            blocks = [data[f"blocks_{i}"].copy() for i in range(len(saved))]
            step, samples = int(data["step"]), int(data["samples"])
    except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile):
        raise ThriftyError(f"the newest checkpoint in {where} is not a torch batch checkpoint ({FORMAT}): "
                           f"{START_OVER}") from None
    if saved != this:
        raise ThriftyError(f"the checkpoint in {where} is for another batch (points, settings, dtype or device): "
                           f"{START_OVER}")
    return step, samples, blocks, arrays


def _run(run: TorchBatchRun, points: list[dict], work_dirs: list[Path], checkpoints: JobCheckpoints) -> list[dict]:
    if run.dtype not in DTYPES:
        raise ThriftyError(f"unknown dtype {run.dtype!r}; choose {', '.join(DTYPES)}")
    models = [model_at(p, run.box_nm, run.cutoff_nm) for p in points]
    settings = [MDSettings(system="nanoconfinement", steps=None, chunk=run.chunk, seed=run.seed, model=m,
                           equilibration_steps=run.equilibration_steps, samples_per_block=run.samples_per_block,
                           tolerance_molar=run.tolerance_molar, cap_steps=run.cap_steps) for m in models]
    systems = [nanoconfinement_system(m, run.seed) for m in models]
    this = [identity(md, run.dtype, run.device) | {"seed": run.seed, "sampling": s.sampling}
            for md, s in zip(systems, settings)]
    for work, model in zip(work_dirs, models):
        work.mkdir(parents=True, exist_ok=True)
        write_params(model, work)
    payload = checkpoints.latest()
    saved = None if payload is None else _unpack(payload, this, checkpoints.directory)
    batch, positions = replicas(models, run.seed, DTYPES[run.dtype], run.device)
    setup = prepare_ewald(batch)
    generator = torch.Generator(device=run.device).manual_seed(run.seed)
    counts = [len(md.species) for md in systems]
    edges = [prof.edges_nm(md.slit_nm, True) for md in systems]
    areas = [m.side_nm ** 2 for m in models]
    per_block = run.samples_per_block

    def profiles(blocks: list[np.ndarray], samples: int) -> list[prof.Profiles]:
        return [prof.profiles(b, samples, per_block, e, a) for b, e, a in zip(blocks, edges, areas)]

    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(ThermoLog(w / "thermo.csv", None if saved is None else saved[0]))
                for w in work_dirs]
        if saved is None:
            state = it.start(batch, setup, positions, generator)
            step, samples = 0, 0
            blocks = [np.zeros((0, len(md.species_names), len(e) - 1)) for md, e in zip(systems, edges)]
            for log, row in zip(logs, thermo_rows(batch, state, 0)):
                log.append(row)
        else:
            step, samples, blocks, arrays = saved
            to = dict(dtype=DTYPES[run.dtype], device=run.device)
            state = it.restore(batch, setup, torch.as_tensor(arrays["positions"], **to),
                               torch.as_tensor(arrays["velocities"], **to))
            generator.set_state(torch.from_numpy(arrays["rng_state"]))
        while any(stop_reason(s, step, p) is None for s, p in zip(settings, profiles(blocks, samples))):
            n = min(run.chunk, run.cap_steps - step)
            for _ in range(n):
                state = it.step(batch, setup, state, generator=generator)
            step += n
            if step > run.equilibration_steps:
                z = state.positions_nm[..., 2].double().cpu().numpy()
                blocks = [prof.add_sample(b, prof.histogram(z[i, :k], md.species, len(md.species_names), e),
                                          samples, per_block)
                          for i, (b, k, md, e) in enumerate(zip(blocks, counts, systems, edges))]
                samples += 1
            for log, row in zip(logs, thermo_rows(batch, state, step)):
                log.append(row)
            if checkpoints.due():
                for log in logs:
                    log.sync()
                checkpoints.save(_pack(this, step, samples, blocks, state, generator))
    final = thermo_rows(batch, state, step)
    summaries = []
    for i, (md, s, p, work) in enumerate(zip(systems, settings, profiles(blocks, samples), work_dirs)):
        k = counts[i]
        digest = write_final_state(md, step, samples, blocks[i].sum(axis=0), edges[i], areas[i],
                                   state.positions_nm[i, :k].double().cpu().numpy(),
                                   state.velocities_nm_ps[i, :k].double().cpu().numpy(), work)
        summary = {"system": "nanoconfinement", "particles": k, "steps": step, "platform": f"torch-{this[i]['device']}",
                   **{key: final[i][key] for key in ("potential_energy_kj_mol", "kinetic_energy_kj_mol",
                                                     "temperature_k")},
                   "state_sha256": digest, "engine": "torch", "dtype": run.dtype, "replicas": len(points)}
        # a replica converged at the end is "converged", whatever stopped the batch
        stopped = "converged" if prof.converged(p, run.tolerance_molar) else "cap"
        summary |= write_profiles(md, s, stopped, p, samples, work)
        write_text_atomic(work / "summary.json", json.dumps(summary, indent=2))
        summaries.append(summary)
    return summaries
