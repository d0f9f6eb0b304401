# SPDX-License-Identifier: MIT
"""What the torch engine's checkpoint holds: every replica's positions and velocities, the
generator's state, the step and each replica's profile blocks, with the batch's identity (per
replica: engine, dtype, device, system, parameters, particles, seed and sampling). Forces are
recomputed from the positions on resume, which is what the step computes, so on the CPU in
float64 a resumed run ends bit for bit where an uninterrupted one ends.

Formats: BATCH_FORMAT ("thrifty-md-torch/batch-1", written since the batched campaign) is read
and written; SINGLE_FORMAT ("thrifty-md-torch/1", written by `thrifty md run --engine torch` before
a single run became a batch of one) is read as the batch of one it is. Anything else, the OpenMM
engine's included, is refused in one line that says why.
"""

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.md.engines.checkpoint_formats import OPENMM_FORMAT
from thrifty.md.engines.checkpoint_formats import TORCH_BATCH_FORMAT as BATCH_FORMAT
from thrifty.md.engines.checkpoint_formats import TORCH_SINGLE_FORMAT as SINGLE_FORMAT
from thrifty.md.engines.resume import START_OVER


@dataclass(frozen=True)
class TorchCheckpoint:
    identity: list[dict]  # per replica: the engine's identity plus "seed" and "sampling"
    step: int
    samples: int
    blocks: list[np.ndarray]  # per replica: (blocks, species, bins) counts, md.profiles
    positions_nm: np.ndarray  # (R, N, 3) in the run's dtype, padded
    velocities_nm_ps: np.ndarray  # (R, N, 3)
    rng_state: np.ndarray  # torch.Generator.get_state(), uint8


def pack(c: TorchCheckpoint) -> bytes:
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {"format": BATCH_FORMAT, "identity": json.dumps(c.identity), "step": np.int64(c.step),
                              "samples": np.int64(c.samples), "positions": c.positions_nm,
                              "velocities": c.velocities_nm_ps, "rng_state": c.rng_state}
    arrays |= {f"blocks_{i}": b for i, b in enumerate(c.blocks)}
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _single(data) -> TorchCheckpoint:
    """A checkpoint of SINGLE_FORMAT as the batch of one it is."""
    identity = json.loads(str(data["identity"])) | {"seed": int(data["seed"]),
                                                     "sampling": json.loads(str(data["sampling"]))}
    return TorchCheckpoint([identity], int(data["step"]), int(data["samples"]), [data["histogram"].copy()],
                           data["positions"][None].copy(), data["velocities"][None].copy(), data["rng_state"].copy())


def unpack(payload: bytes, where: Path) -> TorchCheckpoint:
    """The checkpoint in `payload`; one of the OpenMM engine or of anything else is refused in one line."""
    try:
        with np.load(io.BytesIO(payload)) as data:
            written = str(data["format"]) if "format" in data.files else None
            if written == OPENMM_FORMAT:
                raise ThriftyError(f"the checkpoint in {where} was written by the OpenMM engine (--engine openmm); "
                                   f"this run is --engine torch: give --engine openmm, or {START_OVER}")
            if written == SINGLE_FORMAT:
                return _single(data)
            if written != BATCH_FORMAT:
                raise ValueError
            identity = json.loads(str(data["identity"]))
            return TorchCheckpoint(identity, int(data["step"]), int(data["samples"]),
                                   [data[f"blocks_{i}"].copy() for i in range(len(identity))],
                                   data["positions"].copy(), data["velocities"].copy(), data["rng_state"].copy())
    except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile):
        raise ThriftyError(f"the newest checkpoint in {where} was not written by this version of "
                           f"the torch engine ({BATCH_FORMAT} or {SINGLE_FORMAT}): {START_OVER}") from None


def check_resume(saved: list[dict], this: list[dict], where: Path) -> None:
    """Refuse, in one line, a checkpoint of another batch, engine, dtype, device or system (the loop
    checks seed, sampling and target)."""
    if len(saved) != len(this):
        raise ThriftyError(f"the checkpoint in {where} is for a batch of {len(saved)} points, this run has "
                           f"{len(this)}: {START_OVER}")
    for theirs, ours in zip(saved, this, strict=True):
        for key, option in (("engine", "--engine"), ("dtype", "--dtype"), ("device", "--device")):
            if theirs.get(key) != ours[key]:
                raise ThriftyError(f"the checkpoint in {where} is for {option} {theirs.get(key)}, this run asked "
                                   f"for {option} {ours[key]}: give {option} {theirs.get(key)}, or {START_OVER}")
        if {k: v for k, v in theirs.items() if k not in ("seed", "sampling")} != ours:
            parameters = ", ".join(f"{k}={v}" for k, v in theirs["parameters"].items())
            raise ThriftyError(f"the checkpoint in {where} is for system {theirs['system']} "
                               f"({theirs['particles']} particles, {parameters}), this run is {ours['system']} "
                               f"({ours['particles']} particles): resume with the same parameters, or {START_OVER}")
