# SPDX-License-Identifier: MIT
import pytest

from thrifty.search.harness import Scenario
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.search.synthetic import VMSpec, synthetic_trace

TYPES = [VMSpec("small", 0.2, 1.0), VMSpec("mid", 0.4, 2.2), VMSpec("big", 0.8, 3.0)]
NODES, BATCHES = [1, 2, 4, 8], [64, 128, 256, 512, 1024]
TARGET, NOISE_SCALE = 2e7, 500.0  # the oracle trains 4.5-12 h


@pytest.fixture(scope="session")
def rows():
    """60 configurations: 3 types x 4 node counts x 5 global batches, from the step-time model."""
    return synthetic_trace(TYPES, NODES, BATCHES)


def scenario(rows, kind="cost", deadline_s=None, **knobs) -> Scenario:
    return Scenario(rows, NoiseSchedule.constant(NOISE_SCALE, TARGET), Objective(kind, deadline_s), **knobs)


@pytest.fixture()
def trace(tmp_path, rows):
    """The rows written as a trace CSV."""
    from thrifty.search.trace import write_trace
    path = tmp_path / "trace.csv"
    write_trace(path, rows)
    return path
