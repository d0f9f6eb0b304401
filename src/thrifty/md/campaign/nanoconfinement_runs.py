# SPDX-License-Identifier: MIT
"""The nanoconfinement model as a campaign's batch simulation (md.campaign.simulations protocol).

A batch of points of the parameter box is one run of the MD job loop (md.engines.job_loop) on the
OpenMM engine (one point a batch) or the torch engine (R points a batch), each sampled until its
profiles converge (every block-averaged error bar at or below the tolerance) or the cap: the
MD-aware early stop. It resumes from the campaign's checkpoints like any MD job (bit-identical on
Reference), and each point's folder gets `md run`'s outputs, params.json among them, so a
campaign's run folders are what the surrogate trains on (md.runs). Parameter names are the
model's (md.params.PARAMETERS: h_nm, z_plus, z_minus, c_molar, d_plus_nm, d_minus_nm); a point may
leave any of them to the model's default; valencies must be integers.
"""

import itertools
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from thrifty.errors import ThriftyError
from thrifty.md.engines.protocol import Engine
from thrifty.md.engines.single_run import make_engine
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.params import INTEGER_PARAMETERS, PARAMETERS
from thrifty.md.sampling_settings import SamplingSettings
from thrifty.md.space import ParameterSpace
from thrifty.transient.protocol import JobCheckpoints


def check_names(names: Iterable[str]) -> None:
    """One error naming the model's parameters if any of `names` is not one of them."""
    unknown = sorted(set(names) - set(PARAMETERS))
    if unknown:
        raise ThriftyError(f"nanoconfinement has no parameter {', '.join(unknown)}: "
                           f"the space may name {', '.join(PARAMETERS)}")


def _value(name: str, value: float) -> float | int:
    """A point's value for the model: a valency must be an integer (a run id hashes the value given)."""
    number = float(value)
    if name not in INTEGER_PARAMETERS:
        return number
    if number != round(number):
        raise ThriftyError(f"{name} is a valency and must be an integer, got {number:g}")
    return int(number)


def model_at(params: dict, box_nm: float | None = None, cutoff_nm: float = 2.5) -> NanoconfinementModel:
    """The model at a campaign point; an unknown parameter name or a fractional valency is one error."""
    check_names(params)
    values: dict[str, Any] = {k: _value(k, v) for k, v in params.items()}
    model = NanoconfinementModel(**values, box_nm=box_nm, cutoff_nm=cutoff_nm)
    model.check()
    return model


def check_space(space: ParameterSpace, box_nm: float | None = None, cutoff_nm: float = 2.5) -> None:
    """Refuse, before a campaign starts, a space naming no model parameter, a valency given as a range
    or a fractional value, or reaching a point the model refuses: every corner of the box (each
    parameter's least and largest value) is checked."""
    check_names(space.names)
    for p in space.parameters:
        if p.name in INTEGER_PARAMETERS and not p.values:
            raise ThriftyError(f"{p.name} is a valency: give it as a list of integers (values = [1, 2, 3]), "
                               f"not a range")
        if p.name in INTEGER_PARAMETERS:
            for v in p.values:
                _value(p.name, v)
    extremes = [sorted({min(p.values), max(p.values)}) if p.values else [p.low, p.high] for p in space.parameters]
    for corner in itertools.product(*extremes):
        point = dict(zip(space.names, corner, strict=True))
        try:
            model_at(point, box_nm, cutoff_nm)
        except ThriftyError as error:
            where = ", ".join(f"{k} = {v:g}" for k, v in point.items())
            raise ThriftyError(f"the space reaches a point the model refuses ({where}): {error}") from None


@dataclass(frozen=True)
class NanoconfinementRuns:
    """Settings every run of a campaign shares (the points vary)."""

    engine: str = "openmm"
    platform: str = "CPU"  # the OpenMM engine's
    dtype: str = "float64"  # the torch engine's
    device: str = "cpu"
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    box_nm: float | None = None  # None: the model's (15 nm up to 0.5 M, 10 nm above)
    cutoff_nm: float = 2.5  # real-space Coulomb cutoff (the model's default)
    seed: int = 0
    threads: int = 1  # the torch engine's CPU threads: one per campaign worker (a Ray task has one CPU)

    def make_engine(self, models: list[NanoconfinementModel]) -> Engine:
        return make_engine(self.engine, models, seed=self.seed, dtype=self.dtype, device=self.device,
                           platform=self.platform)

    def run_batch(self, points: list[dict], work_dirs: list[Path], checkpoints: JobCheckpoints) -> list[dict]:
        """Run (or resume) the points as one job; each point's summary, with "converged" and the settings."""
        from thrifty.md.engines.job_loop import run_job
        engine = self.make_engine([model_at(p, self.box_nm, self.cutoff_nm) for p in points])
        if self.engine == "torch":
            from thrifty.md.torch_physics.threads import use_threads
            with use_threads(self.threads):
                summaries = run_job(engine, self.sampling, work_dirs, checkpoints)
        else:
            summaries = run_job(engine, self.sampling, work_dirs, checkpoints)
        return [{**summary, "converged": summary["stopped"] == "converged", "settings": asdict(self)}
                for summary in summaries]
