# SPDX-License-Identifier: MIT
"""OpenMM platforms: those this build lacks, or cannot start, are one line naming what it has."""

import openmm
import pytest

from thrifty.errors import ThriftyError
from thrifty.md.engines.openmm_engine import build
from thrifty.md.engines.openmm_systems import available_platforms, get_platform, make_simulation


@pytest.mark.skipif("CUDA" in available_platforms(), reason="this OpenMM has CUDA")
def test_an_unavailable_platform_lists_those_openmm_has():
    with pytest.raises(ThriftyError, match=f"CUDA is not available here; this OpenMM {openmm.__version__} has "
                                           f"{', '.join(available_platforms())}$"):
        get_platform("CUDA")
    assert get_platform("Reference").getName() == "Reference"


def test_a_plugin_that_failed_to_load_says_why(monkeypatch):
    failure = "Error loading library /x/plugins/libOpenMMCUDA.so: libcuda.so.1: cannot open shared object file"
    monkeypatch.setattr(openmm.Platform, "getPluginLoadFailures", lambda: ("Error loading library /x/other.so: no", failure))
    monkeypatch.setattr(openmm.Platform, "getNumPlatforms", lambda: 1)  # as if only Reference loaded
    with pytest.raises(ThriftyError, match=r"CUDA is not available here \(its plugin did not load: libcuda\.so\.1: "
                                           r"cannot open shared object file\); this OpenMM \S+ has Reference$"):
        get_platform("CUDA")


def test_a_platform_that_cannot_start_is_one_line(monkeypatch):
    def no_device(*_):
        raise openmm.OpenMMException("Error initializing CUDA: CUDA_ERROR_NO_DEVICE (100)")
    monkeypatch.setattr(openmm, "Context", no_device)
    with pytest.raises(ThriftyError, match="OpenMM cannot start platform CPU: Error initializing CUDA"):
        make_simulation(build("lj"), "CPU")
