# SPDX-License-Identifier: MIT
"""`thrifty md sweep` assembled: the options checked, the campaign's identity in its store, the
simulation chosen, Ray started (embedded here, joined at --address, or the emulated preemptible
pool), the campaign run and its report with the pool's bill. The CLI (cli/md_sweep.py) only parses
and prints.

Defaults: the nanoconfinement model (the stand-in only when asked for: not MD, and its own
parameters h, zp, zn, c, dp, dn); wall-clock accounting (time scale 1: a wall second is a model second, so the bill is
what the campaign took) unless preemptions are emulated, where a model hour passes in a wall second
(3600) so that a short test sees the pool's lifetimes.
"""

import contextlib
import io
import logging
import math
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from thrifty.errors import ThriftyError
from thrifty.io import check_writable_dir
from thrifty.md.campaign.simulations import BatchSimulation
from thrifty.md.campaign.work_dir import campaign_work_dir, check_owner, claim
from thrifty.md.engines.choices import ENGINES
from thrifty.md.engines.single_run import check_dtype_and_device

log = logging.getLogger(__name__)

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
EMULATED_TIME_SCALE = 3600.0  # model seconds per wall second on the emulated pool
WALL_TIME_SCALE = 1.0


@dataclass(frozen=True)
class SweepOptions:
    """`md sweep`'s options, durations already in model seconds."""

    space: Path
    budget_runs: int
    db: Path = Path("campaign.db")
    pool: str = "spot:4"
    address: str | None = None
    campaign: str = "default"
    sampler: str = "grid"
    seed: int = 0
    target_within_error: float = 0.9  # md.surrogate.active.DEFAULT_TARGET: the share of bins within 2 MD error bars
    initial_runs: int = 8
    simulation: str = "nanoconfinement"
    work_dir: Path | None = None
    lifetime_model: str = "gcp-2019"
    instance_type: str = "n1-standard-4"
    job_hours: float = 3.0
    checkpoint_cost_s: float = 60.0
    restart_cost_s: float = 60.0
    startup_s: float = 60.0
    time_scale: float | None = None  # None: 1, or 3600 with emulate_preemptions
    engine: str = "openmm"
    replicas: int = 1
    dtype: str = "float64"
    device: str = "cpu"
    equilibrate: int | None = None
    tolerance: float | None = None
    relative_tolerance: float | None = None
    cap_steps: int | None = None
    box_nm: float | None = None
    cutoff_nm: float | None = None
    emulate_preemptions: bool = False

    @property
    def model_seconds_per_wall_second(self) -> float:
        if self.time_scale is not None:
            return self.time_scale
        return EMULATED_TIME_SCALE if self.emulate_preemptions else WALL_TIME_SCALE


def check_address(address: str | None) -> None:
    """A ray:// address connects through Ray Client, whose package (grpcio: the `ray[client]` extra)
    thrifty's campaign extra does not install; refused in one line before the store is written
    (Ray's own refusal was a traceback, after it)."""
    if address is None:
        return
    if not address.startswith("ray://"):
        check_reachable(address)
        return
    from ray._private.utils import get_ray_client_dependency_error  # the check ray.init makes
    if get_ray_client_dependency_error() is not None:
        raise ThriftyError(f"--address {address} connects through Ray Client, which needs "
                           "pip install 'ray[client]' (or give the head's host:port from one of its nodes)")


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A head's host:port that accepts no connection is refused in one line (ray.init retried it
    for minutes, printing timeouts); "auto" and other forms are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return
    host = host.removeprefix("[").removesuffix("]")  # [::1]:6379
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ThriftyError(f"--address {address}: no Ray head accepts connections there "
                           f"({exc.strerror or exc}); start one with `ray start --head` or fix the address") from None


def check_engine(o: SweepOptions) -> None:
    """--engine, --replicas, --dtype and --device, refused in one line before anything starts (CUDA is
    checked here unless the campaign joins a cluster: its GPU nodes are not this machine)."""
    if o.engine not in ENGINES:
        raise ThriftyError(f"unknown --engine {o.engine!r}; choose openmm or torch")
    if o.replicas < 1:
        raise ThriftyError(f"--replicas must be a positive integer, got {o.replicas}")
    if o.engine == "openmm" and o.replicas > 1:
        raise ThriftyError("--replicas > 1 batches points on the torch engine: add --engine torch")
    if o.engine == "openmm" and (o.dtype, o.device) != ("float64", "cpu"):
        raise ThriftyError("--dtype and --device apply to --engine torch")
    if o.engine == "torch" and o.simulation != "nanoconfinement":
        raise ThriftyError(f"--engine torch runs --simulation nanoconfinement only, not {o.simulation}")
    check_dtype_and_device(o.dtype, o.device)
    if o.device == "cuda" and o.address is None:
        import torch
        if not torch.cuda.is_available():
            raise ThriftyError("--device cuda: torch finds no CUDA device here; give --device cpu, or --address "
                               "of a Ray cluster with GPU nodes")


def run_settings(o: SweepOptions) -> dict[str, Any]:
    """The nanoconfinement runs' settings the options give, by their field names (a campaign's request
    records them); one line for a bad value or another simulation."""
    options: dict[str, Any] = {"equilibration_steps": o.equilibrate, "tolerance_molar": o.tolerance,
                               "relative_tolerance": o.relative_tolerance, "cap_steps": o.cap_steps, "box_nm": o.box_nm, "cutoff_nm": o.cutoff_nm}
    given = {k: v for k, v in options.items() if v is not None}
    if given and o.simulation != "nanoconfinement":
        raise ThriftyError("--equilibrate, --tolerance, --relative-tolerance, --cap-steps, --box-nm and --cutoff-nm apply to "
                           f"--simulation nanoconfinement only, not {o.simulation}")
    if any(not v > 0 for k, v in given.items() if k not in ("equilibration_steps", "relative_tolerance")) or given.get("equilibration_steps", 0) < 0:
        raise ThriftyError("--tolerance, --cap-steps, --box-nm and --cutoff-nm must be positive, --equilibrate at least 0")
    _sampling(given).check()
    return given


def _sampling(given: dict[str, Any]):
    from thrifty.md.sampling_settings import SamplingSettings
    names = {f.name for f in fields(SamplingSettings)}
    return SamplingSettings(**{k: v for k, v in given.items() if k in names})


def choose_simulation(o: SweepOptions, given: dict[str, Any]) -> BatchSimulation:
    """The campaign's batch simulation: the MD runs on the chosen engine, or a named simulation."""
    if o.simulation == "nanoconfinement":
        from thrifty.md.campaign.nanoconfinement_runs import NanoconfinementRuns
        return NanoconfinementRuns(engine=o.engine, dtype=o.dtype, device=o.device, sampling=_sampling(given),
                                   **{k: v for k, v in given.items() if k in ("box_nm", "cutoff_nm")})
    from thrifty.md.campaign.simulations import resolve_simulation
    return resolve_simulation(o.simulation)


def request(o: SweepOptions, space: dict, given: dict[str, Any]) -> dict[str, Any]:
    """The campaign's identity in its store: a restart must ask for the same campaign."""
    found: dict[str, Any] = {"space": space, "sampler": o.sampler, "seed": o.seed, "simulation": o.simulation}
    if o.engine == "torch":  # a campaign's runs are of one engine and precision
        found["engine"] = "torch"
        if o.dtype != "float64":
            found["dtype"] = o.dtype
    if o.sampler == "active":
        found["initial_runs"] = o.initial_runs
    if given:  # a campaign's runs share their length and system size
        found["run"] = given
    return found


@contextlib.contextmanager
def ray_output(emulated: bool) -> Iterator[None]:
    """Ray prints its nodes' deaths on stdout (from Python and from its C++ core): keep stdout for
    the report by pointing file descriptor 1 at stderr meanwhile. On the emulated pool, whose node
    deaths are the preemptions it causes and counts, what Ray prints from Python (a 20-line raylet
    state dump a node) goes to the debug log instead (`thrifty -vv` shows it)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(LinesToDebugLog() if emulated else sys.stderr):
            try:
                yield
            finally:
                sys.stdout.flush()
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


class LinesToDebugLog(io.TextIOBase):
    """A text stream whose lines go to this module's debug log."""

    def __init__(self) -> None:
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._log(line)
        return len(text)

    def flush(self) -> None:
        self._log(self._partial)
        self._partial = ""

    @staticmethod
    def _log(line: str) -> None:
        plain = ANSI_ESCAPE.sub("", line)  # Ray colours its "(raylet)" prefix for a terminal
        if plain.strip():
            log.debug("ray: %s", plain)


def init_ray(o: SweepOptions, emulated_address: str | None, nodes: int) -> None:
    """Ray on the emulated pool, joined at --address, or embedded here with one CPU per node; every
    address it binds here is 127.0.0.1."""
    from thrifty.md.campaign.pool import loopback_ray
    ray = loopback_ray()
    # Ray's core worker installs its own SIGTERM handler in this process (a C++ crash dump, then an
    # abort): the command's own (cli.common.stop_on_sigterm: stop as Ctrl-C does) is put back after
    with _keeping_sigterm_handler():
        _init(ray, o, emulated_address, nodes)


@contextlib.contextmanager
def _keeping_sigterm_handler() -> Iterator[None]:
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler set outside Python, which cannot be put back
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _shielded_from_stops() -> Iterator[None]:
    """SIGINT and SIGTERM ignored meanwhile, their handlers put back after (Ray's shutdown sets its own
    SIGTERM handler, a crash dump): a second Ctrl-C as the sweep stops had cut the shutdown short, and
    Ray's agents lived on (a new user's pass)."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for number in previous:
        signal.signal(number, signal.SIG_IGN)
    try:
        yield
    finally:
        for number, handler in previous.items():
            if handler is not None:  # None: a handler set outside Python, which cannot be put back
                signal.signal(number, handler)


def _init(ray: Any, o: SweepOptions, emulated_address: str | None, nodes: int) -> None:
    if emulated_address is not None:
        ray.init(address=emulated_address, _node_ip_address="127.0.0.1", log_to_driver=False, logging_level="ERROR")
        log.info("Ray: joined the emulated %s pool at %s", o.pool, emulated_address)
    elif o.address:
        ray.init(address=o.address, log_to_driver=False, logging_level="ERROR")
        log.info("Ray: joined the cluster at %s", o.address)
    else:
        ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=nodes,
                 log_to_driver=False, logging_level="ERROR")
        log.info("Ray: started here on 127.0.0.1 with %d CPU(s)", nodes)

def runs_the_campaign_does(sampler: str, parameter_space, budget_runs: int) -> int:
    """The runs a campaign ends at: its budget, or a smaller grid's points (the progress bar's
    total: it ended at 4/6 right after saying the grid has 4 points)."""
    if sampler != "grid":
        return budget_runs
    return min(math.prod(len(p.grid()) for p in parameter_space.parameters), budget_runs)


def run_sweep(o: SweepOptions, show_progress: bool = True) -> dict[str, Any]:
    """Check the options, run the campaign and return its report (one JSON document's worth)."""
    from thrifty.catalog import load_catalog
    from thrifty.catalog.names import find_type
    from thrifty.extras import require
    from thrifty.md.campaign.checkpoint_schedule import CheckpointPlan
    from thrifty.md.campaign.point_samplers import SAMPLERS, Sampler, make_sampler
    from thrifty.md.campaign.pool import EmulatedPool, NodeLife, Placement, PoolSpec, bill, loopback_ray
    from thrifty.md.campaign.runner import CampaignConfig, report_of, run_campaign
    from thrifty.md.campaign.store import CampaignStore
    from thrifty.md.space import load_space
    from thrifty.progress import ProgressBar
    from thrifty.transient.registry import load_model
    if o.budget_runs < 1:
        raise ThriftyError(f"--budget-runs must be a positive integer, got {o.budget_runs}")
    if not 0 < o.target_within_error <= 1:  # checked whatever the sampler (NaN too): a bad value is a mistake in any campaign
        raise ThriftyError(f"--target-within-error must be in (0, 1], got {o.target_within_error:g}")
    if not o.db.name or o.db.is_dir():  # before the work folder beside it is derived from its name
        raise ThriftyError(f"cannot open the database {o.db}: it is a folder")
    if o.sampler not in SAMPLERS:
        raise ThriftyError(f"unknown sampler {o.sampler!r}; choose one of {', '.join(SAMPLERS)}")
    if o.address and o.emulate_preemptions:
        raise ThriftyError("give --address or --emulate-preemptions, not both")
    check_engine(o)
    # met only after the store is written (Ray) or after the first runs (the active sampler's surrogate)
    require("ray", *(["torch"] if o.sampler == "active" else []))
    check_address(o.address)
    given = run_settings(o)
    parameter_space = load_space(o.space)
    if o.simulation == "nanoconfinement":
        from thrifty.md.campaign.nanoconfinement_runs import check_space
        check_space(parameter_space, given.get("box_nm"), given.get("cutoff_nm", 2.5))
    if o.sampler == "active":
        from thrifty.md.surrogate.active_sweep import check_active
        if o.simulation == "standin":
            raise ThriftyError("--sampler active trains on run folders with params.json, which the stand-in does "
                               "not write: use --simulation nanoconfinement or your own")
        check_active(parameter_space, o.target_within_error, o.initial_runs, o.budget_runs)
    if o.simulation == "standin":
        from thrifty.md.campaign.standin import check_space as check_standin_space
        check_standin_space(parameter_space)
    spec = PoolSpec.parse(o.pool)
    vms = find_type(load_catalog(), o.instance_type, "gcp")
    if not vms:
        raise ThriftyError(f"unknown GCP instance type {o.instance_type!r} (see thrifty catalog list --cloud gcp)")
    _, lifetime = load_model(o.lifetime_model)
    time_scale = o.model_seconds_per_wall_second
    plan = CheckpointPlan(lifetime, o.job_hours * 3600, o.checkpoint_cost_s, o.restart_cost_s, time_scale)
    plan.intervals_wall_s(0.0)  # a job the schedule cannot take fails here, in one line
    simulation = choose_simulation(o, given)
    work, ran_here = campaign_work_dir(o.db, o.campaign, o.work_dir)
    # before the store and Ray: a bad one had failed the first run
    check_writable_dir(work, "--work-dir" if o.work_dir else "the default --work-dir (beside --db)")
    runs_to_do = runs_the_campaign_does(o.sampler, parameter_space, o.budget_runs)  # the progress bar's total
    if runs_to_do < o.budget_runs:  # a grid's points; after every refusal (it had ended at 6/8 in silence)
        log.warning("the grid has %d point%s: the campaign ends there, short of --budget-runs %d",
                    runs_to_do, "" if runs_to_do == 1 else "s", o.budget_runs)
    outcome = None
    if not ran_here:  # another campaign's run folders: refused before anything is written
        check_owner(work, o.db, o.campaign)
    with CampaignStore(o.db, o.campaign) as store, contextlib.ExitStack() as held:
        resumed = store.begin(request(o, parameter_space.to_dict(), given))
        # held while the campaign runs (a second driver on the folder is refused: it had run every run
        # again); claimed once the store took the request, so a refused request leaves no folder
        held.enter_context(contextlib.closing(claim(work, o.db, o.campaign, ran_here=ran_here)))
        chosen: Sampler
        if o.sampler == "active":
            from thrifty.md.surrogate.active_sweep import ActiveSampler
            active = ActiveSampler(parameter_space, store, work, target_within_error=o.target_within_error,
                                   initial_runs=o.initial_runs, seed=o.seed, box_nm=given.get("box_nm"))
            chosen = active
        else:
            chosen = make_sampler(o.sampler, parameter_space, o.seed)
        completed = store.completed()
        if o.sampler == "active":  # its next points would store a batch: its outcome says whether it met its target
            so_far = active.outcome(completed, o.budget_runs)
            already_finished = len(completed) >= o.budget_runs or so_far.stopped == "target"
        else:
            already_finished = len(completed) >= o.budget_runs or not chosen.next_points(completed, 1)
        if already_finished:  # nothing to run: no pool started, no session, nothing billed
            report, billed = report_of(completed), bill([], vms[0], time_scale, time.time())
            if o.sampler == "active":
                outcome = so_far.to_dict(o.target_within_error)
        else:
            session = store.begin_session(o.pool, o.instance_type, work)
            emulated = EmulatedPool(spec, lifetime, time_scale, Path(tempfile.mkdtemp(prefix="thrifty-pool-")),
                                    o.seed) if o.emulate_preemptions else None
            began = time.time()
            session_open = True
            with ray_output(emulated is not None):
                ray = loopback_ray()
                bar = None
                try:
                    try:
                        init_ray(o, None if emulated is None else emulated.start(), spec.nodes)
                    except Exception as exc:  # Ray's start-up errors share no type; the session ends unbilled
                        store.end_session(session, bill([], vms[0], time_scale, time.time()))
                        session_open = False
                        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                        raise ThriftyError(f"Ray did not start: {reason}") from None
                    tasks = math.ceil((o.budget_runs - len(completed)) / o.replicas)  # up to --replicas runs a task
                    if spec.nodes > tasks:  # said once the pool runs, not refused: spare nodes take over preempted tasks
                        log.warning("--pool %s has more nodes than the campaign has tasks left (%d): a task takes one "
                                    "node at a time, and the nodes left idle are billed too", o.pool, tasks)
                    bar = ProgressBar("md sweep", runs_to_do) if show_progress else None
                    placement = None if emulated is None else Placement.solve(
                        lifetime, plan.job_s, o.checkpoint_cost_s, o.restart_cost_s, o.startup_s)
                    report = run_campaign(CampaignConfig(o.budget_runs, work, plan, spec.nodes, replicas=o.replicas,
                                                         gpus_per_task=1 if o.device == "cuda" else 0),
                                          chosen, simulation, store, emulated, placement,
                                          on_stored=None if bar is None else
                                          lambda runs: bar.update(min(runs, runs_to_do)))
                    if o.sampler == "active":
                        outcome = active.outcome(report.runs, o.budget_runs).to_dict(o.target_within_error)
                finally:
                    try:
                        if bar is not None:
                            bar.close(failed=sys.exc_info()[0] is not None)
                        with _shielded_from_stops():  # a Ctrl-C in Ray's shutdown left its agents running
                            ray.shutdown()
                        if emulated is not None:
                            emulated.shutdown()
                            shutil.rmtree(emulated.shared_dir, ignore_errors=True)
                    finally:  # stopped too (Ctrl-C, SIGTERM, a failure, in the shutdown): the nodes ran, billed
                        if session_open:
                            lives = emulated.lives if emulated is not None else \
                                [NodeLife(str(i), began, time.time()) for i in range(spec.nodes)]
                            billed = bill(lives, vms[0], time_scale, time.time())
                            store.end_session(session, billed)  # thrifty serve's campaign bill sums the sessions
    summary = {"campaign": o.campaign, "resumed": resumed, "already_finished": already_finished, "pool": o.pool,
               "instance_type": o.instance_type, "simulation": o.simulation,
               "engine": o.engine if o.simulation == "nanoconfinement" else None,  # the others run no engine
               "time_scale": time_scale, **report.summary(), **billed}
    if outcome is not None:
        summary["active"] = outcome
    return summary
