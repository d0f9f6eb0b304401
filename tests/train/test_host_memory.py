# SPDX-License-Identifier: MIT
"""The profiler's peak memory per setting: a smaller batch measured after a larger one reads its
own peak, not the larger one's (ru_maxrss only rises)."""

import sys

import pytest
import torch

from thrifty.train.host_memory import reset_peak_rss
from thrifty.train.runtime import Runtime
from thrifty.train.step import peak_memory_bytes

MIB = 2**20
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/clear_refs is Linux's")


def _touch(mib: int) -> None:
    block = torch.ones(mib * MIB // 4)  # float32, every page written
    del block


@linux_only
def test_a_small_setting_after_a_large_one_reads_its_own_peak():
    """Mutation caught: no reset (the 64 MiB setting read the 400 MiB one's peak)."""
    runtime = Runtime(torch.device("cpu"), "fp32")
    runtime.reset_peak_memory()
    _touch(400)
    large = peak_memory_bytes()
    runtime.reset_peak_memory()
    _touch(64)
    small = peak_memory_bytes()
    assert large - small > 200 * MIB, (large / MIB, small / MIB)


@linux_only
def test_the_reset_says_whether_it_reset():
    assert reset_peak_rss() is True
