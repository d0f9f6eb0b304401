# SPDX-License-Identifier: MIT
"""What the search tests import by name (a module of its own: `from conftest import` finds whichever
folder's conftest was imported first when several test folders run in one pytest)."""

from thrifty.search.harness import Scenario
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.search.synthetic import VMSpec

TYPES = [VMSpec("small", 0.2, 1.0), VMSpec("mid", 0.4, 2.2), VMSpec("big", 0.8, 3.0)]
NODES, BATCHES = [1, 2, 4, 8], [64, 128, 256, 512, 1024]
TARGET, NOISE_SCALE = 2e7, 500.0  # the oracle trains 4.5-12 h


def scenario(rows, kind="cost", deadline_s=None, **knobs) -> Scenario:
    return Scenario(rows, NoiseSchedule.constant(NOISE_SCALE, TARGET), Objective(kind, deadline_s), **knobs)
