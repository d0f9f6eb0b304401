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

`placed_trace` reads the placement the way a cluster sets it: a job's workers need not fill its
nodes evenly, and every configuration is measured on several launches, each drawing its own
all-reduce factor (a real cluster's sync follows the links a launch lands on, so the same
configuration launched again syncs differently; search.trace's launches).
"""

import numpy as np

from irregular_traces import shapes
from thrifty.perf.steptime import compute_time, predict_step_time
from thrifty.search.config import Config
from thrifty.search.trace import Launch, TraceRow

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
# placed_trace: nodes of 4 T4 (priced as t4x4), a job on N nodes with N, 2N or 4N workers or one GPU
# short of the even 2N or 4N (another job holds it), each configuration measured on LAUNCHES launches
PLACED, PLACED_NODES, LAUNCHES = ("t4x4", 3.912, 4), (1, 2, 4, 8, 16), 3


def workload_params(rng: np.random.Generator) -> np.ndarray:
    """perf.steptime parameters of one workload."""
    a_i = rng.uniform(0.005, 0.03)
    a_x = a_i * rng.uniform(2, 8)
    return np.array([rng.uniform(0.01, 0.1), rng.uniform(1e-4, 1e-3), rng.uniform(0.85, 1.1),
                     a_i, a_i * rng.uniform(0.05, 0.3), a_x, a_x * rng.uniform(0.02, 0.2),
                     rng.uniform(0, 0.05), rng.uniform(1.0, 2.5)])


def step_and_sync(params: np.ndarray, nodes: int, workers: int, local_batch: float,
                  rng: np.random.Generator, fullest_node: int | None = None) -> tuple[float, float]:
    """(step, exposed sync) of one configuration, its all-reduce drawn off the ring; the
    co-location contention is the fullest node's (`fullest_node` ranks; even: workers / nodes)."""
    sharing = workers / nodes if fullest_node is None else fullest_node
    compute = float(compute_time(params, local_batch)) * (1 + params[7] * (sharing - 1))
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


def placed_trace(seed: int) -> tuple[list[TraceRow], float]:
    """(rows, B_noise) of one workload (the same draw as search_trace's) on PLACED nodes: uneven
    placements and LAUNCHES launches a configuration (module docstring). Local batches are whole:
    a global batch of SEARCH_BATCHES split over an odd worker count is rounded to the nearest split."""
    rng = np.random.default_rng(seed)
    params = workload_params(rng)
    noise_scale = float(np.exp(rng.uniform(np.log(300), np.log(3000))))
    name, price, per_node = PLACED
    rows = []
    for nodes in PLACED_NODES:
        counts = range(1, per_node + 1) if nodes == 1 else (nodes, 2 * nodes - 1, 2 * nodes, 4 * nodes - 1, 4 * nodes)
        for workers in counts:
            fullest = -(-workers // nodes)
            for local in sorted({round(b / workers) for b in SEARCH_BATCHES} - {0, 1}):
                draws = [step_and_sync(params, nodes, workers, local, rng, fullest)
                         for _ in range(LAUNCHES if workers > 1 else 1)]
                launches = tuple(Launch(step, sync if workers > 1 else None) for step, sync in draws)
                rows.append(TraceRow.of_launches(Config(name, nodes, workers, local * workers), launches,
                                                 price * nodes))
    return rows, noise_scale
