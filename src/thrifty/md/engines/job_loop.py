# SPDX-License-Identifier: MIT
"""The one MD job loop: any engine (md.engines.protocol), one set of sampling settings
(md.sampling_settings), checkpoints that survive preemptions, the same outputs.

It follows the checkpoint protocol of `thrifty run` (transient.protocol): resume from the newest
intact checkpoint (checked against this run before the engine loads it: seed, sampling, a target
not behind it; the engine checks its own identity), integrate in chunks, sample every chunk past
the equilibration, save when asked (SIGUSR1, or the campaign's schedule) or warned (SIGTERM, then
exit with PREEMPTED_EXIT). The run stops when every replica's settings say so (at `steps`, or
when its profiles converged, or at the cap); a replica that converged early keeps sampling until
then (its error bars only shrink on average), and reports why it would stop at the end. thermo.csv
grows as the run goes (md.thermo); at the end each replica's folder gets md.engines.outputs' files
and summary.json: the system, the full parameters, the seed, the engine, the sampling settings,
steps, final energies and the profiles' summary. On the OpenMM Reference platform and the torch
engine on the CPU in float64, a run killed and resumed any number of times ends bit for bit where
an uninterrupted run ends.
"""

import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from thrifty.io import write_text_atomic
from thrifty.md import profiles as prof
from thrifty.md.engines.outputs import write_final_state, write_params, write_profiles
from thrifty.md.engines.protocol import Engine, Progress, ReplicaLayout
from thrifty.md.engines.resume import check_continuation, check_profile_bins
from thrifty.md.runs import SUMMARY_FILE
from thrifty.md.sampling_settings import SamplingSettings
from thrifty.md.thermo import ThermoLog
from thrifty.transient.protocol import PREEMPTED_EXIT, JobCheckpoints

ENERGY_KEYS = ("potential_energy_kj_mol", "kinetic_energy_kj_mol", "temperature_k")

log = logging.getLogger(__name__)


class Preempted(SystemExit):
    """The run checkpointed on a notice and stops with exit code PREEMPTED_EXIT (the runner's
    "restart me"), as sys.exit would; `step` is where its checkpoint stands (md run --json says it)."""

    def __init__(self, step: int) -> None:
        super().__init__(PREEMPTED_EXIT)
        self.step = step


def run_job(engine: Engine, settings: SamplingSettings, out_dirs: list[Path], checkpoints: JobCheckpoints,
            on_chunk: Callable[[int], None] | None = None) -> list[dict]:
    """Run (or resume) the engine's replicas, one output folder each; returns their summaries.
    `on_chunk(step)` is called after the start and every chunk (progress)."""
    try:
        return _run(engine, settings, [Path(d) for d in out_dirs], checkpoints, on_chunk or (lambda step: None))
    finally:  # however it ends (done, preempted, refused): the runner stops signalling us
        checkpoints.close()


def run_one(engine: Engine, settings: SamplingSettings, out_dir: Path, checkpoints: JobCheckpoints,
            on_chunk: Callable[[int], None] | None = None) -> dict:
    """A run of one replica (`thrifty md run`): its summary."""
    return run_job(engine, settings, [out_dir], checkpoints, on_chunk)[0]


def _sample(layout: ReplicaLayout, z: np.ndarray, edges: np.ndarray) -> np.ndarray:
    if not layout.walls:  # periodic: wrap into the box
        z = np.mod(z - edges[0], edges[-1] - edges[0]) + edges[0]
    return prof.histogram(z, layout.species, len(layout.species_names), edges)


def _run(engine: Engine, settings: SamplingSettings, out_dirs: list[Path], checkpoints: JobCheckpoints,
         on_chunk: Callable[[int], None]) -> list[dict]:
    layouts = engine.layouts
    if len(out_dirs) != len(layouts):
        raise ValueError(f"{len(layouts)} replicas need as many output folders, got {len(out_dirs)}")
    payload = checkpoints.latest()
    saved = None if payload is None else engine.read(payload, checkpoints.directory)
    if saved is not None:  # before the engine loads it, and before the thermo logs are cut back to it
        check_continuation(saved.seed, engine.seed, saved.sampling, settings.sampling, saved.progress.step,
                           settings.last_step, checkpoints.directory)
    edges = [prof.edges_nm(layout.z_range_nm, layout.walls) for layout in layouts]
    if saved is not None:
        check_profile_bins(saved.progress.blocks, [len(layout.species_names) for layout in layouts],
                           [len(e) - 1 for e in edges], checkpoints.directory)

    def profiles(progress: Progress) -> list[prof.Profiles]:
        # between two identical walls each block is averaged with its mirror image (md.profiles)
        return [prof.profiles(b, progress.samples, settings.samples_per_block, e, layout.area_nm2, symmetric=layout.walls)
                for b, e, layout in zip(progress.blocks, edges, layouts, strict=True)]

    def going_on(progress: Progress) -> bool:
        return any(settings.stop_reason(progress.step, p) is None for p in profiles(progress))

    if saved is None:
        engine.start()
        progress = Progress(0, 0, [np.zeros((0, len(layout.species_names), len(e) - 1))
                                   for layout, e in zip(layouts, edges, strict=True)])
        log.info("started %d replica(s) of %s, at most %d steps", len(layouts), layouts[0].system, settings.last_step)
    else:
        engine.restore(saved)
        progress = saved.progress
        log.info("resumed %d replica(s) at step %d (%d samples) from %s", len(layouts), progress.step,
                 progress.samples, checkpoints.directory)
    for out in out_dirs:
        out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        thermo = [stack.enter_context(ThermoLog(out / "thermo.csv", None if saved is None else progress.step))
                  for out in out_dirs]
        if saved is None:
            for table, row in zip(thermo, engine.energies(0), strict=True):
                table.append(row)
        checkpoints.working()  # restored: under `thrifty run`, the restart's cost ends here
        on_chunk(progress.step)
        while going_on(progress):
            n = min(settings.chunk, settings.last_step - progress.step)
            engine.advance(n)
            step, samples, blocks = progress.step + n, progress.samples, progress.blocks
            if step > settings.equilibration_steps:
                blocks = [prof.add_sample(b, _sample(layout, z, e), samples, settings.samples_per_block)
                          for b, layout, z, e in zip(blocks, layouts, engine.positions_z_nm(), edges, strict=True)]
                samples += 1
            progress = Progress(step, samples, blocks)
            for table, row in zip(thermo, engine.energies(step), strict=True):
                table.append(row)
            on_chunk(step)
            if checkpoints.due():
                began = time.monotonic()  # the checkpoint's cost, reported to the runner
                for table in thermo:
                    table.sync()  # the logs' rows reach the disk before the checkpoint that covers them
                checkpoints.save(engine.payload(progress, settings.sampling), began_s=began)
                log.debug("checkpoint at step %d (%d samples)", step, samples)
                if checkpoints.notice and going_on(progress):  # a run at its end finishes (a pass: it exited 75)
                    # a warning, so that it shows without -v: the run stopped, and says how it goes on
                    log.warning("stopped (a notice or Ctrl-C): checkpointed at step %d; the same command resumes "
                                "from it (exit %d)", step, PREEMPTED_EXIT)
                    raise Preempted(step)
    return [_finish(engine, settings, layout, progress, i, p, e, energies, state, out)
            for i, (layout, p, e, energies, state, out) in enumerate(zip(
                layouts, profiles(progress), edges, engine.energies(progress.step), engine.final_state(), out_dirs,
                strict=True))]


def _finish(engine: Engine, settings: SamplingSettings, layout: ReplicaLayout, progress: Progress, replica: int,
            p: prof.Profiles, edges: np.ndarray, energies: dict[str, float], state: tuple[np.ndarray, np.ndarray],
            out: Path) -> dict:
    positions, velocities = state
    digest = write_final_state(layout, progress.step, progress.samples, progress.blocks[replica].sum(axis=0), edges,
                               positions, velocities, out)
    summary = {"system": layout.system, "particles": layout.particles, "steps": progress.step,
               "parameters": layout.record if layout.record is not None else layout.parameters, "seed": engine.seed,
               **engine.describe(), "sampling": asdict(settings),
               **{k: energies[k] for k in ENERGY_KEYS}, "state_sha256": digest}
    write_params(layout, out)  # before profiles.csv: a folder with profiles is a complete run (md.runs)
    if layout.walls:
        summary |= write_profiles(layout, settings, settings.stop_reason(progress.step, p), p, progress.samples, out)
    write_text_atomic(out / SUMMARY_FILE, json.dumps(summary, indent=2))
    log.info("replica %d finished at step %d (%d samples): %s", replica, progress.step, progress.samples, out)
    return summary
