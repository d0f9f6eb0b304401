# SPDX-License-Identifier: MIT
"""A pool of VMs for a campaign: its spec (`spot:8`), its bill, SciSpot placement, and an emulated
preemptible pool on this machine for tests and benchmarks.

The emulated pool is Ray's own multi-node test cluster (`ray.cluster_utils.Cluster`): a head node
with no CPUs (the driver's control plane, on demand in a real deployment) and one raylet node per
VM, one CPU each. On a spot pool every node is killed (SIGKILL of its raylet and workers, no
notice) when a lifetime drawn from the lifetime model runs out, in scaled time (`time_scale` model
seconds per wall second; 3600: one simulated hour is one real second), and a fresh node replaces
it, as a cloud's spot pool with a target size would. Every process binds 127.0.0.1.

The bill: each node is paid per node-second from its launch to its end, a one-minute minimum per
VM (catalog.vmtype.MINIMUM_BILLED_S), in model time, at the catalog's spot or on-demand price.
Placement (SciSpot, Kadupitiya et al., TPDS 2022; transient.reuse): the next run goes to the idle
node expected to finish it soonest (least V(T, a) at its age a) unless a fresh VM would do better
(V(T, a) > V(T, 0) + start-up); then the oldest idle node is retired and a fresh one takes it.
"""

import contextlib
import json
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from thrifty.catalog.vmtype import MINIMUM_BILLED_S, VMType
from thrifty.errors import ThriftyError
from thrifty.io import write_text_atomic
from thrifty.processes import process_tree
from thrifty.transient.lifetimes import HOUR, LifetimeModel
from thrifty.transient.reuse import solve_reuse
from thrifty.transient.simulation import LifetimeSampler

log = logging.getLogger(__name__)

POOL_KINDS = ("spot", "on-demand")
NODE_OBJECT_STORE_BYTES = 80 * 2**20


@dataclass(frozen=True)
class PoolSpec:
    kind: str
    nodes: int

    @classmethod
    def parse(cls, text: str) -> "PoolSpec":
        kind, _, count = text.partition(":")
        if kind not in POOL_KINDS or not count.isdigit() or int(count) < 1:
            raise ThriftyError(f"--pool must be spot:N or on-demand:N with N a positive integer, got {text!r}")
        return cls(kind, int(count))


@dataclass
class NodeLife:
    node_id: str
    start: float  # wall clock (time.time())
    end: float | None = None
    preempted: bool = False


def bill(lives: list[NodeLife], vm: VMType, time_scale: float, now: float) -> dict:
    """Node-seconds (wall and model) and the bill at spot and on-demand prices: per second in model
    time, a one-minute minimum per VM."""
    wall = [((life.end or now) - life.start) for life in lives]
    billed_model_s = sum(max(w * time_scale, MINIMUM_BILLED_S) for w in wall)
    spot = vm.spot_price_per_hour if vm.spot_price_per_hour is not None else float("nan")
    return {"node_seconds_wall": sum(wall), "node_hours_model": billed_model_s / HOUR,
            "cost_at_spot_usd": billed_model_s / HOUR * spot,
            "cost_at_on_demand_usd": billed_model_s / HOUR * vm.price_per_hour}


@dataclass(frozen=True)
class Placement:
    """SciSpot's reuse rule for runs of `job_s` model seconds: V(T, a), the expected time to finish
    a run started on a VM of age a (transient.reuse.solve_reuse, the checkpoint DP's value table)."""

    ages_s: tuple[float, ...]
    expected_s: tuple[float, ...]  # V(T, a) at ages_s
    fresh_s: float  # V(T, 0) + a fresh VM's start-up

    @classmethod
    def solve(cls, model: LifetimeModel, job_s: float, checkpoint_cost_s: float, restart_cost_s: float,
              startup_s: float) -> "Placement":
        grid_s = max(job_s / 60, 60.0)
        solver, value, _, _ = solve_reuse(model, [job_s / HOUR], checkpoint_cost_s, restart_cost_s, startup_s, grid_s)
        row = value[int(round(job_s / solver.grid_s))]
        return cls(tuple(solver.ages), tuple(row), float(row[0] + startup_s))

    def expected_at(self, age_s: float) -> float:
        return float(np.interp(age_s, self.ages_s, self.expected_s, right=np.inf))

    def fresh_better(self, age_s: float) -> bool:
        """Reuse when V(T, a) <= V(T, 0) + start-up (transient.reuse)."""
        return self.expected_at(age_s) > self.fresh_s

    def choose(self, idle_ages_s: dict[str, float]) -> tuple[str | None, str | None]:
        """(node to run on, node to retire first) among idle nodes and their model ages: the node
        expected to finish the run soonest if reusing it beats a fresh VM, else retire the oldest
        and use a fresh one."""
        if not idle_ages_s:
            return None, None
        best = min(idle_ages_s, key=lambda n: self.expected_at(idle_ages_s[n]))
        if not self.fresh_better(idle_ages_s[best]):
            return best, None
        return None, max(idle_ages_s, key=lambda n: idle_ages_s[n])


def loopback_ray():
    """Ray, set so that every address it resolves is 127.0.0.1 (it otherwise turns 127.0.0.1 into
    the machine's outward address, and its servers listen on every interface). Ray reads the
    variable once, when it is first imported, so the flag it set is cleared as well: an import of
    Ray before this call (md sweep had one) left an embedded Ray listening on 0.0.0.0. Worker
    processes inherit the variable."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # ray_constants.ENABLE_RAY_CLUSTER: loopback IP
    import ray
    from ray._private import ray_constants
    ray_constants.ENABLE_RAY_CLUSTER = False  # read at each address lookup (services.get_node_ip_address)
    return ray


@dataclass
class EmulatedPool:
    spec: PoolSpec
    lifetimes: LifetimeSampler | None  # None: nodes live until the pool shuts down
    time_scale: float
    shared_dir: Path
    seed: int = 0
    lives: list[NodeLife] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.shared_dir = Path(self.shared_dir)
        self.nodes_file = self.shared_dir / "nodes.json"
        self._rng = np.random.default_rng(self.seed)
        self._live: dict[str, tuple[Any, float]] = {}  # node id -> (ray Node, death wall time)
        self.preemptions = self.retired = 0

    def start(self) -> str:
        """Start the head and the pool's nodes; returns the cluster's address. The driver calls
        `tick()` while it waits (Ray starts nodes from the main thread only: it sets signal handlers)."""
        loopback_ray()
        from ray.cluster_utils import Cluster
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False,
            "object_store_memory": NODE_OBJECT_STORE_BYTES,
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3}})
        for _ in range(self.spec.nodes):
            self._launch()
        return self.cluster.address

    def _launch(self) -> str:
        node = self.cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1",
                                     object_store_memory=NODE_OBJECT_STORE_BYTES)
        now = time.time()
        life_s = float(self.lifetimes.sample(self._rng, 1)[0]) / self.time_scale \
            if self.spec.kind == "spot" and self.lifetimes is not None else float("inf")
        self._live[node.node_id] = (node, now + life_s)
        self.lives.append(NodeLife(node.node_id, now))
        self._write_nodes()
        log.debug("node %s launched (%s), %d live", node.node_id[:12],
                  f"lives {life_s:.1f} s of wall time" if life_s < float("inf") else "on demand", len(self._live))
        return node.node_id

    def _end(self, node_id: str, preempted: bool) -> None:
        node, _ = self._live.pop(node_id)
        # the raylet's workers report results straight to the driver and would outlive their
        # raylet for a while: a preempted VM takes every process with it
        raylets = [p.process.pid for p in node.all_processes.get("raylet", [])]
        workers = process_tree(raylets) - set(raylets)
        self.cluster.remove_node(node, allow_graceful=not preempted)
        if preempted:
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        life = next(x for x in self.lives if x.node_id == node_id)
        life.end, life.preempted = time.time(), preempted
        self._write_nodes()
        log.info("node %s %s after %.1f s of wall time", node_id[:12], "preempted (SIGKILL)" if preempted else "retired",
                 life.end - life.start)

    def _write_nodes(self) -> None:
        write_text_atomic(self.nodes_file, json.dumps({n: life.start for life in self.lives
                                                       for n in [life.node_id] if n in self._live}))

    def tick(self) -> None:
        """Preempt every node whose lifetime has run out, and replace it."""
        for node_id in [n for n, (_, death) in self._live.items() if time.time() >= death]:
            self.preempt(node_id)

    def preempt(self, node_id: str) -> str:
        """Kill a node without notice (its raylet and workers get SIGKILL) and launch a fresh one."""
        self._end(node_id, preempted=True)
        self.preemptions += 1
        return self._launch()

    def ages_model_s(self) -> dict[str, float]:
        now = time.time()
        return {life.node_id: (now - life.start) * self.time_scale for life in self.lives if life.node_id in self._live}

    def replace(self, node_id: str) -> str:
        """Retire an idle node and launch a fresh one (a reuse decision, not a preemption)."""
        self._end(node_id, preempted=False)
        self.retired += 1
        return self._launch()

    def shutdown(self) -> None:
        now = time.time()
        for life in self.lives:
            life.end = life.end or now
        self._live.clear()
        self.cluster.shutdown()


def node_age_model_s(nodes_file: Path | None, node_id: str, time_scale: float) -> float:
    """A node's age from the pool's nodes.json (0, a fresh VM, when there is no pool file)."""
    if nodes_file is None:
        return 0.0
    try:
        start = json.loads(Path(nodes_file).read_text()).get(node_id)
    except (OSError, ValueError):
        return 0.0
    return 0.0 if start is None else max(time.time() - start, 0.0) * time_scale
