"""OpenMM platforms: those this build lacks, or cannot start, are one line naming what it has."""

import openmm
import pytest

from thrifty.errors import ThriftyError
from thrifty.md.systems import available_platforms, build, get_platform, make_simulation


def test_an_unavailable_platform_lists_those_openmm_has():
    assert "CUDA" not in available_platforms()  # this machine: plain pip OpenMM, no GPU plugins
    with pytest.raises(ThriftyError, match=f"CUDA is not available here; this OpenMM {openmm.__version__} has "
                                           f"Reference, CPU"):
        get_platform("CUDA")
    assert get_platform("Reference").getName() == "Reference"


def test_a_platform_that_cannot_start_is_one_line(monkeypatch):
    def no_device(*_):
        raise openmm.OpenMMException("Error initializing CUDA: CUDA_ERROR_NO_DEVICE (100)")
    monkeypatch.setattr(openmm, "Context", no_device)
    with pytest.raises(ThriftyError, match="OpenMM cannot start platform CPU: Error initializing CUDA"):
        make_simulation(build("lj"), "CPU")
