# SPDX-License-Identifier: MIT
"""A stand-in for the nanoconfinement MD system, until it lands: cheap, pure numpy, deterministic.

NOT molecular dynamics. Point ions in a slit of width h (nm) take overdamped Langevin steps in a
harmonic pull towards the mid-plane whose stiffness grows with valency (z+ - z-) and with ion
diameter (d+ + d-)/2, reflected at the walls; the number of ions grows with concentration c. It
has the shape of the real job: a density profile along z accumulated in blocks, block-averaged
error bars (the standard error of the block means), a stop when every bar is below `tolerance`
(converged) or at `max_chunks` (not converged), a checkpoint holding the random generator's state
so that a resumed run ends bit for bit where an uninterrupted one ends, and profiles.csv plus
result.json in its work folder. `chunk_wall_s` sleeps after each chunk to stand for the compute
time of a real chunk (sleeping costs this 2-core machine no CPU).
"""

import hashlib
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.io import write_text_atomic
from thrifty.md.space import ParameterSpace
from thrifty.transient.protocol import JobCheckpoints

DEFAULTS = {"h": 3.5, "zp": 1.0, "zn": -1.0, "c": 0.5, "dp": 0.5, "dn": 0.5}
BINS = 20
# what each parameter must be: positive sizes and concentration, a cation's and an anion's valency
SIGNS = {"h": 1, "c": 1, "dp": 1, "dn": 1, "zp": 1, "zn": -1}


def check_space(space: ParameterSpace) -> None:
    """Refuse a space the stand-in cannot run or would ignore, before a campaign starts: a name it does
    not know (it changes each run's seed and id, and nothing else: a new user's pass), or a range
    reaching a value of the wrong sign (a concentration of -1 ran)."""
    unknown = [name for name in space.names if name not in DEFAULTS]
    if unknown:
        raise ThriftyError(f"the stand-in takes the parameters {', '.join(DEFAULTS)}; the space names "
                           f"{', '.join(unknown)}")
    for p in space.parameters:
        low, high = p.bounds()
        if (low if SIGNS[p.name] > 0 else -high) <= 0:
            raise ThriftyError(f"the stand-in's {p.name} must be {'positive' if SIGNS[p.name] > 0 else 'negative'}; "
                               f"the space reaches {low if SIGNS[p.name] > 0 else high:g}")


@dataclass(frozen=True)
class StandIn:
    steps_per_chunk: int = 50
    chunks_per_block: int = 4
    tolerance: float = 0.04  # largest standard error of the block-mean density, 1/nm
    min_blocks: int = 4
    max_chunks: int = 400
    chunk_wall_s: float = 0.02
    seed: int = 0

    def __call__(self, params: dict, work_dir: Path, checkpoints: JobCheckpoints) -> dict:
        p = {**DEFAULTS, **{k: float(v) for k, v in params.items()}}
        work_dir = Path(work_dir)
        n_ions = max(4, int(round(40 * p["c"] * p["h"])))
        stiffness = 0.2 * abs(p["zp"] - p["zn"]) * (p["dp"] + p["dn"]) / p["h"] ** 2  # 1/step
        payload = checkpoints.latest()
        if payload is None:
            key = hashlib.sha256(json.dumps(p, sort_keys=True).encode()).digest()
            rng = np.random.default_rng([self.seed, *np.frombuffer(key[:8], dtype=np.uint32)])
            x = rng.uniform(0.0, p["h"], n_ions)
            chunk, current, blocks = 0, np.zeros(BINS), []
        else:
            with np.load(io.BytesIO(payload)) as saved:
                rng = np.random.default_rng()
                rng.bit_generator.state = json.loads(str(saved["rng"]))
                x, chunk, current = saved["x"].copy(), int(saved["chunk"]), saved["current"].copy()
                blocks = list(saved["blocks"])
        converged, error = False, float("inf")
        while chunk < self.max_chunks and not converged:
            for _ in range(self.steps_per_chunk):
                x += -stiffness * (x - p["h"] / 2) + 0.05 * rng.standard_normal(n_ions)
                x = np.abs(x)  # reflect at z = 0
                x = p["h"] - np.abs(p["h"] - x)  # and at z = h
            current += np.histogram(x, bins=BINS, range=(0.0, p["h"]))[0]
            chunk += 1
            if chunk % self.chunks_per_block == 0:
                blocks.append(current / (self.chunks_per_block * n_ions) * BINS / p["h"])  # density, 1/nm
                current = np.zeros(BINS)
            if len(blocks) >= self.min_blocks:
                # block averaging: the error bar of the mean profile is sd(block means) / sqrt(blocks)
                error = float(np.max(np.std(blocks, axis=0, ddof=1)) / np.sqrt(len(blocks)))
                converged = error < self.tolerance
            time.sleep(self.chunk_wall_s)
            if not converged and checkpoints.due():
                buffer = io.BytesIO()
                np.savez(buffer, rng=json.dumps(rng.bit_generator.state), x=x, chunk=np.int64(chunk),
                         current=current, blocks=np.array(blocks).reshape(len(blocks), BINS))
                checkpoints.save(buffer.getvalue())
        return self._finish(p, work_dir, n_ions, chunk, blocks, x, converged, error)

    def _finish(self, p: dict, work_dir: Path, n_ions: int, chunk: int, blocks: list, x: np.ndarray,
                converged: bool, error: float) -> dict:
        profile = np.mean(blocks, axis=0)
        sem = np.std(blocks, axis=0, ddof=1) / np.sqrt(len(blocks))
        edges = np.linspace(0.0, p["h"], BINS + 1)
        write_text_atomic(work_dir / "profiles.csv", "z_nm,density_per_nm,error_per_nm\n" + "".join(
            f"{0.5 * (a + b):.6f},{d:.9f},{e:.9f}\n"
            for a, b, d, e in zip(edges[:-1], edges[1:], profile, sem, strict=True)))
        result = {"steps": chunk * self.steps_per_chunk, "converged": bool(converged), "profile_error": error,
                  "ions": n_ions, "contact_density": float(profile[0]), "mid_density": float(profile[BINS // 2]),
                  "state_sha256": hashlib.sha256(x.tobytes() + np.asarray(blocks).tobytes()).hexdigest()}
        write_text_atomic(work_dir / "result.json", json.dumps(result, indent=2))
        return result
