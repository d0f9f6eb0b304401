# SPDX-License-Identifier: MIT
"""The engines, systems and OpenMM platforms `md run` and `md sweep` offer: names only, importable
without OpenMM or torch (the CLI checks options against them before either is imported)."""

ENGINES = ("openmm", "torch")
SYSTEMS = ("lj", "ions", "nanoconfinement")  # nanoconfinement: md.engines.openmm_nanoconfinement
PLATFORMS = ("Reference", "CPU", "CUDA", "OpenCL")  # those `md run` offers; OpenMM builds have a subset
DEFAULT_PLATFORM = "Reference"  # bit-identical restarts (the CPU platform is not bit-reproducible)
