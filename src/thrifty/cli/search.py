"""`thrifty search`: train to the target while searching for the best configuration (search
package); with `--seeds K`, K independent searches on the same trace, with medians. `--db` records
every window and checkpoint (search.session), `--resume` continues a killed search, `--plot`
draws the path (search.plot), and on a terminal a live panel follows the search (search_view)."""

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from thrifty.cli.common import (CatalogOpt, JsonOpt, fmt_duration, fmt_usd, non_negative, parse_duration_s, positive,
                                print_json, stdout)
from thrifty.errors import ThriftyError

if TYPE_CHECKING:  # thrifty.search imports numpy and scipy: only inside the command
    from thrifty.search.config import Config

BACKENDS = ("sim",)  # local (real `thrifty train` processes) and cloud come later


def _start(text: str | None, rows) -> "Config":
    """'TYPE:NODES:WORKERS:BATCH' -> a Config of the trace; None -> the default start."""
    from thrifty.search.config import Config
    from thrifty.search.harness import default_start
    if text is None:
        return default_start(rows)
    parts = text.split(":")
    types = sorted({r.config.instance_type for r in rows})
    if parts[0] not in types:
        raise ThriftyError(f"--start: instance type {parts[0]!r} is not in the trace (it has {', '.join(types)})")
    try:
        nodes, workers, batch = (int(p) for p in parts[1:])
    except ValueError:
        raise ThriftyError(f"--start must be TYPE:NODES:WORKERS:GLOBAL_BATCH, got {text!r}") from None
    config = Config(parts[0], nodes, workers, batch)
    if config not in {r.config for r in rows}:
        raise ThriftyError(f"--start {text}: this configuration is not in the trace, so it cannot run")
    return config


def search(
    trace: Annotated[Path, typer.Option(help="CSV: instance_type,num_nodes,num_workers,local_batch,step_time_s"
                                             "[,sync_time_s][,price_per_hour]")],
    target_samples: Annotated[float, typer.Option(help="Samples to the target at small batch (E_min)",
                                                  callback=positive)],
    backend: Annotated[str, typer.Option(help="sim (a trace-driven cloud)")] = "sim",
    noise_scale: Annotated[Optional[float], typer.Option(help="Gradient noise scale B_noise (constant)",
                                                         callback=positive)] = None,
    noise_scale_trace: Annotated[Optional[Path], typer.Option(
        help="CSV progress,noise_scale (progress: fraction of the target)")] = None,
    objective: Annotated[str, typer.Option(help="cost or time")] = "cost",
    deadline: Annotated[Optional[str], typer.Option(help="e.g. 6h, 90m (a bare number is hours)")] = None,
    start: Annotated[Optional[str], typer.Option(
        help="TYPE:NODES:WORKERS:GLOBAL_BATCH (default: the cheapest $/h configuration at the common batch)")] = None,
    measurement_noise: Annotated[float, typer.Option(help="Lognormal sigma of each measured step",
                                                     callback=non_negative)] = 0.03,
    restart_cost: Annotated[str, typer.Option(help="Checkpoint + relaunch + resume, e.g. 60s")] = "60s",
    startup_cost: Annotated[str, typer.Option(help="Start-up of new VMs, e.g. 60s")] = "60s",
    seeds: Annotated[int, typer.Option(help="Independent searches", min=1, max=10_000)] = 1,
    seed: Annotated[int, typer.Option(help="First seed")] = 0,
    db: Annotated[Optional[Path], typer.Option(
        help="SQLite database: every window (probe and checkpoint) is stored as it ends")] = None,
    resume: Annotated[bool, typer.Option(
        help="Continue the search with these same options stored in --db from its last window")] = False,
    plot: Annotated[Optional[Path], typer.Option(help="PNG: the path through the cost-time plane")] = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Search while training: probe configurations worth their price, settle on the best."""
    from contextlib import ExitStack

    from thrifty.catalog import load_catalog
    from thrifty.io import check_writable_file
    from thrifty.progress import ProgressBar
    from thrifty.search.efficiency import NoiseSchedule, read_noise_trace
    from thrifty.search.harness import Scenario, medians, oracle, with_overheads
    from thrifty.search.rule import Objective
    from thrifty.search.session import require_stored, run_search
    from thrifty.search.trace import load_trace
    from thrifty.store import Store

    if backend not in BACKENDS:
        raise ThriftyError(f"backend {backend!r} is not available yet: use {', '.join(BACKENDS)}")
    if (noise_scale is None) == (noise_scale_trace is None):
        raise ThriftyError("give one of --noise-scale or --noise-scale-trace")
    if resume and db is None:
        raise ThriftyError("--resume needs --db: the database the search was stored in")
    if plot is not None:
        check_writable_file(plot, "--plot")
    goal = Objective(objective, None if deadline is None else
                     parse_duration_s(deadline, what="deadline", bare_unit="h"))
    rows = load_trace(trace, load_catalog(catalog or []))
    schedule = (NoiseSchedule.constant(noise_scale, target_samples) if noise_scale is not None
                else read_noise_trace(noise_scale_trace, target_samples))
    scenario = Scenario(rows, schedule, goal, measurement_noise,
                        parse_duration_s(restart_cost, what="--restart-cost", bare_unit="s", allow_zero=True),
                        parse_duration_s(startup_cost, what="--startup-cost", bare_unit="s", allow_zero=True))
    first = _start(start, rows)
    best = oracle(scenario)
    bar = ProgressBar("search", seeds) if seeds > 1 and not json_out else None
    runs, outcomes = [], []
    with ExitStack() as stack:
        store = None if db is None else stack.enter_context(Store(db))
        if resume:
            require_stored(store, scenario, first, range(seed, seed + seeds))
        view = None
        if seeds == 1 and not json_out and stdout.is_terminal:
            from thrifty.cli.search_view import LiveView
            view = stack.enter_context(LiveView(stdout))
        for s in range(seed, seed + seeds):
            outcome, _ = run_search(scenario, s, first, store, resume=resume, listeners=[view] if view else [])
            outcomes.append(outcome)
            runs.append(with_overheads(outcome, best))
            if bar is not None:
                bar.update(len(runs))
    if plot is not None:  # the first seed's path
        from thrifty.search.plot import path_points, plot_path
        prices = {r.config: r.price_per_hour for r in rows}
        plot_path(plot, path_points(outcomes[0].probes, schedule, prices),
                  (outcomes[0].time_s, outcomes[0].cost_usd), (best.time_s, best.cost_usd),
                  f"search (seed {seed}, {objective}) on {trace.name}")
    finals = Counter(json.dumps(r["final_config"], sort_keys=True) for r in runs)
    result = runs[0] if seeds == 1 else {  # the most frequent final configuration stands for all
        **medians(runs), "final_config": json.loads(finals.most_common(1)[0][0]), "per_seed": runs}
    result = {**result, "start_config": first.to_dict(), "oracle_config": best.final_config.to_dict(),
              "objective": objective, "deadline_s": goal.deadline_s}
    if json_out:
        print_json(result)
        return
    median = "median " if seeds > 1 else ""
    stdout.print(f"start  {first.label()}\noracle {best.final_config.label()}: "
                 f"{fmt_duration(best.time_s)}, {fmt_usd(best.cost_usd)}")
    if seeds == 1:
        stdout.print(f"search ended on {type(first)(**runs[0]['final_config']).label()}")
    stdout.print(f"search {median}{fmt_duration(result['time_s'])}, {fmt_usd(result['cost_usd'])} "
                 f"(+{result['overhead_time']:.1%} time, +{result['overhead_cost']:.1%} cost vs the oracle), "
                 f"{result['probes'] if seeds > 1 else len(result['probes'])} windows, "
                 f"{result['moves']} moves")
