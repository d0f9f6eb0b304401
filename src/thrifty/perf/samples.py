# SPDX-License-Identifier: MIT
"""Reduce per-step, per-rank measurements to one row per configuration for the fitters."""

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ConfigTimes:
    """Mean step, compute and sync time per (nodes, workers, local batch), as parallel arrays."""

    num_nodes: np.ndarray
    num_workers: np.ndarray
    local_batch: np.ndarray
    step_time_s: np.ndarray
    compute_time_s: np.ndarray
    sync_time_s: np.ndarray
    peak_memory_bytes: np.ndarray

    def subset(self, mask: np.ndarray) -> "ConfigTimes":
        return ConfigTimes(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def config_times(samples: Iterable[Mapping]) -> ConfigTimes:
    """A step takes as long as its slowest rank: max over ranks, then the mean over steps.

    The mean, not the median: training time is the sum of step times, and on shared machines step
    times are multi-modal (waits quantised by the scheduler tick), where the median jumps between
    modes while the mean moves smoothly."""
    steps: dict[tuple, dict[int, list[Mapping]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        key = (int(s["num_nodes"]), int(s["num_workers"]), int(s["local_batch"]))
        steps[key][int(s["step"])].append(s)
    rows = []
    for key in sorted(steps):
        per_step = steps[key].values()
        rows.append(key + (
            float(np.mean([max(r["step_time_s"] for r in ranks) for ranks in per_step])),
            float(np.mean([max(r["compute_time_s"] for r in ranks) for ranks in per_step])),
            float(np.mean([float(np.mean([r["sync_time_s"] for r in ranks])) for ranks in per_step])),
            float(max(r["peak_memory_bytes"] for ranks in per_step for r in ranks))))
    columns = list(zip(*rows, strict=True)) if rows else [()] * 7
    return ConfigTimes(*(np.asarray(c, float) for c in columns))


def steps_per_round(steps: int, rounds: int) -> list[int]:
    """How the profiler splits a setting's `steps` measured steps over its interleaved rounds."""
    rounds = max(1, min(rounds, steps))
    return [steps // rounds + (1 if r < steps % rounds else 0) for r in range(rounds)]


def round_means(samples: Iterable[Mapping], steps: int, rounds: int) -> dict[tuple, list[float]]:
    """Mean step time (slowest rank per step) of each round of each (nodes, workers, local batch):
    a setting's measured steps in step order, cut as steps_per_round cuts them."""
    steps_of: dict[tuple, dict[int, float]] = defaultdict(dict)
    for s in samples:
        key = (int(s["num_nodes"]), int(s["num_workers"]), int(s["local_batch"]))
        step = int(s["step"])
        steps_of[key][step] = max(steps_of[key].get(step, 0.0), float(s["step_time_s"]))
    out = {}
    for key, times in steps_of.items():
        ordered = [times[step] for step in sorted(times)]
        cuts = np.cumsum([0] + steps_per_round(steps, rounds))
        out[key] = [float(np.mean(ordered[a:b])) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a and a < len(ordered)]
    return out
