# SPDX-License-Identifier: MIT
"""One MD job as the tests state it (system, engine options and sampling in one place), run through
the one job loop (md.engines.job_loop) on either engine."""

from dataclasses import dataclass
from pathlib import Path

from thrifty.md.engines.job_loop import run_one
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.sampling_settings import SamplingSettings
from thrifty.transient.protocol import JobCheckpoints


@dataclass(frozen=True)
class OpenMMJob:
    system: str = "ions"
    steps: int | None = 5000
    chunk: int = 100
    platform: str = "Reference"
    seed: int = 0
    model: NanoconfinementModel | None = None
    equilibration_steps: int = 0
    samples_per_block: int = 10
    tolerance_molar: float = 0.02
    cap_steps: int = 200_000

    @property
    def settings(self) -> SamplingSettings:
        return SamplingSettings(self.steps, self.chunk, self.equilibration_steps, self.samples_per_block,
                                self.tolerance_molar, self.cap_steps)


def run_openmm(job: OpenMMJob, out: Path, checkpoints: JobCheckpoints) -> dict:
    from thrifty.md.engines.openmm_engine import OpenMMEngine
    return run_one(OpenMMEngine(job.system, job.platform, job.seed, job.model), job.settings, out, checkpoints)


def run_torch(job: OpenMMJob, out: Path, checkpoints: JobCheckpoints, dtype: str = "float64",
              device: str = "cpu") -> dict:
    """The job's nanoconfinement model on the torch engine, a batch of one."""
    from thrifty.md.engines.torch_replicas_engine import TorchEngine
    return run_one(TorchEngine([job.model or NanoconfinementModel()], job.seed, dtype, device), job.settings, out,
                   checkpoints)
