# SPDX-License-Identifier: MIT
"""Split each global batch among ranks by their local batch sizes b_1..b_n.

Every epoch is a seeded permutation of the training set cut into floor(N / B) global batches of
B = sum b_k samples (the remainder is dropped, as in DistributedSampler(drop_last=True)). Rank k
takes the slice [sum_{j<k} b_j, sum_{j<=k} b_j) of each global batch, so all ranks take the same
number of steps and each sample of the epoch is used exactly once across ranks. The split may
change from one step to the next (`split_indices`): B stays fixed, so the epoch's global batches,
and with them the coverage, do not depend on how each one is divided.

The position within an epoch is a sample offset into its permutation (`offset_indices`): global
batch s of an unchanged B starts at s x B. A run moved to another global batch B' (checkpoint,
relaunch, resume) continues the same permutation at the first unused sample, so no sample of the
epoch is skipped or repeated across the move; the epoch ends when fewer than B' unused samples
remain (`epoch_done`), and those are dropped, as drop_last drops the remainder without a move.
"""

from collections.abc import Iterator, Sequence

import torch


class GlobalBatchSampler:
    def __init__(self, dataset_size: int, local_batches: Sequence[int], *, seed: int = 0) -> None:
        if any(b < 1 for b in local_batches):
            raise ValueError(f"local batch sizes must be positive, got {list(local_batches)}")
        if sum(local_batches) > dataset_size:
            raise ValueError(f"global batch {sum(local_batches)} exceeds the data set ({dataset_size})")
        self.dataset_size = dataset_size
        self.local_batches = list(local_batches)
        self.seed = seed
        self._cached: tuple[int, torch.Tensor] | None = None

    @property
    def global_batch(self) -> int:
        return sum(self.local_batches)

    @property
    def steps_per_epoch(self) -> int:
        return self.dataset_size // self.global_batch

    def epoch_order(self, epoch: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
        return torch.randperm(self.dataset_size, generator=generator)

    def rank_indices(self, rank: int, epoch: int, step: int) -> torch.Tensor:
        return self.split_indices(rank, epoch, step, self.local_batches)

    def split_indices(self, rank: int, epoch: int, step: int, split: Sequence[int]) -> torch.Tensor:
        """Rank `rank`'s samples of global batch `step` of `epoch`, divided as `split` says."""
        return self.offset_indices(rank, epoch, step * self.global_batch, split)

    def offset_indices(self, rank: int, epoch: int, offset: int, split: Sequence[int]) -> torch.Tensor:
        """Rank `rank`'s samples of the global batch that starts `offset` samples into `epoch`'s
        permutation, divided as `split` says."""
        if sum(split) != self.global_batch:
            raise ValueError(f"split {list(split)} does not add up to the global batch {self.global_batch}")
        if not 0 <= offset <= self.dataset_size - self.global_batch:
            raise ValueError(f"offset {offset} leaves no global batch of {self.global_batch} "
                             f"in an epoch of {self.dataset_size}")
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, self.epoch_order(epoch))
        start = offset + sum(split[:rank])
        return self._cached[1][start:start + split[rank]]

    def epoch_done(self, offset: int) -> bool:
        """Fewer than one global batch of unused samples left at `offset`: the epoch is over."""
        return offset + self.global_batch > self.dataset_size

    def iter_rank(self, rank: int, epoch: int = 0) -> Iterator[torch.Tensor]:
        """This rank's index tensors, step after step, across epochs, forever."""
        while True:
            order = self.epoch_order(epoch)
            offset = sum(self.local_batches[:rank])
            for step in range(self.steps_per_epoch):
                start = step * self.global_batch + offset
                yield order[start:start + self.local_batches[rank]]
            epoch += 1
