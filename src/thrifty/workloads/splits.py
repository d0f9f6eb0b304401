# SPDX-License-Identifier: MIT
"""Deterministic train/test splits for the built-in workloads."""

import torch


def train_test_split_indices(n: int, test_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded random permutation cut into (train, test) index tensors."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_test = int(round(n * test_fraction))
    return order[n_test:], order[:n_test]
