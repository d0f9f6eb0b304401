# SPDX-License-Identifier: MIT
"""Expected preemption overhead E[makespan] / T - 1 of a job of T seconds on n fresh preemptible
VMs, for the planner, which needs it for tens of thousands of spot candidates at once.

One table per (lifetime model, nodes, checkpoint cost, restart cost): the model-aware DP of
`transient.schedule` on a work grid of `grid_s` up to `max_work_s`, and below one grid step a
single uncheckpointed segment of w seconds:

  E[makespan](w) = (I(w) + (1 - S(w)) R) / S(w),   I(w) = int_0^w S

(attempts until one survives w: each failure costs E[T | T < w] + R, and I(w) = E[min(T, w)]).
A job on n VMs stops when the first of them is preempted: S_n = S^n (ClusterLifetime). Tables
exist for node counts that are powers of two; other counts interpolate linearly in log2(n), which
overstates the overhead a little between them (it grows about linearly in n: at n = 3 the
interpolation gives about 6% more overhead than a table for 3 would).

Tables of the bundled default model at the planner's costs ship precomputed in
data/preemption/overhead_tables.json (written by `python -m thrifty.transient.overhead`, checked
against a fresh solve by the tests), so a cold planner process solves no DP; any other model or
cost is solved once per process (about 0.03 s per table).
"""

import json
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from thrifty.data import data_path
from thrifty.io import write_text_atomic
from thrifty.transient.lifetimes import LifetimeModel
from thrifty.transient.schedule import ClusterLifetime, Job, ScheduleError, Solver

PLANNER_CHECKPOINT_COST_S = 60.0
PLANNER_RESTART_COST_S = 60.0
MAX_WORK_S = 48 * 3600.0
GRID_S = 900.0
SHORT_POINTS = 512  # resolution of the single-segment part, below one grid step (error < 1e-6 of time)
SHIPPED_NODE_EXPONENTS = range(0, 9)  # 1 ... 256 VMs
TABLE_FORMAT = 1  # bump when the DP or the table layout changes: shipped tables then stop matching


@dataclass(frozen=True)
class OverheadTable:
    work_s: np.ndarray  # increasing
    overhead: np.ndarray  # E[makespan] / work - 1 at work_s

    def at(self, work_s: np.ndarray) -> np.ndarray:
        """Linear interpolation; beyond the table, its last value (the overhead at max_work_s)."""
        return np.interp(work_s, self.work_s, self.overhead)


def _key(model: LifetimeModel, nodes: int, checkpoint_cost_s: float, restart_cost_s: float,
         max_work_s: float, grid_s: float) -> str:
    return json.dumps({"format": TABLE_FORMAT, "model": model.to_dict(), "nodes": nodes,
                       "checkpoint_cost_s": checkpoint_cost_s,
                       "restart_cost_s": restart_cost_s, "max_work_s": max_work_s, "grid_s": grid_s},
                      sort_keys=True, default=float)


def solve_table(model: LifetimeModel, nodes: int, checkpoint_cost_s: float, restart_cost_s: float,
                max_work_s: float, grid_s: float) -> OverheadTable:
    cluster = model if nodes == 1 else ClusterLifetime(model, nodes)
    solver = Solver(cluster, Job(max_work_s, checkpoint_cost_s, restart_cost_s), grid_s=grid_s, start_age_s=0.0)
    try:
        value, _ = solver.solve()
    except ScheduleError:  # so many VMs that no segment finishes before one of them goes: no finite
        value = np.full((solver.steps + 1, 1), np.inf)  # time (the planner refuses such candidates;
        # --max-workers 2048 on spot had ended the whole plan in this error)
    work = np.arange(1, solver.steps + 1) * solver.grid_s
    # below one grid step: S exactly, I by the trapezoid rule on the table's own fine points
    edges = np.linspace(0.0, solver.grid_s, SHORT_POINTS + 1)
    survival = cluster.survival(edges)
    integral = np.concatenate([[0.0], np.cumsum(0.5 * (survival[1:] + survival[:-1]) * np.diff(edges))])
    short, survives = edges[1:-1], survival[1:-1]
    single = (integral[1:-1] + (1 - survives) * restart_cost_s) / np.maximum(survives, 1e-300)
    overhead = np.concatenate([single / short, value[1:, 0] / work]) - 1.0
    # w -> 0: the overhead tends to h(0) R, continued linearly from the first two points
    return OverheadTable(_work_grid(max_work_s, solver.grid_s),
                         np.concatenate([[2 * overhead[0] - overhead[1]], overhead]))


def _work_grid(max_work_s: float, grid_s: float) -> np.ndarray:
    """Where a table holds values: 0 and SHORT_POINTS - 1 points inside the first grid step, then the
    DP's grid (the solver's own step count, so shipped tables need not store it)."""
    steps = int(math.ceil(max_work_s / grid_s - 1e-9))
    return np.concatenate([np.linspace(0.0, grid_s, SHORT_POINTS + 1)[:-1], np.arange(1, steps + 1) * grid_s])


@lru_cache(maxsize=1)
def _shipped() -> dict[str, list[float]]:
    path = data_path("preemption/overhead_tables.json")
    return json.loads(path.read_text()) if path.exists() else {}


@lru_cache(maxsize=128)
def overhead_table(model: LifetimeModel, nodes: int, checkpoint_cost_s: float, restart_cost_s: float,
                   max_work_s: float, grid_s: float) -> OverheadTable:
    """The shipped table if there is one for exactly these inputs, else a fresh solve."""
    stored = _shipped().get(_key(model, nodes, checkpoint_cost_s, restart_cost_s, max_work_s, grid_s))
    grid = _work_grid(max_work_s, grid_s)
    if stored is not None and len(stored) == len(grid):
        return OverheadTable(grid, np.asarray(stored))
    return solve_table(model, nodes, checkpoint_cost_s, restart_cost_s, max_work_s, grid_s)


def expected_overhead_fraction(model: LifetimeModel, work_s, nodes, *,
                               checkpoint_cost_s: float = PLANNER_CHECKPOINT_COST_S,
                               restart_cost_s: float = PLANNER_RESTART_COST_S,
                               max_work_s: float = MAX_WORK_S, grid_s: float = GRID_S) -> np.ndarray:
    """E[makespan] / T - 1 for jobs of `work_s` on `nodes` fresh VMs (arrays broadcast), with the
    DP checkpoint schedule; beyond `max_work_s`, the overhead at `max_work_s`."""
    work = np.maximum(np.asarray(work_s, float), 1e-9)
    level = np.log2(np.maximum(np.broadcast_to(np.asarray(nodes, float), work.shape), 1.0))
    low, high = np.floor(level), np.ceil(level)
    weight = level - low
    out = np.zeros(work.shape)
    for exponent in np.flatnonzero(np.bincount(np.concatenate([low.ravel(), high.ravel()]).astype(int))):  # O(n)
        table = overhead_table(model, int(2 ** exponent), checkpoint_cost_s, restart_cost_s, max_work_s, grid_s)
        share = np.where(low == exponent, 1 - weight, 0.0) + np.where(high == exponent, weight, 0.0)
        rows = share > 0  # weight is 0 when low == high, so an integer level takes its own table once
        out[rows] += share[rows] * table.at(work[rows])
    return out


def shipped_tables(model: LifetimeModel) -> dict[str, list[float]]:
    """The tables to ship for `model` at the planner's costs, keyed as `overhead_table` looks them up."""
    out = {}
    for exponent in SHIPPED_NODE_EXPONENTS:
        nodes = 2**exponent
        table = solve_table(model, nodes, PLANNER_CHECKPOINT_COST_S, PLANNER_RESTART_COST_S, MAX_WORK_S, GRID_S)
        out[_key(model, nodes, PLANNER_CHECKPOINT_COST_S, PLANNER_RESTART_COST_S, MAX_WORK_S, GRID_S)] = \
            table.overhead.tolist()
    return out


def main() -> None:
    """Write the shipped tables of the bundled default model."""
    from thrifty.transient.registry import load_model
    path = data_path("preemption/overhead_tables.json")
    write_text_atomic(path, json.dumps(shipped_tables(load_model()[1])))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
