# SPDX-License-Identifier: MIT
"""Seeded step-time traces with the irregularities real GPU clusters show, for bench_search_real.py
and bench_steptime_irregular.py; kept apart from the bundled synthetic traces the search was
tuned on (thrifty.search.synthetic).

A workload is drawn from its seed: compute a_c + b_c b^p (p in [0.8, 1.2]), ring all-reduce sync
inside a node and across nodes (perf.steptime), over five GPU types (prices of one node, and the
speed the price-parity prior would project), 1-8 nodes, global batch 64-4096. On top of the model:

- multi-modal sync: every multi-worker configuration's sync time lands in one of three modes,
  1x, 2x or 4x the ring model's, with probabilities 0.6 / 0.3 / 0.1 (shared fabric, contended
  switches: sync times of real clusters cluster in modes, not around one mean);
- uneven node placements: a multi-node configuration's nodes land in racks of uneven distance:
  its across-node sync is scaled by a lognormal factor (log sd 0.35) and its compute by the
  slowest of its nodes, max of `nodes` lognormal draws (log sd 0.04): more nodes, a slower
  straggler;
- a misprojected type: one type (by seed) runs 0.5x or 1.7x the speed its price projects, and
  every type's speed is off its projection by a lognormal factor (log sd 0.25);
- launch to launch: each configuration is measured in `launches` launches, each its mean
  scaled by a lognormal factor (log sd `launch_sd`, 0.04): the spread the step-time model's
  interval has to cover; the trace's step time is the median launch.

TUNE_SEEDS are the seeds the search's recoup check was tuned on; HELD_OUT_SEEDS only report (101,
104 and 105 were inspected once to find why the time objective missed, the change that followed is
physical, not a knob fitted to them); FRESH_SEEDS were added after that and never looked at before
the report.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from thrifty.perf.steptime import predict_step_time
from thrifty.search.config import Config
from thrifty.search.trace import TraceRow

TUNE_SEEDS = (1, 2, 3)
HELD_OUT_SEEDS = (101, 102, 103, 104, 105, 106)  # six workloads, never looked at while tuning
FRESH_SEEDS = (201, 202, 203, 204, 205, 206)  # six more, drawn after the held-out ones were inspected
# name, price of one node ($/h), projected speed per worker, workers per node
TYPES = (("t4", 0.53, 1.0, 1), ("a10g", 1.01, 1.9, 1), ("v100", 3.06, 4.2, 1), ("a100", 4.10, 7.5, 1),
         ("v100x4", 12.24, 4.2, 4))
NODES = (1, 2, 4, 8)
BATCHES = (64, 128, 256, 512, 1024, 2048, 4096)
SYNC_MODES, SYNC_MODE_P = (1.0, 2.0, 4.0), (0.6, 0.3, 0.1)
PLACEMENT_SYNC_SD, PLACEMENT_COMPUTE_SD = 0.35, 0.04
TYPE_SPEED_SD, MISPROJECTED = 0.25, (0.5, 1.7)


@dataclass(frozen=True)
class IrregularTrace:
    seed: int
    rows: list[TraceRow]  # the median launch of each configuration
    launches: dict[Config, np.ndarray]  # each launch's mean step time
    noise_scale: float  # B_noise of the workload


def workload_params(rng: np.random.Generator) -> np.ndarray:
    """perf.steptime parameters of one workload on a speed-1 GPU (compute-heavy to sync-heavy)."""
    a_c = rng.uniform(0.005, 0.03)
    b_c = rng.uniform(2e-4, 2e-3)
    p = rng.uniform(0.8, 1.2)
    a_i, a_x = rng.uniform(0.002, 0.01), rng.uniform(0.01, 0.08)
    return np.array([a_c, b_c * 64 ** (1 - p), p, a_i, a_i * 0.1, a_x, a_x * rng.uniform(0.05, 0.3), 0.0, 1.0])


@dataclass(frozen=True)
class Workload:
    """What a trace's seed fixes for all its configurations: the step-time parameters on a speed-1
    GPU, B_noise, and each type's true speed per worker."""
    params: np.ndarray
    noise_scale: float
    speeds: dict[str, float]

    def draw(self, config: Config, rng: np.random.Generator, launches: int, launch_sd: float
             ) -> tuple[np.ndarray, float | None]:
        """One configuration's own irregularities, drawn: (each launch's mean step time, its sync
        time); `None` sync on one worker."""
        nodes, workers, local = config.num_nodes, config.num_workers, config.local_batch
        compute = (self.params[0] + self.params[1] * local ** self.params[2]) / self.speeds[config.instance_type]
        network = self.params.copy()
        network[:2] = 0.0
        sync = float(predict_step_time(network, nodes, workers, local)) if workers > 1 else 0.0
        sync *= float(rng.choice(SYNC_MODES, p=SYNC_MODE_P)) if workers > 1 else 1.0
        if nodes > 1:
            sync *= float(rng.lognormal(0, PLACEMENT_SYNC_SD))
            compute *= float(rng.lognormal(0, PLACEMENT_COMPUTE_SD, size=nodes).max())
        return (compute + sync) * rng.lognormal(0, launch_sd, size=launches), sync if workers > 1 else None


def draw_workload(rng: np.random.Generator) -> Workload:
    params = workload_params(rng)
    noise_scale = float(np.exp(rng.uniform(np.log(300), np.log(3000))))
    speeds = {name: speed * float(rng.lognormal(0, TYPE_SPEED_SD)) for name, _, speed, _ in TYPES}
    odd = TYPES[int(rng.integers(len(TYPES)))][0]
    speeds[odd] *= float(rng.choice(MISPROJECTED))
    return Workload(params, noise_scale, speeds)


def irregular_trace(seed: int, launches: int = 5, launch_sd: float = 0.04) -> IrregularTrace:
    rng = np.random.default_rng(seed)
    workload = draw_workload(rng)
    rows, spread = [], {}
    for name, price, _, per_node in TYPES:
        for nodes, workers, batch in shapes(per_node, NODES, BATCHES):
            config = Config(name, nodes, workers, batch)
            spread[config], sync = workload.draw(config, rng, launches, launch_sd)
            rows.append(TraceRow(config, float(np.median(spread[config])), sync, price * nodes))
    return IrregularTrace(seed, rows, spread, workload.noise_scale)


def floor_prediction(seed: int, config: Config, draws: int = 1000, launches: int = 5, launch_sd: float = 0.04
                     ) -> float:
    """The best a model can predict `config`'s median launch without measuring it: the median over
    `draws` redraws of its own irregularities (sync mode, placement, launch spread), given
    everything the seed fixes (parameters and every type's true speed), which no model knows."""
    workload = draw_workload(np.random.default_rng(seed))
    rng = np.random.default_rng([seed, 1])
    return float(np.median([np.median(workload.draw(config, rng, launches, launch_sd)[0]) for _ in range(draws)]))


def first_launch(trace: IrregularTrace, row: TraceRow) -> tuple[float, float | None]:
    """(step, sync) a window of `row`'s configuration reports from its first launch: the launch's
    mean step time, and the sync scaled with it (thrifty train's step stream, the sim)."""
    step = float(trace.launches[row.config][0])
    return step, None if row.sync_time_s is None else row.sync_time_s * step / row.step_time_s


def shapes(per_node: int, node_counts: Iterable[int], batches: Iterable[int]) -> Iterator[tuple[int, int, int]]:
    """(nodes, workers, global batch) of a type with `per_node` workers a node: every node count and
    global batch that splits evenly into local batches of at least 2."""
    for nodes in node_counts:
        workers = nodes * per_node
        for batch in batches:
            if batch % workers == 0 and batch // workers >= 2:
                yield nodes, workers, batch
