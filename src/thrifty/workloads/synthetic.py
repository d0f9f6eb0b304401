# SPDX-License-Identifier: MIT
"""Synthetic image data of a real data set's shape and size: timing without a download.

Each sample is a deterministic function of its index (seeded noise image, label = index mod
classes), so every rank and every run sees the same data, and a batch costs what generating it
costs: the input pipeline is not free, and the profiler measures it. On a GPU the batch is made
there, as a real pipeline's decoded batch would arrive.
"""

import torch
from torch.utils.data import Dataset


class SyntheticImages(Dataset):
    def __init__(self, size: int, shape: tuple[int, int, int], num_classes: int, seed: int = 0) -> None:
        self.size, self.shape, self.num_classes, self.seed = size, shape, num_classes, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = self.get_batch(torch.tensor([index]))
        return images[0], labels[0]

    def get_batch(self, indices: torch.Tensor, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch made on `device` (a GPU's generator draws other noise than the CPU's)."""
        device = torch.device("cpu") if device is None else torch.device(device)
        generator = torch.Generator(device=device).manual_seed(self.seed * 1_000_003 + int(indices[0]))
        images = torch.randn((len(indices), *self.shape), generator=generator, device=device)
        return images, (indices.to(device) % self.num_classes).long()
