# SPDX-License-Identifier: MIT
"""Synthetic traces from the step-time model (thrifty.perf.steptime), for tests and benchmarks,
with the irregularities real clouds show and a smooth model misses:

- a memory cliff: local batches above `cliff_batch` run `cliff_factor` times slower per sample
  (activations spill, the allocator thrashes);
- a misprojected type: one type's real speed is `slow_factor` times its price-parity projection;
- multi-modal sync: a seeded share of multi-node configurations lands in a slow network mode
  (`sync_modes` times the ring model's sync time), as placement on shared fabric does.
"""

from dataclasses import dataclass

import numpy as np

from thrifty.perf.steptime import PARAM_NAMES, predict_step_time
from thrifty.search.config import Config
from thrifty.search.trace import TraceRow

BASE = dict(a_compute_s=0.02, b_compute_s_per_sample=0.004, compute_exponent=1.0, a_intra_s=0.01,
            b_intra_s=0.002, a_inter_s=0.05, b_inter_s=0.01, contention_per_rank=0.0, overlap_g=1.0)


@dataclass(frozen=True)
class VMSpec:
    instance_type: str
    price_per_hour: float  # one node
    speed: float  # compute speed relative to BASE (2: twice as fast)
    workers_per_node: int = 1


@dataclass(frozen=True)
class Irregularities:
    cliff_batch: float = np.inf
    cliff_factor: float = 1.0
    slow_type: str | None = None
    slow_factor: float = 1.0
    slow_sync_share: float = 0.0
    sync_modes: float = 1.0


def synthetic_trace(types: list[VMSpec], nodes: list[int], global_batches: list[int],
                    irregular: Irregularities = Irregularities(), seed: int = 0) -> list[TraceRow]:
    """One row per (type, nodes, global batch) with an integer local batch."""
    rng = np.random.default_rng(seed)
    params = np.array([BASE[n] for n in PARAM_NAMES])
    rows = []
    for vm in types:
        for n in nodes:
            workers = n * vm.workers_per_node
            for batch in global_batches:
                if batch % workers:
                    continue
                local = batch // workers
                compute = (params[0] + params[1] * local) / vm.speed
                if local > irregular.cliff_batch:
                    compute += params[1] * (local - irregular.cliff_batch) * (irregular.cliff_factor - 1) / vm.speed
                scaled = params.copy()
                scaled[:2] = 0.0  # network only
                sync = float(predict_step_time(scaled, n, workers, local)) if workers > 1 else 0.0
                if n > 1 and rng.random() < irregular.slow_sync_share:
                    sync *= irregular.sync_modes
                step = compute + sync  # overlap g = 1
                if vm.instance_type == irregular.slow_type:
                    step *= irregular.slow_factor
                rows.append(TraceRow(Config(vm.instance_type, n, workers, batch), float(step),
                                     sync if workers > 1 else None, vm.price_per_hour * n))
    return rows
