# SPDX-License-Identifier: MIT
"""TEST FIXTURE, NOT PHYSICS: a campaign simulation (`md sweep --simulation profile_campaign_sim:run`)
that writes a run folder as the nanoconfinement runs do (params.json and profiles.csv, md.runs),
its profiles tests/md/standin_profiles' analytic stand-in with noise, so that a campaign stored by
a real `thrifty md sweep` has runs a surrogate can be scored on, in a second instead of hours."""

import hashlib
import json
from pathlib import Path

import numpy as np
from standin_profiles import standin_run, write_run

from thrifty.md.params import check_point


def run(params: dict, work_dir: Path, checkpoints) -> dict:
    point = check_point(params)
    seed = int.from_bytes(hashlib.sha256(json.dumps(params, sort_keys=True).encode()).digest()[:4], "little")
    write_run(Path(work_dir), standin_run(point, np.random.default_rng(seed), Path(work_dir).name))
    return {"steps": 1000, "converged": True}
