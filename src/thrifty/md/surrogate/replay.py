# SPDX-License-Identifier: MIT
"""The replayable MD data set (benchmarks/data/md_replay/runs.npz, built by
benchmarks/build_md_replay.py): completed nanoconfinement runs as md.runs.Run, with their steps,
convergence and the box side they used. No torch.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from thrifty.md.runs import Run


@dataclass(frozen=True)
class ReplaySet:
    runs: list[Run]
    steps: np.ndarray
    blocks: np.ndarray  # complete blocks of each run's block averages (its error bars' degrees of freedom + 1)
    converged: np.ndarray
    wall_s: np.ndarray
    box_nm: float
    settings: dict

    @classmethod
    def load(cls, path: Path) -> "ReplaySet":
        with np.load(Path(path)) as data:
            runs = [Run(data["points"][i], data["z_nm"][i, :n], data["density"][i, :, :n], data["error"][i, :, :n],
                        f"run{int(data['index'][i]):04d}") for i, n in enumerate(data["bins"])]
            return cls(runs, data["steps"], data["blocks"], data["converged"], data["wall_s"], float(data["box_nm"]),
                       json.loads(str(data["settings"])))

    def split(self, seed: int, train: int, test: int) -> tuple[list[Run], list[Run], np.ndarray]:
        """A short campaign and runs it never sees: `train` and then `test` runs of a seeded
        permutation; and the held-out runs' indices into the set."""
        order = np.random.default_rng(seed).permutation(len(self.runs))
        held = order[train:train + test]
        return [self.runs[i] for i in order[:train]], [self.runs[i] for i in held], held
