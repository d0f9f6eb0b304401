"""The nanoconfinement system as a campaign's simulation function (md.simulation protocol).

One point of the parameter box is one `md.job.run_md` of the nanoconfinement model, sampled until
its profiles converge (every block-averaged error bar at or below `tolerance_molar`) or
`cap_steps`: the MD-aware early stop. It resumes from the campaign's checkpoints like any MD job
(bit-identical on Reference), and writes the point as `params.json` beside `profiles.csv`, so a
campaign's run folders are what the surrogate trains on (md.runs). Parameter names are the
model's (md.params.PARAMETERS: h_nm, z_plus, z_minus, c_molar, d_plus_nm, d_minus_nm); a point
may leave any of them to the model's default.
"""

import itertools
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from thrifty.errors import ThriftyError
from thrifty.io import write_text_atomic
from thrifty.md.job import MDSettings, run_md
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.params import INTEGER_PARAMETERS, PARAMETERS
from thrifty.md.runs import PARAMS_FILE
from thrifty.md.space import ParameterSpace
from thrifty.transient.protocol import JobCheckpoints


def check_names(names) -> None:
    """One error naming the model's parameters if any of `names` is not one of them."""
    unknown = sorted(set(names) - set(PARAMETERS))
    if unknown:
        raise ThriftyError(f"nanoconfinement has no parameter {', '.join(unknown)}: "
                           f"the space may name {', '.join(PARAMETERS)}")


def model_at(params: dict, box_nm: float | None = None, cutoff_nm: float = 2.5) -> NanoconfinementModel:
    """The model at a campaign point; an unknown parameter name is one error naming the known ones."""
    check_names(params)
    values = {k: int(round(float(v))) if k in INTEGER_PARAMETERS else float(v) for k, v in params.items()}
    model = NanoconfinementModel(**values, box_nm=box_nm, cutoff_nm=cutoff_nm)
    model.check()
    return model


def check_space(space: ParameterSpace, box_nm: float | None = None, cutoff_nm: float = 2.5) -> None:
    """Refuse, before a campaign starts, a space naming no model parameter or reaching a point the
    model refuses: every corner of the box (each parameter's least and largest value) is checked."""
    check_names(space.names)
    extremes = [sorted({min(p.values), max(p.values)}) if p.values else [p.low, p.high] for p in space.parameters]
    for corner in itertools.product(*extremes):
        point = dict(zip(space.names, corner))
        try:
            model_at(point, box_nm, cutoff_nm)
        except ThriftyError as error:
            where = ", ".join(f"{k} = {v:g}" for k, v in point.items())
            raise ThriftyError(f"the space reaches a point the model refuses ({where}): {error}") from None


def write_params(model: NanoconfinementModel, work_dir: Path) -> None:
    """The point as md.runs reads it: params.json in the run folder."""
    point = {f.name: getattr(model, f.name) for f in fields(model) if f.name in PARAMETERS}
    write_text_atomic(work_dir / PARAMS_FILE, json.dumps(point, sort_keys=True) + "\n")


@dataclass(frozen=True)
class NanoconfinementRun:
    """Settings every run of a campaign shares (the point varies)."""

    platform: str = "CPU"
    chunk: int = 100
    equilibration_steps: int = 20_000
    samples_per_block: int = 10
    tolerance_molar: float = 0.02
    cap_steps: int = 200_000
    box_nm: float | None = None  # None: the model's (15 nm up to 0.5 M, 10 nm above)
    cutoff_nm: float = 2.5  # real-space Coulomb cutoff (the model's default)
    seed: int = 0

    def __call__(self, params: dict, work_dir: Path, checkpoints: JobCheckpoints) -> dict:
        model = model_at(params, self.box_nm, self.cutoff_nm)
        work_dir = Path(work_dir)
        work_dir.mkdir(parents=True, exist_ok=True)
        write_params(model, work_dir)
        settings = MDSettings(system="nanoconfinement", steps=None, chunk=self.chunk, platform=self.platform,
                              seed=self.seed, model=model, equilibration_steps=self.equilibration_steps,
                              samples_per_block=self.samples_per_block, tolerance_molar=self.tolerance_molar,
                              cap_steps=self.cap_steps)
        summary = run_md(settings, work_dir, checkpoints)
        return {**summary, "converged": summary["stopped"] == "converged", "settings": asdict(self)}
