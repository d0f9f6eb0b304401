# SPDX-License-Identifier: MIT
"""Build the replayable MD data set of bench_md_replay.py once: real nanoconfinement runs (OpenMM
CPU, one thread each, md.campaign.nanoconfinement_runs.NanoconfinementRuns: the path `thrifty md sweep` and
the campaign take) at random points of bench_md_campaign_real.py's box with its settings (4 nm box,
cutoff 1.5 nm, 1000 steps of equilibration, 5 samples a block, every error bar <= 0.15 M or the
20,000-step cap).

    python benchmarks/build_md_replay.py run --worker 0 --workers 2 [--runs 180] [--root DIR]
    python benchmarks/build_md_replay.py extract [--root DIR]

`run` simulates the points whose index is `worker` modulo `workers` (start one process per
worker), each into DIR/runNNNN; a run is written into DIR/runNNNN.partial and renamed when it has
finished, so a killed driver started again skips the finished runs and redoes the one it was in.
The points are seeded uniform samples of the box (`points`): any finished prefix is a uniform
random sample too. `extract` reads the finished runs and writes benchmarks/data/md_replay/
runs.npz (parameters, profiles, error bars, steps, blocks, convergence; read by
thrifty.md.surrogate.replay.ReplaySet).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("OPENMM_CPU_THREADS", "1")

from thrifty.md.campaign.checkpoint_schedule import ScheduledCheckpoints
from thrifty.md.campaign.nanoconfinement_runs import NanoconfinementRuns
from thrifty.md.params import PARAMETERS, ParameterBox
from thrifty.md.runs import read_run
from thrifty.md.sampling_settings import SamplingSettings

BOX = ParameterBox((2.5, 1, -1, 0.3, 0.474, 0.627), (4.0, 3, -1, 0.9, 0.474, 0.627))
SAMPLING = SamplingSettings(chunk=100, equilibration_steps=1000, samples_per_block=5, tolerance_molar=0.15, relative_tolerance=0.0,
                            cap_steps=20_000)
SIM = NanoconfinementRuns(platform="CPU", sampling=SAMPLING, box_nm=4.0, cutoff_nm=1.5)
POINT_SEED = 2026
FIRST_BLOCK = 200  # points 0-199: one sample of 200 (seed POINT_SEED); further points: a second sample
ROOT = Path("/work/md_replay_runs")
DATA = Path(__file__).resolve().parent / "data" / "md_replay"


def points(n: int) -> np.ndarray:
    """The first n points: BOX.sample(200) with POINT_SEED, then BOX.sample with POINT_SEED + 1 (a
    sample's rows depend on its size, so the data set grows by a second sample, not a larger first)."""
    first = BOX.sample(FIRST_BLOCK, np.random.default_rng(POINT_SEED))
    more = BOX.sample(max(n - FIRST_BLOCK, 0), np.random.default_rng(POINT_SEED + 1))
    return np.vstack([first, more])[:n]


def run(root: Path, worker: int, workers: int, n: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i, point in enumerate(points(n)):
        folder = root / f"run{i:04d}"
        if i % workers != worker or folder.is_dir():
            continue
        partial = root / f"run{i:04d}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        began = time.perf_counter()
        [summary] = SIM.run_batch([dict(zip(PARAMETERS, point.tolist(), strict=True))], [partial],
                                  ScheduledCheckpoints(partial / "ck", []))
        wall_s = time.perf_counter() - began
        (partial / "replay.json").write_text(json.dumps({"index": i, "wall_s": wall_s, "steps": summary["steps"],
                                                         "converged": summary["converged"]}) + "\n")
        shutil.rmtree(partial / "ck", ignore_errors=True)
        partial.rename(folder)
        print(f"run {i}: {summary['steps']} steps, converged {summary['converged']}, {wall_s:.1f} s",
              file=sys.stderr, flush=True)


def extract(root: Path) -> Path:
    folders = sorted(f for f in root.glob("run[0-9][0-9][0-9][0-9]") if f.is_dir())
    runs = [read_run(f) for f in folders]
    logs = [json.loads((f / "replay.json").read_text()) for f in folders]
    blocks = [json.loads((f / "summary.json").read_text())["complete_blocks"] for f in folders]
    bins = {len(r.z_nm) for r in runs}
    width = max(bins)
    def padded(a: np.ndarray) -> np.ndarray:  # profiles have round(h / 0.05) bins: NaN-padded to the widest
        return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=np.nan)
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / "runs.npz"
    revision = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=DATA, capture_output=True,
                              text=True).stdout.strip()
    np.savez_compressed(path, points=np.stack([r.point for r in runs]),
                        z_nm=np.stack([np.pad(r.z_nm, (0, width - len(r.z_nm)), constant_values=np.nan)
                                       for r in runs]),
                        bins=np.array([len(r.z_nm) for r in runs]),
                        density=np.stack([padded(r.density) for r in runs]),
                        error=np.stack([padded(r.error) for r in runs]),
                        steps=np.array([g["steps"] for g in logs]), blocks=np.array(blocks), converged=np.array([g["converged"] for g in logs]),
                        wall_s=np.array([g["wall_s"] for g in logs]), index=np.array([g["index"] for g in logs]),
                        box_nm=np.float64(SIM.box_nm), parameters=np.array(PARAMETERS),
                        settings=json.dumps({"simulation": SIM.__dict__, "box": BOX.to_dict(),
                                             "point_seed": POINT_SEED, "extracted_at_revision": revision}))
    write_source(root, logs, blocks, revision)
    print(f"{len(runs)} runs ({sum(g['converged'] for g in logs)} converged) -> {path}", file=sys.stderr)
    return path


def write_source(root: Path, logs: list[dict], blocks: list[int], revision: str) -> None:
    """SOURCE.md beside runs.npz: how the data set was made."""
    ran_at = (root / "REVISION").read_text().strip() if (root / "REVISION").exists() else "unknown"
    wall = np.array([g["wall_s"] for g in logs])
    steps = np.array([g["steps"] for g in logs])
    converged = sum(g["converged"] for g in logs)
    text = f"""# The replay data set (runs.npz)

{len(logs)} nanoconfinement MD runs, {converged} of them converged (every error bar <= {SIM.tolerance_molar} M with
at least 10 blocks) and {len(logs) - converged} stopped at the {SIM.cap_steps}-step cap (their error bars are
kept: they are larger, and honest). Points: `build_md_replay.points` (uniform in h {BOX.low[0]}-{BOX.high[0]} nm,
z+ {int(BOX.low[1])}-{int(BOX.high[1])}, c {BOX.low[3]}-{BOX.high[3]} M; z- -1, d+ {BOX.low[4]}, d- {BOX.low[5]} nm; seed {POINT_SEED}),
the finished runs among indices {min(g['index'] for g in logs)}-{max(g['index'] for g in logs)} (a run in progress when the
drivers were stopped is missing).

Made with (2 processes, on the 2-core machine shared with other jobs, load average 15-30):

    cp -r src /work/md_replay_runs/src     # a snapshot of the code, so edits do not reach a running driver
    PYTHONPATH=/work/md_replay_runs/src nice -n 10 python benchmarks/build_md_replay.py run --worker K --workers 2
    python benchmarks/build_md_replay.py extract

The runs used the code at git revision {ran_at} (the snapshot; md.job.run_md through
md.campaign.nanoconfinement_runs.NanoconfinementRuns, the path `thrifty md sweep` takes); extracted at {revision}.
Settings (bench_md_campaign_real.py's): {json.dumps(SIM.__dict__)}; OpenMM CPU platform, one thread
(OPENMM_CPU_THREADS=1), seed 0 for every run. Steps per run {int(steps.min())}-{int(steps.max())} (median
{int(np.median(steps))}), complete blocks {min(blocks)}-{max(blocks)}, wall time {wall.min():.0f}-{wall.max():.0f} s
(median {np.median(wall):.0f} s) on the loaded machine. The run folders (profiles.csv, params.json,
summary.json, thermo.csv, profiles.png) stay in /work/md_replay_runs/, outside the repository.

runs.npz (numpy, read by thrifty.md.surrogate.replay.ReplaySet): points (n, 6; md.params order),
z_nm, density and error (n, 2, bins; molar; NaN-padded past each run's round(h / 0.05) bins), bins,
steps, blocks, converged, wall_s, index, box_nm, parameters, settings (JSON).
"""
    (DATA / "SOURCE.md").write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=("run", "extract"))
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--runs", type=int, default=230)
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    if args.action == "run":
        run(args.root, args.worker, args.workers, args.runs)
    else:
        extract(args.root)


if __name__ == "__main__":
    main()
