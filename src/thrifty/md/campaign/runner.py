# SPDX-License-Identifier: MIT
"""A campaign on Ray: a sampler's parameter points run as Ray tasks until the budget of runs is
stored, on a pool of (preemptible) nodes.

Every task is one batch of up to `replicas` points (a batch of one unless the simulation batches:
md.campaign.simulations), one job on one worker: each point keeps its run folder
`work_dir/<run id>/` and is stored on its own. A batch checkpoints in `work_dir/batch-<hash of its
run ids>/` (a batch of one in its run's folder), on storage every node can reach (this machine's
disk for the embedded engine and the emulated pool; a shared file system for a real cluster). The
task derives its checkpoint schedule from the pool's lifetime model and its node's age
(md.campaign.checkpoint_schedule.CheckpointPlan) and resumes from the newest intact checkpoint there.
Two mechanisms bring a run back:
- a node dies: Ray retries the task (`max_retries`, system failures only; a simulation that raises
  is not retried) on another node, where it resumes from its checkpoint;
- the driver dies: a restarted driver reads the store, asks the sampler again (deterministic
  samplers return the same unfinished points, hence the same run ids and folders; the active
  sampler, which is not deterministic, returns the batch it stored before it was submitted) and
  resubmits them; they resume from their checkpoints. A driver that forms the same batch (the
  sampler's points in order, R at a time) resumes it, while one whose batch was partly stored forms
  new batches of the points left (each stored once: the sampler skips stored points).
A finished run is stored once (md.campaign.store: keyed by campaign and run id, one transaction);
a completion that finds its run stored already is counted as a duplicate and not stored again.
A driver stopped by SIGTERM or Ctrl-C first has its runs in flight checkpoint (up to STOP_GRACE_S):
it writes the notice file that their schedules check after every chunk (checkpoint_schedule), waits
for a new checkpoint in each (storing the runs that finish meanwhile), and only then lets Ray go.
"""

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thrifty.errors import ThriftyError
from thrifty.io import write_text_atomic
from thrifty.md.campaign.checkpoint_schedule import (
    NOTICE_FILE,
    CheckpointPlan,
    ScheduledCheckpoints,
    lost_work,
)
from thrifty.md.campaign.point_samplers import Sampler, point_key
from thrifty.md.campaign.pool import EmulatedPool, Placement, node_age_model_s
from thrifty.md.campaign.simulations import BatchSimulation, SimulationFn, as_batch
from thrifty.md.campaign.store import CampaignStore
from thrifty.transient.protocol import checkpoint_files

log = logging.getLogger(__name__)

# how long a stopping driver waits for its runs in flight to checkpoint: inside the 30 s notice that GCP
# and Azure give a preempted VM (AWS gives 2 minutes), leaving a few seconds for Ray's shutdown
STOP_GRACE_S = 25.0


@dataclass(frozen=True)
class CampaignConfig:
    budget_runs: int
    work_dir: Path
    plan: CheckpointPlan
    concurrency: int  # runs in flight at once (the pool's size)
    max_retries: int = 50  # Ray retries of a run whose node died
    replicas: int = 1  # points per task (a batch)
    gpus_per_task: float = 0  # Ray resources a task asks for besides its one CPU (the torch engine on cuda)


@dataclass
class CampaignReport:
    completed: int = 0  # runs in the store at the end
    stored_now: int = 0  # of which this driver stored
    duplicates: int = 0  # completions of runs already stored
    steps: int = 0
    converged: int = 0
    attempts: int = 0
    lost_work_s: float = 0.0  # wall seconds of work redone after preemptions
    wall_s: float = 0.0
    preemptions: int = 0
    retired: int = 0  # idle nodes replaced by fresh ones (placement)
    runs: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "runs"}


def _attempt(work: Path, plan: CheckpointPlan, nodes_file: str | None,
             notice_file: Path) -> tuple[ScheduledCheckpoints, str]:
    """This attempt's checkpoints in `work` (scheduled for this node's age) and the node's id."""
    import ray
    node_id = ray.get_runtime_context().get_node_id()
    age_s = node_age_model_s(None if nodes_file is None else Path(nodes_file), node_id, plan.time_scale)
    attempts_dir = work / "attempts"
    attempt = len(list(attempts_dir.glob("*.json"))) + 1 if attempts_dir.exists() else 1
    return ScheduledCheckpoints(work / "checkpoints", plan.intervals_wall_s(age_s),
                                attempt_log=attempts_dir / f"{attempt:03d}.json", notice_file=notice_file), node_id


def batch_dir(work_dir: Path, run_ids: list[str]) -> Path:
    """Where a batch of these runs (in this order) keeps its checkpoints and attempt logs: a batch of
    one in its run's folder."""
    if len(run_ids) == 1:
        return Path(work_dir) / run_ids[0]
    return Path(work_dir) / f"batch-{hashlib.sha256(' '.join(run_ids).encode()).hexdigest()[:16]}"


def run_batch(simulation: BatchSimulation, points: list[dict], work_dir: str, plan: CheckpointPlan,
              nodes_file: str | None) -> list[dict]:
    """One attempt at a batch of runs in one job, inside a Ray worker: schedule for this node's age,
    resume, run. One outcome per point: the batch's attempts are each point's, its lost work is
    shared out evenly (the campaign sums lost work over the runs, and a batch redoes its work once,
    not once per point)."""
    run_ids = [point_key(p) for p in points]
    work = batch_dir(Path(work_dir), run_ids)
    checkpoints, node_id = _attempt(work, plan, nodes_file, Path(work_dir) / NOTICE_FILE)
    results = simulation.run_batch(points, [Path(work_dir) / r for r in run_ids], checkpoints)
    attempts, lost_s, _ = lost_work(work / "attempts")
    return [{"result": r, "attempts": attempts, "lost_work_s": lost_s / len(results), "node_id": node_id,
             "resumed": checkpoints.resumed_from is not None} for r in results]


def run_campaign(config: CampaignConfig, sampler: Sampler, simulation: BatchSimulation | SimulationFn,
                 store: CampaignStore,
                 pool: EmulatedPool | None = None, placement: Placement | None = None,
                 on_stored: Callable[[int], None] | None = None) -> CampaignReport:
    """Run points until `budget_runs` are stored (or the sampler has no more); Ray must be
    initialised (embedded, joined, or the emulated pool's cluster). A simulation function runs as
    batches of one. `on_stored(runs)` hears the number of stored runs at the start and after every
    completed task (progress)."""
    import ray
    started = time.monotonic()
    batches = as_batch(simulation)
    task = ray.remote(num_cpus=1, num_gpus=config.gpus_per_task, max_retries=config.max_retries,
                      retry_exceptions=False)(run_batch)
    nodes_file = None if pool is None else str(pool.nodes_file)
    report = CampaignReport()
    completed = store.completed()
    stored = on_stored or (lambda runs: None)
    stored(len(completed))
    if completed:
        log.info("campaign resumed: %d of %d runs stored already", len(completed), config.budget_runs)
    pending: dict = {}  # ObjectRef -> (run ids, points, node id or None)
    notice = Path(config.work_dir) / NOTICE_FILE
    notice.unlink(missing_ok=True)  # an earlier driver's, killed while it stopped

    def store_outcome(ref) -> None:
        ids, points, _ = pending.pop(ref)
        try:
            outs = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            raise ThriftyError(f"run {' '.join(ids)} ({', '.join(map(str, points))}) failed in the simulation: "
                               f"{first_line(exc.cause or exc)}") from None
        for run_id, params, out in zip(ids, points, outs, strict=True):
            if store.record_run(run_id, params, out["result"], out["attempts"], out["lost_work_s"]):
                report.stored_now += 1
                log.info("stored run %s after %d attempt(s), %.1f s of work lost", run_id, out["attempts"],
                         out["lost_work_s"])
            else:
                report.duplicates += 1
                log.info("run %s was stored already: this completion is a duplicate", run_id)

    try:
        completed = _submit_and_store(config, sampler, batches, task, nodes_file, pool, placement, pending,
                                      completed, store, stored, store_outcome)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM as cli.common.Terminated: the runs in flight save first
        if pending:
            _checkpoint_in_flight(pending, Path(config.work_dir), store_outcome)
        raise
    report = report_of(completed, report)
    report.wall_s = time.monotonic() - started
    if pool is not None:
        report.preemptions, report.retired = pool.preemptions, pool.retired
    return report


def _submit_and_store(config: CampaignConfig, sampler: Sampler, batches: BatchSimulation, task: Any,
                      nodes_file: str | None, pool: EmulatedPool | None, placement: Placement | None,
                      pending: dict, completed: list[dict], store: CampaignStore, stored: Callable[[int], None],
                      store_outcome: Callable[[Any], None]) -> list[dict]:
    """The campaign's loop: keep the pool busy with the sampler's points and store what finishes, until
    the budget is stored or the sampler has no point left; the stored runs at the end."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    per_task = config.replicas
    while len(completed) < config.budget_runs:
        flying = sum(len(ids) for ids, _, _ in pending.values())
        room = min((config.concurrency - len(pending)) * per_task, config.budget_runs - len(completed) - flying)
        if room > 0:
            in_flight = {run_id for ids, _, _ in pending.values() for run_id in ids}
            fresh = [p for p in sampler.next_points(completed, room + flying)
                     if point_key(p) not in in_flight][:room]
            for first in range(0, len(fresh), per_task):
                points = fresh[first:first + per_task]
                options, node = {}, None
                if pool is not None and placement is not None:
                    busy = {n for _, _, n in pending.values()}
                    idle = {n: a for n, a in pool.ages_model_s().items() if n not in busy}
                    node, retire = placement.choose(idle)
                    if retire is not None:
                        node = pool.replace(retire)
                        log.info("node %s retired by the placement, replaced by %s", retire, node)
                    if node is None:
                        break
                    options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
                ids = [point_key(p) for p in points]
                ref = task.options(**options).remote(batches, points, str(config.work_dir), config.plan, nodes_file)
                pending[ref] = (ids, points, node)
                log.debug("submitted %s", " ".join(ids))
        if not pending:
            break  # the sampler has no point left
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=None if pool is None else 0.05)
        if pool is not None:
            pool.tick()
        for ref in ready:
            store_outcome(ref)
            completed = store.completed()
            stored(len(completed))
    return completed


def _checkpoint_in_flight(pending: dict, work_dir: Path, store_outcome: Callable[[Any], None],
                          grace_s: float = STOP_GRACE_S) -> None:
    """Ask every run in flight to checkpoint (the notice file) and wait, up to `grace_s`, until each
    has written a new checkpoint or finished (stored); a second Ctrl-C or SIGTERM stops at once."""
    import ray
    folders = {ref: batch_dir(work_dir, ids) / "checkpoints" for ref, (ids, _, _) in pending.items()}
    before = {ref: _checkpoint_names(folder) for ref, folder in folders.items()}
    notice = work_dir / NOTICE_FILE
    write_text_atomic(notice, "the driver is stopping: save at the next chunk\n")
    log.warning("stopping: %d run(s) in flight checkpoint first (up to %.0f s; a second Ctrl-C or SIGTERM stops at once)",
                len(pending), grace_s)
    deadline = time.monotonic() + grace_s
    try:
        while pending and time.monotonic() < deadline:
            finished, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.1)
            for ref in finished:
                try:
                    store_outcome(ref)
                except Exception as exc:  # a run that failed as the driver stops: said, not raised over the stop
                    log.warning("while stopping: %s", first_line(exc))
            for ref in [r for r in pending if _checkpoint_names(folders[r]) - before[r]]:
                del pending[ref]  # a new checkpoint (not one removed as damaged): the next driver resumes there
    finally:
        notice.unlink(missing_ok=True)
    if pending:  # queued, still restoring, or in a chunk longer than the grace
        log.warning("%d run(s) wrote no checkpoint within %.0f s (queued, restoring, or mid-chunk): they resume "
                    "from their last one", len(pending), grace_s)


def _checkpoint_names(folder: Path) -> set[str]:
    return {path.name for path in checkpoint_files(folder)}


def report_of(completed: list[dict], report: CampaignReport | None = None) -> CampaignReport:
    """`report` (a new one by default) with the campaign's totals over its stored runs."""
    report = report or CampaignReport()
    report.runs = completed
    report.completed = len(completed)
    report.steps = sum(int(r["result"]["steps"]) for r in completed)
    report.converged = sum(bool(r["result"]["converged"]) for r in completed)
    report.attempts = sum(r["attempts"] for r in completed)
    report.lost_work_s = sum(r["lost_work_s"] for r in completed)
    return report


def first_line(exc: BaseException) -> str:
    """The exception's first line of message, or its type's name when it has none (a MemoryError)."""
    said = str(exc).strip()
    return said.splitlines()[0] if said else type(exc).__name__
