# SPDX-License-Identifier: MIT
"""thermo.csv: potential and kinetic energy and temperature, one row per chunk, across resumes.

Rows are appended as the run goes and flushed to disk (fsync) before every checkpoint, so the
file always holds every row up to the newest checkpoint's step; rows after it, including a line
half-written when the process died, are dropped when the run resumes (as `thrifty train` truncates
its step log), so an interrupted run ends with the same file as an uninterrupted one. Each engine
makes its rows (md.engines.protocol.Engine.energies); this module needs neither OpenMM nor torch.
"""

import os
from pathlib import Path
from typing import TextIO

from thrifty.errors import ThriftyError
from thrifty.io import write_text_atomic

COLUMNS = ("step", "time_ps", "potential_energy_kj_mol", "kinetic_energy_kj_mol", "temperature_k")
GAS_CONSTANT_KJ_MOL_K = 8.314462618e-3  # R = N_A k_B (CODATA 2018), kJ/(mol K)


def _line(row: dict[str, float]) -> str:
    return f"{row['step']},{row['time_ps']:.6f}," + ",".join(f"{row[c]:.6f}" for c in COLUMNS[2:]) + "\n"


def _step(line: str) -> int | None:
    """The row's step; None for a line cut short or garbled when the machine died mid-write."""
    try:
        return int(line.split(",", 1)[0]) if line.endswith("\n") and line.count(",") == len(COLUMNS) - 1 else None
    except ValueError:
        return None


def _kept_lines(path: Path, resume_step: int) -> list[str]:
    """Whole rows of `path` up to `resume_step`; the checkpoint's own row must be among them."""
    try:
        lines = path.read_text().splitlines(keepends=True)[1:]
    except FileNotFoundError:
        lines = []
    except (OSError, UnicodeDecodeError) as exc:
        raise ThriftyError(f"cannot read {path} to resume it: {exc}") from None
    rows = [(_step(line), line) for line in lines]
    kept = [line for step, line in rows if step is not None and step <= resume_step]
    if not kept or _step(kept[-1]) != resume_step:
        raise ThriftyError(f"{path} lacks the rows up to the checkpoint's step {resume_step}: give the --out "
                           f"of the run that wrote the checkpoint")
    return kept


class ThermoLog:
    """Appends rows to `path`, a new file unless resuming from a checkpoint at `resume_step`."""

    def __init__(self, path: Path, resume_step: int | None) -> None:
        self.path = Path(path)
        kept = [] if resume_step is None else _kept_lines(self.path, resume_step)
        write_text_atomic(self.path, ",".join(COLUMNS) + "\n" + "".join(kept))
        self.handle: TextIO = self.path.open("a")

    def __enter__(self) -> "ThermoLog":
        return self

    def __exit__(self, *_) -> None:
        self.handle.close()

    def append(self, row: dict[str, float]) -> None:
        self.handle.write(_line(row))

    def sync(self) -> None:
        """Make every row so far survive the machine's loss: call before saving a checkpoint."""
        self.handle.flush()
        os.fsync(self.handle.fileno())
