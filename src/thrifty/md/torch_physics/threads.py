# SPDX-License-Identifier: MIT
"""torch's intra-op thread count for a block of work, restored after it.

A torch run left at torch's default on a shared machine competes with every other process for the
same cores: the default system (406 ions) measured 335-1234 ms a step that way against 36-93 ms
with one thread (issue 24). `thrifty md run --threads N` runs its job inside use_threads(N), by
default with the cores this process may use (a single run); a campaign gives each Ray worker one.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch


def available_cores() -> int:
    """The cores this process may run on (its affinity mask, which a container or taskset narrows)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def use_threads(count: int) -> Iterator[None]:
    """torch.set_num_threads(count) inside the block; the previous count again after it, on errors too."""
    if count < 1:
        raise ValueError(f"give at least one thread, got {count}")
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
