# SPDX-License-Identifier: MIT
"""The peak resident memory of this process, reset between the settings a profile measures.

`getrusage`'s ru_maxrss (train.step.peak_memory_bytes) only ever rises over a process's life, and
the profiler measures every batch size in one process, in interleaved rounds: without a reset
every setting read the largest batch's peak (digits: 440 MB at local batch 16 and at 256), the
fitted bytes per sample came out near zero, and `thrifty plan` put ResNet-18 at local batch 512 on
a 2 GiB VM (it needs about 6 MiB a sample). On Linux, writing 5 to /proc/self/clear_refs resets
the peak to the current resident size (proc(5), "clear_refs", since Linux 4.0; ru_maxrss follows
it). Memory the allocator keeps after a larger batch's step would still be resident, so freed heap
pages go back to the kernel first (glibc's malloc_trim(3)). Measured (ResNet-18, CIFAR-sized
inputs, two steps a setting): 490 / 530 / 710 / 910 / 1,250 MiB at local batch 2 / 8 / 32 / 64 / 128
in ascending and in descending order alike, against 1,245 MiB at every batch after the first
largest one without it. Without glibc (musl) the peak is reset but freed heap pages may stay
resident; without /proc (macOS) nothing is reset and each setting's reading is the peak so far (a
batch measured after a larger one reads high: the profiler says so, train.profiler).
"""

import ctypes
import functools
import gc
from pathlib import Path

CLEAR_REFS = Path("/proc/self/clear_refs")
RESET_PEAK_RSS = "5"  # proc(5): "reset the peak resident set size ("high water mark") to the current value"


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim(size_t pad) from the C library this process has loaded, or None where
    it has none; looked up at the first reset, not when the trainer imports this."""
    try:
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return None
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim



def reset_peak_rss() -> bool:
    """Return freed memory to the kernel and reset the peak resident size; whether it was reset."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    try:
        CLEAR_REFS.write_text(RESET_PEAK_RSS)
    except OSError:
        return False
    return True
