"""`thrifty md sweep`: a campaign of simulations over a parameter box, on Ray, on a (preemptible) pool."""

import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from thrifty.cli.common import JsonOpt, parse_duration_s, positive, print_json, stdout
from thrifty.errors import ThriftyError


@contextlib.contextmanager
def _stdout_to_stderr():
    """Ray prints its nodes' deaths on stdout (from Python and from its C++ core): keep stdout for
    the report by pointing file descriptor 1 at stderr meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _check_engine(engine: str, replicas: int, simulation: str, dtype: str, device: str, joins: bool) -> None:
    """--engine, --replicas, --dtype and --device, refused in one line before anything starts (CUDA is
    checked here unless the campaign joins a cluster: its GPU nodes are not this machine)."""
    if engine not in ("openmm", "torch"):
        raise ThriftyError(f"unknown --engine {engine!r}; choose openmm or torch")
    if replicas < 1:
        raise ThriftyError(f"--replicas must be a positive integer, got {replicas}")
    if engine == "openmm" and replicas > 1:
        raise ThriftyError("--replicas > 1 batches points on the torch engine: add --engine torch")
    if engine == "openmm" and (dtype, device) != ("float64", "cpu"):
        raise ThriftyError("--dtype and --device apply to --engine torch")
    if engine == "torch" and simulation != "nanoconfinement":
        raise ThriftyError(f"--engine torch runs --simulation nanoconfinement only, not {simulation}")
    if dtype not in ("float64", "float32"):
        raise ThriftyError(f"unknown --dtype {dtype!r}; choose float64 or float32")
    if device not in ("cpu", "cuda"):
        raise ThriftyError(f"unknown --device {device!r}; choose cpu or cuda")
    if device == "cuda" and not joins:
        import torch
        if not torch.cuda.is_available():
            raise ThriftyError("--device cuda: torch finds no CUDA device here; give --device cpu, or --address "
                               "of a Ray cluster with GPU nodes")


def _run_settings(simulation: str, equilibrate: int | None, tolerance: float | None, cap_steps: int | None,
                  box_nm: float | None, cutoff_nm: float | None) -> dict:
    """The nanoconfinement runs' settings the options give (field names of md.nanoconfinement_run's and
    md.torch_engine.batch_job's run classes); one line for a bad value or another simulation."""
    given = {"equilibration_steps": equilibrate, "tolerance_molar": tolerance, "cap_steps": cap_steps,
             "box_nm": box_nm, "cutoff_nm": cutoff_nm}
    given = {k: v for k, v in given.items() if v is not None}
    if given and simulation != "nanoconfinement":
        raise ThriftyError("--equilibrate, --tolerance, --cap-steps, --box-nm and --cutoff-nm apply to "
                           f"--simulation nanoconfinement only, not {simulation}")
    if any(not v > 0 for k, v in given.items() if k != "equilibration_steps") or given.get("equilibration_steps", 0) < 0:
        raise ThriftyError("--tolerance, --cap-steps, --box-nm and --cutoff-nm must be positive, --equilibrate at least 0")
    if given:
        from thrifty.md.nanoconfinement_run import NanoconfinementRun
        run = NanoconfinementRun(**given)
        if run.equilibration_steps >= run.cap_steps:
            raise ThriftyError(f"--equilibrate {run.equilibration_steps} leaves no steps to sample: give less than "
                               f"--cap-steps ({run.cap_steps})")
    return given


def sweep(space: Annotated[Path, typer.Option(help="TOML parameter box: [h] min = 3.0 max = 4.0, [zp] values = [1, 2]")],
          budget_runs: Annotated[int, typer.Option(help="Completed runs to reach (counting those already stored)")],
          db: Annotated[Path, typer.Option(help="SQLite database of the campaign (a restart continues it)")] = Path("campaign.db"),
          pool: Annotated[str, typer.Option(help="spot:N or on-demand:N nodes")] = "spot:4",
          address: Annotated[Optional[str], typer.Option(
              help="Join this Ray cluster (ray://host:10001 or host:port) instead of starting one here")] = None,
          campaign: Annotated[str, typer.Option(help="Campaign name inside --db")] = "default",
          sampler: Annotated[str, typer.Option(
              help="grid, random or active (a surrogate picks the most uncertain points; see README)")] = "grid",
          seed: Annotated[int, typer.Option()] = 0,
          target_within_error: Annotated[float, typer.Option(
              help="active: stop when this share of profile bins of a new batch is within its MD error bar")] = 0.95,
          initial_runs: Annotated[int, typer.Option(help="active: runs of the random initial design")] = 8,
          simulation: Annotated[str, typer.Option(help="standin (numpy stand-in), nanoconfinement (the MD model on the CPU platform, "
                                                    "to convergence) or package.module:function")] = "standin",
          work_dir: Annotated[Optional[Path], typer.Option(
              help="Run folders and checkpoints, on storage every node reaches (default: DB.runs beside --db)")] = None,
          model: Annotated[str, typer.Option(help="Lifetime model of the pool's VMs")] = "gcp-2019",
          instance_type: Annotated[str, typer.Option(help="GCP VM type of the pool (its catalog prices)")] = "n1-standard-4",
          job_hours: Annotated[float, typer.Option(help="Expected length of one run, model hours", callback=positive)] = 3.0,
          ckpt_cost: Annotated[str, typer.Option(help="Checkpoint cost, model time")] = "60s",
          restart_cost: Annotated[str, typer.Option(help="Restart cost, model time")] = "60s",
          startup: Annotated[str, typer.Option(help="A fresh VM's start-up, model time (placement)")] = "60s",
          time_scale: Annotated[float, typer.Option(
              help="Model seconds per wall second (3600: a simulated hour is a real second)", callback=positive)] = 3600.0,
          engine: Annotated[str, typer.Option(
              help="openmm, or torch: nanoconfinement on the batched torch engine, --replicas points per task")] = "openmm",
          replicas: Annotated[int, typer.Option(
              help="Points run as one batched job on one worker (--engine torch; 1 with openmm)")] = 1,
          dtype: Annotated[str, typer.Option(help="--engine torch: float64 or float32")] = "float64",
          device: Annotated[str, typer.Option(
              help="--engine torch: cpu, or cuda (each task then asks Ray for one GPU)")] = "cpu",
          equilibrate: Annotated[Optional[int], typer.Option(
              help="--simulation nanoconfinement: steps before sampling (default 20000)")] = None,
          tolerance: Annotated[Optional[float], typer.Option(
              help="--simulation nanoconfinement: a run has converged when every error bar is at most this, mol/L "
                   "(default 0.02)")] = None,
          cap_steps: Annotated[Optional[int], typer.Option(
              help="--simulation nanoconfinement: most steps of a run (default 200000)")] = None,
          box_nm: Annotated[Optional[float], typer.Option(
              help="--simulation nanoconfinement: box side, nm (default the model's: 15 up to 0.5 M, 10 above)")] = None,
          cutoff_nm: Annotated[Optional[float], typer.Option(
              help="--simulation nanoconfinement: real-space Coulomb cutoff, nm (default 2.5)")] = None,
          emulate_preemptions: Annotated[bool, typer.Option(
              help="Run on Ray's multi-node test cluster here, killing spot nodes at lifetimes drawn from --model")] = False,
          json_out: JsonOpt = False) -> None:
    """Run simulations over a parameter box as Ray tasks that checkpoint and resume; every completed run lands in --db once."""
    from thrifty.catalog import load_catalog
    from thrifty.catalog.names import find_type
    from thrifty.md.campaign import CampaignConfig, run_campaign
    from thrifty.md.campaign_store import CampaignStore
    from thrifty.md.pool import EmulatedPool, NodeLife, Placement, PoolSpec, bill, loopback_ray
    from thrifty.md.sampler import SAMPLERS, make_sampler
    from thrifty.md.simulation import CheckpointPlan, resolve_simulation
    from thrifty.md.space import load_space
    from thrifty.transient.registry import load_model
    if budget_runs < 1:
        raise ThriftyError(f"--budget-runs must be a positive integer, got {budget_runs}")
    if sampler not in SAMPLERS:
        raise ThriftyError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    if address and emulate_preemptions:
        raise ThriftyError("give --address or --emulate-preemptions, not both")
    _check_engine(engine, replicas, simulation, dtype, device, joins=address is not None)
    from thrifty.extras import require
    # met only after the store is written (Ray) or after the first runs (the active sampler's surrogate)
    require("ray", *(["torch"] if sampler == "active" else []))
    run_settings = _run_settings(simulation, equilibrate, tolerance, cap_steps, box_nm, cutoff_nm)
    parameter_space = load_space(space)
    if simulation == "nanoconfinement":
        from thrifty.md.nanoconfinement_run import check_space
        check_space(parameter_space, run_settings.get("box_nm"), run_settings.get("cutoff_nm", 2.5))
    if sampler == "active":
        from thrifty.md.active_sweep import check_active
        if simulation == "standin":
            raise ThriftyError("--sampler active trains on run folders with params.json, which the stand-in does "
                               "not write: use --simulation nanoconfinement or your own")
        check_active(parameter_space, target_within_error, initial_runs, budget_runs)
    spec = PoolSpec.parse(pool)
    vms = find_type(load_catalog(), instance_type, "gcp")
    if not vms:
        raise ThriftyError(f"unknown GCP instance type {instance_type!r} (see thrifty catalog list --cloud gcp)")
    _, lifetime = load_model(model)
    checkpoint_s = parse_duration_s(ckpt_cost, what="--ckpt-cost", bare_unit="s")
    restart_s = parse_duration_s(restart_cost, what="--restart-cost", bare_unit="s", allow_zero=True)
    startup_s = parse_duration_s(startup, what="--startup", bare_unit="s", allow_zero=True)
    plan = CheckpointPlan(lifetime, job_hours * 3600, checkpoint_s, restart_s, time_scale)
    plan.intervals_wall_s(0.0)  # a job the schedule cannot take fails here, in one line
    if engine == "torch":
        from thrifty.md.torch_engine.batch_job import TorchBatchRun
        simulate = TorchBatchRun(dtype=dtype, device=device, **run_settings)
    elif simulation == "nanoconfinement":
        from thrifty.md.nanoconfinement_run import NanoconfinementRun
        simulate = NanoconfinementRun(**run_settings)
    else:
        simulate = resolve_simulation(simulation)
    work = work_dir or db.with_suffix(".runs")
    request = {"space": parameter_space.to_dict(), "sampler": sampler, "seed": seed, "simulation": simulation}
    if engine == "torch":  # a campaign's runs are of one engine and precision
        request["engine"] = "torch"
        if dtype != "float64":
            request["dtype"] = dtype
    if sampler == "active":
        request["initial_runs"] = initial_runs
    if run_settings:  # a campaign's runs share their length and system size
        request["run"] = run_settings
    with CampaignStore(db, campaign) as store:
        resumed = store.begin(request)
        if sampler == "active":
            from thrifty.md.active_sweep import ActiveSampler
            chosen = ActiveSampler(parameter_space, store, Path(work), target_within_error=target_within_error,
                                   initial_runs=initial_runs, seed=seed)
        else:
            chosen = make_sampler(sampler, parameter_space, seed)
        ray = loopback_ray()
        emulated = EmulatedPool(spec, lifetime, time_scale, Path(tempfile.mkdtemp(prefix="thrifty-pool-")), seed) \
            if emulate_preemptions else None
        began = time.time()
        with _stdout_to_stderr():
            try:
                if emulated is not None:
                    ray.init(address=emulated.start(), _node_ip_address="127.0.0.1", log_to_driver=False,
                             logging_level="ERROR")
                elif address:
                    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
                else:
                    ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                             num_cpus=spec.nodes, log_to_driver=False, logging_level="ERROR")
                placement = None if emulated is None else Placement.solve(lifetime, plan.job_s, checkpoint_s,
                                                                           restart_s, startup_s)
                report = run_campaign(CampaignConfig(budget_runs, Path(work), plan, spec.nodes, replicas=replicas,
                                                     gpus_per_task=1 if device == "cuda" else 0),
                                      chosen, simulate, store, emulated, placement)
                outcome = chosen.outcome(report.runs, budget_runs).to_dict(target_within_error) \
                    if sampler == "active" else None
            finally:
                ray.shutdown()
                if emulated is not None:
                    emulated.shutdown()
                    shutil.rmtree(emulated.shared_dir, ignore_errors=True)
    lives = emulated.lives if emulated is not None else \
        [NodeLife(str(i), began, time.time()) for i in range(spec.nodes)]
    summary = {"campaign": campaign, "resumed": resumed, "pool": pool, "instance_type": instance_type,
               "time_scale": time_scale, **report.summary(), **bill(lives, vms[0], time_scale, time.time())}
    if outcome is not None:
        summary["active"] = outcome
    if json_out:
        print_json(summary)
    else:
        stdout.print(f"{report.completed} runs stored ({report.stored_now} now, {report.duplicates} duplicates), "
                     f"{report.converged} converged, {report.steps:,} steps; {report.preemptions} preemptions, "
                     f"{report.lost_work_s:.2f} s of work redone; {summary['node_hours_model']:.2f} node-hours: "
                     f"${summary['cost_at_spot_usd']:.2f} at spot, ${summary['cost_at_on_demand_usd']:.2f} "
                     f"on demand; in {db}")
        if outcome is not None:
            held_out = outcome["held_out"]
            stdout.print(f"active learning stopped at the {outcome['stopped']}: " + (
                "no batch picked by the surrogate completed" if held_out is None else
                f"{held_out['within_error']:.1%} of profile bins within the MD error bar on the last "
                f"{held_out['runs']} runs it had not trained on (target {target_within_error:.1%})"))
