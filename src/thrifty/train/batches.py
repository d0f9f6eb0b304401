# SPDX-License-Identifier: MIT
"""Where a rank's batches come from: cut in place for tensor data, prefetched by worker processes
for real data sets.

- Tensor data (a TensorDataset) and data sets that make whole batches (`get_batch`, the synthetic
  built-ins, made on the device) cost a slice: they are fetched when the step needs them.
- Other data sets (files to read and decode, item by item) go through a torch DataLoader with
  `workers` processes that prepare the next `depth` steps' batches, collated into pinned memory,
  while this step computes; the step then only copies its batch to the device (non-blocking).

The split of the global batch can change after any step (train.policies), so the batches ahead
are this rank's slices at the current split; when the step asks for other samples (a new split,
a new epoch), the loader starts over from that step (its workers stay alive) and the step
waits for its batch once.
"""

from collections import deque
from collections.abc import Callable, Iterator

import torch
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset

from thrifty.train.runtime import Runtime
from thrifty.workloads.base import Batch, Workload, collate

# the next `count` steps' sample indices of this rank at the current split (may be fewer)
Upcoming = Callable[[int], list[torch.Tensor]]


def needs_loader(data: Dataset) -> bool:
    """Item-by-item data sets are prefetched; tensors and batch-making data sets are not."""
    return not (isinstance(data, TensorDataset) or hasattr(data, "get_batch"))


class _PlannedBatches(Sampler[list[int]]):
    """The index lists the loader is to prepare next, handed out as the loader asks; steps planned
    later are appended (an iterator that may end and then yield again, which the DataLoader's
    index feeding allows: it asks once per batch it receives)."""

    def __init__(self) -> None:
        self.pending: deque[list[int]] = deque()

    def __iter__(self) -> "_PlannedBatches":
        return self

    def __next__(self) -> list[int]:
        if not self.pending:
            raise StopIteration
        return self.pending.popleft()


class PrefetchingLoader:
    """Batches of an item-by-item data set, prepared ahead by worker processes (module docstring)."""

    def __init__(self, data: Dataset, runtime: Runtime, *, workers: int, depth: int = 8) -> None:
        self.runtime, self.depth = runtime, depth
        self._plan = _PlannedBatches()
        self._loader = DataLoader(data, batch_sampler=self._plan, num_workers=workers, collate_fn=collate,
                                  pin_memory=runtime.device.type == "cuda",
                                  persistent_workers=workers > 0, prefetch_factor=2 if workers > 0 else None)
        self._ahead: deque[list[int]] = deque()
        self._batches: Iterator = iter(())  # the loader's, from the first _start
        self.restarts = 0  # how often the plan had to start over (a new split, a new epoch)

    def get(self, indices: torch.Tensor, upcoming: Upcoming) -> Batch:
        """This step's batch of `indices` on the device; `upcoming` names the steps after it."""
        wanted = indices.tolist()
        if not self._ahead or self._ahead[0] != wanted:
            self._start(wanted, upcoming)
        self._ahead.popleft()
        self._top_up(upcoming)
        try:
            batch = next(self._batches)
        except StopIteration:  # the loader had drained its plan before the steps were appended
            self._start(wanted, upcoming)
            self._ahead.popleft()
            batch = next(self._batches)
        return self.runtime.move(batch)

    def _start(self, wanted: list[int], upcoming: Upcoming) -> None:
        planned = [wanted] + [ahead.tolist() for ahead in upcoming(self.depth)[1:]]
        self._plan.pending = deque(planned)
        self._ahead = deque(planned)
        self._batches = iter(self._loader)
        self.restarts += 1

    def _top_up(self, upcoming: Upcoming) -> None:
        """Keep `depth` steps planned: append the steps after the plan while it still agrees with
        the current split (the loader reads the plan lazily, so it sees what is appended)."""
        future = [ahead.tolist() for ahead in upcoming(self.depth + 1)[1:]]
        if future[:len(self._ahead)] != list(self._ahead):
            return  # the split changed: the next step finds a mismatch and plans anew
        for planned in future[len(self._ahead):]:
            self._plan.pending.append(planned)
            self._ahead.append(planned)


def batch_source(workload: Workload, runtime: Runtime, workers: int) -> PrefetchingLoader | None:
    """The prefetching loader where the training data needs one, None where a slice will do."""
    if not needs_loader(workload.train_data):
        return None
    return PrefetchingLoader(workload.train_data, runtime, workers=workers)
