# SPDX-License-Identifier: MIT
"""Seeded traces of the shape of Pollux's testbed, for bench_steptime_fit.py and bench_search_real.py.

Pollux (Qiao et al., OSDI 2021) measured its workloads on nodes of 4 T4 GPUs (AWS g4dn.12xlarge),
up to 16 nodes. These traces take that shape, not its numbers (nothing was read from the Pollux
artifact): one GPU model, step times from perf.steptime's own model with a workload drawn from the
seed (compute a_c + b_c b^p with p in 0.85-1.1; a ring all-reduce 2-8x slower across nodes than
inside one; overlap g in 1-2.5; co-location contention up to 5% a rank sharing the node), and
every configuration's all-reduce off the ring by a lognormal factor (log sd SYNC_SD: its own
placement and contention).
Well-behaved next to irregular_traces.py: no sync modes, no misprojected type.
"""

import numpy as np

from irregular_traces import shapes
from thrifty.perf.steptime import compute_time, predict_step_time
from thrifty.search.config import Config
from thrifty.search.trace import TraceRow

SYNC_SD = 0.15
# the search's types: one T4 a node, priced as g4dn.xlarge in the bundled catalog, and four, priced
# as g4dn.12xlarge on AWS's us-east-1 on-demand price list (not in the bundled catalog)
SEARCH_TYPES = (("t4", 0.526, 1, (1, 2, 4, 8, 16)), ("t4x4", 3.912, 4, (1, 2, 4)))
# one type alone, as Pollux's testbed had (its jobs differ in how many nodes they span and how
# many GPUs of each they use, not in the GPU): nodes of 4 T4 up to 16 (Pollux's 64 GPUs), or of one
# T4 up to 64, or nodes of 4 T4 of which a job uses 1, 2 or 4 (billed for whole nodes)
ONE_TYPE = {"4-GPU nodes only": (("t4x4", 3.912, 4, (1, 2, 4, 8, 16)),),
            "1-GPU nodes only": (("t4", 0.526, 1, (1, 2, 4, 8, 16, 32, 64)),),
            "4-GPU nodes, 1/2/4 used": (("t4x4", 3.912, (1, 2, 4), (1, 2, 4, 8, 16)),)}
SEARCH_BATCHES = (64, 128, 256, 512, 1024, 2048, 4096)
SEARCH_SEEDS = (301, 302, 303, 304, 305, 306)


def workload_params(rng: np.random.Generator) -> np.ndarray:
    """perf.steptime parameters of one workload."""
    a_i = rng.uniform(0.005, 0.03)
    a_x = a_i * rng.uniform(2, 8)
    return np.array([rng.uniform(0.01, 0.1), rng.uniform(1e-4, 1e-3), rng.uniform(0.85, 1.1),
                     a_i, a_i * rng.uniform(0.05, 0.3), a_x, a_x * rng.uniform(0.02, 0.2),
                     rng.uniform(0, 0.05), rng.uniform(1.0, 2.5)])


def step_and_sync(params: np.ndarray, nodes: int, workers: int, local_batch: float,
                  rng: np.random.Generator) -> tuple[float, float]:
    """(step, exposed sync) of one configuration, its all-reduce drawn off the ring."""
    compute = float(compute_time(params, local_batch)) * (1 + params[7] * (workers / nodes - 1))
    step = max(float(predict_step_time(params, nodes, workers, local_batch)), compute)  # rounding
    if workers > 1:
        step = compute + (step - compute) * float(rng.lognormal(0, SYNC_SD))
    return step, step - compute


TypeSpec = tuple[str, float, int | tuple[int, ...], tuple[int, ...]]  # name, $/h a node, workers a node, node counts


def search_trace(seed: int, types: tuple[TypeSpec, ...] = SEARCH_TYPES) -> tuple[list[TraceRow], float]:
    """(rows, B_noise) of one workload over `types` x nodes x SEARCH_BATCHES (global); a type's
    workers a node is a number, or a tuple of the numbers a job may use."""
    rng = np.random.default_rng(seed)
    params = workload_params(rng)
    noise_scale = float(np.exp(rng.uniform(np.log(300), np.log(3000))))
    rows = []
    for name, price, per_node, node_counts in types:
        for used in np.atleast_1d(per_node):
            for nodes, workers, batch in shapes(int(used), node_counts, SEARCH_BATCHES):
                step, sync = step_and_sync(params, nodes, workers, batch / workers, rng)
                rows.append(TraceRow(Config(name, nodes, workers, batch), step, sync if workers > 1 else None,
                                     price * nodes))
    return rows, noise_scale
