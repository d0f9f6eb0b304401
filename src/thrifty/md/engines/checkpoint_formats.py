# SPDX-License-Identifier: MIT
"""The names of the engines' checkpoint formats (each payload's "format" entry), in one place so that
each engine can refuse the other's checkpoint in one line without importing it (nor OpenMM or torch)."""

OPENMM_FORMAT = "thrifty-md/3"  # md.engines.openmm_checkpoint
TORCH_PREFIX = "thrifty-md-torch/"  # md.engines.torch_checkpoint's formats begin so
TORCH_BATCH_FORMAT = TORCH_PREFIX + "batch-1"
TORCH_SINGLE_FORMAT = TORCH_PREFIX + "1"  # `md run --engine torch` before a single run became a batch of one
