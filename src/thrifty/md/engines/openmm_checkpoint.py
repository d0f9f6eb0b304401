# SPDX-License-Identifier: MIT
"""What an OpenMM engine's checkpoint holds, and the checks that run before OpenMM sees it.

OpenMM's own checkpoint (positions, velocities, box, integrator and its random-number state) only
loads into a Context of the same system on the same platform and build; anything else fails deep
inside OpenMM ("wrong number of particles", "created with a different Platform"). So the payload
also records the system's identity (name, builder parameters, particle count and a hash of the
serialised System, which catches a changed force field or OpenMM version), the platform, the
seed and how the profiles are sampled (equilibration steps, samples per block), and `check_resume` compares them with this run first and says in one line what differs.
"""

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import openmm

from thrifty.errors import ThriftyError
from thrifty.md.engines.checkpoint_formats import OPENMM_FORMAT, TORCH_PREFIX
from thrifty.md.engines.openmm_systems import MDSystem
from thrifty.md.engines.resume import START_OVER

FORMAT = OPENMM_FORMAT


@dataclass(frozen=True)
class MDCheckpoint:
    identity: dict  # system_identity() of the system that wrote it
    platform: str
    seed: int
    step: int
    samples: int  # density samples summed in histogram
    histogram: np.ndarray  # (blocks, species, bins) particle counts, md.profiles
    openmm_state: bytes  # Context.createCheckpoint()
    sampling: dict  # {"equilibration_steps": ..., "samples_per_block": ...} of the run that wrote it


def system_identity(md: MDSystem) -> dict:
    xml = openmm.XmlSerializer.serialize(md.system)
    return {"system": md.name, "parameters": md.parameters, "particles": md.system.getNumParticles(),
            "system_sha256": hashlib.sha256(xml.encode()).hexdigest()}


def describe(identity: dict) -> str:
    """'lj (216 particles, n_atoms=216, sha256 9f0c301ad47a)': enough to tell two systems apart."""
    parameters = "".join(f", {k}={v}" for k, v in identity["parameters"].items())
    return f"{identity['system']} ({identity['particles']} particles{parameters}, " \
           f"sha256 {identity['system_sha256'][:12]})"


def pack(checkpoint: MDCheckpoint) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, format=FORMAT, identity=json.dumps(checkpoint.identity), platform=checkpoint.platform,
             seed=np.int64(checkpoint.seed), step=np.int64(checkpoint.step),
             samples=np.int64(checkpoint.samples), histogram=checkpoint.histogram,
             openmm=np.frombuffer(checkpoint.openmm_state, dtype=np.uint8), sampling=json.dumps(checkpoint.sampling))
    return buffer.getvalue()


def unpack(payload: bytes, where: Path) -> MDCheckpoint:
    """The checkpoint in `payload` (read from `where`); one written by anything else is refused."""
    try:
        with np.load(io.BytesIO(payload)) as data:
            if "format" not in data.files:
                raise ValueError
            if str(data["format"]).startswith(TORCH_PREFIX):
                written = json.loads(str(data["identity"]))
                engine = written[0] if isinstance(written, list) else written  # a batch: its first replica
                raise ThriftyError(f"the checkpoint in {where} was written by the torch engine "
                                   f"(--engine torch --dtype {engine['dtype']}); this run is --engine openmm: give "
                                   f"--engine torch --dtype {engine['dtype']}, or use another --checkpoint-dir "
                                   f"(or --out) to start a new run")
            if str(data["format"]) != FORMAT:
                raise ValueError
            return MDCheckpoint(json.loads(str(data["identity"])), str(data["platform"]), int(data["seed"]),
                                int(data["step"]), int(data["samples"]), data["histogram"].copy(),
                                data["openmm"].tobytes(), json.loads(str(data["sampling"])))
    except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile):
        raise ThriftyError(f"the newest checkpoint in {where} was not written by this version of "
                           f"`thrifty md run` ({FORMAT}): use another --checkpoint-dir (or --out)") from None


def check_resume(saved: MDCheckpoint, identity: dict, platform: str, where: Path) -> None:
    """Refuse, in one line, a resume that OpenMM would fail on (the loop checks seed, sampling and
    target: md.engines.resume)."""
    if saved.identity != identity:
        raise ThriftyError(f"the checkpoint in {where} is for system {describe(saved.identity)}, this run is "
                           f"{describe(identity)}: resume with the same --system, or {START_OVER}")
    if saved.platform != platform:
        raise ThriftyError(f"the checkpoint in {where} was made on OpenMM platform {saved.platform}, which is "
                           f"the only one it loads on; this run asked for {platform}: give --platform "
                           f"{saved.platform}, or {START_OVER}")
