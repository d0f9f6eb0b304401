# SPDX-License-Identifier: MIT
"""Completed nanoconfinement runs, as the surrogate trains on them.

A run is a folder holding `profiles.csv` (columns z_nm, cation_molar, cation_err, anion_molar,
anion_err: the density profiles along z with their error bars, molar) and `params.json` (the point:
h_nm, z_plus, z_minus, c_molar, d_plus_nm, d_minus_nm; other keys are ignored). A folder of runs is
searched one level deep; a folder without profiles.csv is not a completed run and is skipped, a
completed run with a malformed file is an error naming the file. `md run` also writes summary.json,
whose parameters.box_nm is the wall side the run used: the surrogate's charge normalisation needs it
(runs_box_nm).
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.io import read_csv, read_json
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.params import PARAMETERS, check_point
from thrifty.md.profile_grid import DEFAULT_BINS, to_grid

PROFILE_COLUMNS = ("z_nm", "cation_molar", "cation_err", "anion_molar", "anion_err")
PROFILES_FILE, PARAMS_FILE, SUMMARY_FILE = "profiles.csv", "params.json", "summary.json"
# what a finished `md run` leaves in its --out beside its checkpoints (md.engines.outputs, job_loop):
# a `md run --force` that has finished removes those it did not write again, or a run of another
# system left the last one's profiles.csv and params.json behind for train-surrogate to take
RUN_OUTPUT_FILES = (SUMMARY_FILE, PARAMS_FILE, PROFILES_FILE, "profiles.png", "thermo.csv", "density_profile.csv",
                    "final_state.npz")


@dataclass(frozen=True)
class Run:
    point: np.ndarray  # PARAMETERS order
    z_nm: np.ndarray
    density: np.ndarray  # (2, len(z)): cation, anion (molar)
    error: np.ndarray  # (2, len(z)): their error bars (molar)
    name: str = ""
    box_nm: float | None = None  # the wall side its summary.json records; None: not recorded

    @property
    def h_nm(self) -> float:
        return float(self.point[PARAMETERS.index("h_nm")])

    def on_grid(self, bins: int = DEFAULT_BINS) -> tuple[np.ndarray, np.ndarray]:
        """Density and error bars resampled onto the reduced grid: two (2, bins) arrays."""
        return to_grid(self.z_nm, self.density, self.h_nm, bins), to_grid(self.z_nm, self.error, self.h_nm, bins)


def read_run(folder: Path) -> Run:
    folder = Path(folder)
    params = read_json(folder / PARAMS_FILE, ThriftyError, "run parameters")
    if not isinstance(params, dict):
        raise ThriftyError(f"run parameters {folder / PARAMS_FILE} must be a JSON object")
    try:
        point = check_point(params)
    except ThriftyError as exc:  # name the file (a new user's pass: "missing parameters: ..." from which run?)
        raise ThriftyError(f"run parameters {folder / PARAMS_FILE}: {exc}") from None
    rows = read_csv(folder / PROFILES_FILE, ThriftyError, "density profiles", required=PROFILE_COLUMNS)
    try:
        table = np.array([[float(row[c]) for c in PROFILE_COLUMNS] for row in rows])
    except ValueError as exc:
        raise ThriftyError(f"density profiles {folder / PROFILES_FILE}: {exc}") from None
    if len(table) >= 2 and np.isfinite(table[:, [0, 1, 3]]).all() and np.isnan(table[:, [2, 4]]).any():  # as md.md says
        raise ThriftyError(f"density profiles {folder / PROFILES_FILE} have NaN error bars: the run has fewer than "
                           "2 complete blocks, too few to train on (run it longer)")
    if len(table) < 2 or not np.isfinite(table).all() or (table[:, 1:] < 0).any() \
            or (np.diff(table[:, 0]) <= 0).any():  # a density < 0 too (a new user's pass: -5 M was trained on)
        raise ThriftyError(f"density profiles {folder / PROFILES_FILE} need 2+ rows of finite numbers, "
                           "z_nm increasing, densities and error bars >= 0")
    return Run(point, table[:, 0], table[:, [1, 3]].T, table[:, [2, 4]].T, folder.name, _recorded_box(folder))


def _recorded_box(folder: Path) -> float | None:
    """The box side summary.json records (md run writes it), or None where there is none to read."""
    try:
        side = read_json(folder / SUMMARY_FILE, ThriftyError, "run summary").get("parameters", {}).get("box_nm")
    except (ThriftyError, AttributeError):
        return None
    return float(side) if isinstance(side, int | float) and side > 0 else None


def runs_box_nm(runs: list[Run], given: float | None) -> float | None:
    """The wall side to train on: `given` (--box-nm), else the side the runs' summaries record, else
    None (the model's default for each run's c). Refused in one line: a `given` side a run's summary
    contradicts, and runs on different sides that are not each their c's default (one surrogate
    normalises by one box: the default 15 nm taken for 4 nm runs put its profiles 7% off)."""
    sides = {run.box_nm for run in runs if run.box_nm is not None}
    if given is not None:
        if sides - {given}:
            raise ThriftyError(f"--box-nm {given:g} but the runs' summary.json record a box of "
                               f"{', '.join(f'{s:g}' for s in sorted(sides))} nm")
        return given
    default = [NanoconfinementModel(c_molar=float(run.point[PARAMETERS.index("c_molar")])).side_nm for run in runs]
    if all(run.box_nm in (None, side) for run, side in zip(runs, default, strict=True)):
        return None
    if len(sides) == 1 and all(run.box_nm is not None for run in runs):
        return sides.pop()
    unrecorded = " (and some record none)" if any(run.box_nm is None for run in runs) else ""
    # --box-nm helps only where one side is recorded (a new user's pass: advised for 5 and 6 nm, then refused)
    way = f"give --box-nm {min(sides):g} if the others ran in it too" if len(sides) == 1 else \
        "train one surrogate per box side (a --runs folder each)"
    raise ThriftyError(f"the runs were run in boxes of {', '.join(f'{s:g}' for s in sorted(sides))} nm{unrecorded}: "
                       f"{way}")


def read_runs(folder: Path) -> list[Run]:
    """Every completed run in `folder` (the folder itself, or its sub-folders), in name order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ThriftyError(f"{folder} is a file, not a runs folder" if folder.exists() else f"runs folder not found: {folder}")
    if (folder / PROFILES_FILE).exists():
        return [read_run(folder)]
    runs = [read_run(sub) for sub in sorted(folder.iterdir()) if (sub / PROFILES_FILE).is_file()]
    if not runs:
        raise ThriftyError(f"no completed runs in {folder}: each run is a folder with {PROFILES_FILE} "
                           f"and {PARAMS_FILE}")
    return runs


def grid_arrays(runs: list[Run], bins: int = DEFAULT_BINS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points (n, 6), densities (n, 2, bins) and error bars (n, 2, bins) of the runs on the grid."""
    grids = [run.on_grid(bins) for run in runs]
    return (np.stack([run.point for run in runs]), np.stack([g[0] for g in grids]),
            np.stack([g[1] for g in grids]))
