# SPDX-License-Identifier: MIT
import pytest
from search_support import BATCHES, NODES, TYPES

from thrifty.search.synthetic import synthetic_trace


@pytest.fixture(scope="session")
def rows():
    """60 configurations: 3 types x 4 node counts x 5 global batches, from the step-time model."""
    return synthetic_trace(TYPES, NODES, BATCHES)


@pytest.fixture()
def trace(tmp_path, rows):
    """The rows written as a trace CSV."""
    from thrifty.search.trace import write_trace
    path = tmp_path / "trace.csv"
    write_trace(path, rows)
    return path
