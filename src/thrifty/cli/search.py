# SPDX-License-Identifier: MIT
"""`thrifty search`: train to the target while searching for the best configuration (search
package). `--backend sim` replays a trace (with `--seeds K`, K independent searches, with medians);
`--backend local` trains the workload for real with `thrifty train` launches on emulated VM types
(search.local), and a measured `--trace` of those types, if given, names the oracle. `--db`
records every window and checkpoint (search.session), `--resume` continues a killed search,
`--plot` draws the path (search.plot), and on a terminal a live panel follows the search.

`local` takes what the options leave out from the workload's job model, got as `thrifty plan`
gets it (cli.workload_job_model: the stored profile in --db, default the thrifty database, else a new one):
the target E_min = S_min B_noise and the noise scale B_noise (S(B) = S_min (1 + B_noise / B),
McCandlish et al. 2018), and the start, the configuration the plan's models recommend among the
emulated types (search.start). `sim` has no workload: it starts on cheapest_start."""

import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple, TypeVar

import typer

from thrifty.cli.common import (
    DEFAULT_DB,
    CatalogOpt,
    JsonOpt,
    fmt_duration,
    fmt_usd,
    int_list,
    number_check,
    parse_duration_s,
    print_json,
    stdout,
)
from thrifty.errors import ThriftyError

if TYPE_CHECKING:  # thrifty.search imports numpy and scipy: only inside the command
    from thrifty.search.config import Config
    from thrifty.search.loop import Outcome

BACKENDS = ("sim", "local")  # a cloud backend (SkyPilot) comes later
# --backend local's defaults (None in the signature: sim refuses them when given)
LOCAL_BATCHES, LOCAL_MAX_NODES, LOCAL_MAX_RANKS, LOCAL_WORK_DIR = "32,64,128", 2, 2, Path(".thrifty/search-local")

T = TypeVar("T")

# Some 3,000 times the largest training runs published (GPT-3: 3e11 tokens): beyond it a typo, and
# 1e300 printed costs hundreds of digits long.
MAX_TARGET_SAMPLES = 1e15
target_samples_check = number_check(lambda v: 0 < v <= MAX_TARGET_SAMPLES,
                                    f"a positive number up to {MAX_TARGET_SAMPLES:g}")


def noise_scale_check(value: float | None) -> float | None:
    """--noise-scale: a finite positive batch size up to noise_schedule.MAX_NOISE_SCALE (imported
    when given: thrifty.search brings numpy)."""
    from thrifty.search.noise_schedule import MAX_NOISE_SCALE
    return number_check(lambda v: 0 < v <= MAX_NOISE_SCALE, f"a positive number up to {MAX_NOISE_SCALE:g}")(value)


def _given(value: T | None, backend: str, option: str) -> T:
    """`value`, which the option checks at the top of `search` require for this backend."""
    if value is None:
        raise ThriftyError(f"--backend {backend} needs {option}")
    return value


def _start(text: str, prices: dict, where: str) -> "Config":
    """'TYPE:NODES:WORKERS:BATCH' -> one of the configurations `prices` holds; TYPE may carry the
    plan's `cloud:` prefix (`aws:p3.2xlarge:1:1:32`)."""
    from thrifty.search.config import Config
    parts = text.split(":")
    types = sorted({c.instance_type for c in prices})
    if len(parts) not in (4, 5) or not all(re.fullmatch(r"\s*[0-9]+\s*", p) for p in parts[-3:]):  # checked first: a typo
        # in a count had been read as a cloud:type name ("instance type '1' is not in the trace")
        raise ThriftyError(f"--start must be TYPE:NODES:WORKERS:GLOBAL_BATCH, got {text!r}")
    if len(parts) == 5:  # cloud:type, as the plan prints it (or a type whose own name has the colon)
        named = f"{parts[0]}:{parts[1]}"
        parts = [named if named in types else parts[1], *parts[2:]]
    elif parts[0] not in types:  # a bare type where the trace names it with its cloud: the one cloud that has it
        qualified = [t for t in types if t.split(":", 1)[-1] == parts[0]]
        if len(qualified) > 1:
            raise ThriftyError(f"--start: instance type {parts[0]!r} is on several clouds in {where}: give one of "
                               f"{', '.join(qualified)}")
        if qualified:
            parts = [qualified[0], *parts[1:]]
    if parts[0] not in types:
        raise ThriftyError(f"--start: instance type {parts[0]!r} is not in {where} (it has {', '.join(types)})")
    nodes, workers, batch = (int(p) for p in parts[1:])
    config = Config(parts[0], nodes, workers, batch)
    if config not in prices:
        raise ThriftyError(f"--start {text}: this configuration is not in {where}, so it cannot run")
    return config


def search(
    target_samples: Annotated[float | None, typer.Option(
        help="Samples to the target at small batch (E_min); local: default S_min x B_noise of the workload's "
             "job model", callback=target_samples_check)] = None,
    backend: Annotated[str, typer.Option(
        help="sim (a trace-driven cloud) or local (real thrifty train launches on emulated VM types)")] = "sim",
    trace: Annotated[Path | None, typer.Option(
        help="CSV with columns instance_type, num_nodes, num_workers (in all, not a node), local_batch, "
             "step_time_s, and optionally sync_time_s (at most the step; blank or 0 for one worker) and "
             "price_per_hour (of one node); several rows of one configuration are its launches, each "
             "relaunch in sim landing on one of them; sim runs on it, local takes its oracle from it")] = None,
    workload: Annotated[str | None, typer.Option(help="local: the workload to train (builtin:NAME or a .py file)")] = None,
    types: Annotated[Path | None, typer.Option(
        help="local: CSV with columns instance_type, speed, workers_per_node, price_per_hour (default: the "
             "bundled emulated types)")] = None,
    batches: Annotated[str | None, typer.Option(
        help=f"local: global batch sizes to consider [default: {LOCAL_BATCHES}]")] = None,
    max_nodes: Annotated[int | None, typer.Option(
        help=f"local: most emulated VMs per configuration [default: {LOCAL_MAX_NODES}]",
        min=1, max=64)] = None,
    max_ranks: Annotated[int | None, typer.Option(
        help=f"local: most training processes at once [default: {LOCAL_MAX_RANKS}]",
        min=1, max=64)] = None,
    allow_busy: Annotated[bool, typer.Option(
        "--allow-busy", help="local, when it profiles the workload (none stored): even on a busy machine")] = False,
    work_dir: Annotated[Path | None, typer.Option(
        help=f"local: run directory, checkpoints and step streams [default: {LOCAL_WORK_DIR}]")] = None,
    noise_scale: Annotated[float | None, typer.Option(
        help="Gradient noise scale B_noise (constant), the job's (local: default the workload's job model's); "
             "the search's prior, weighed against its own measured estimate (sim: also the simulated job's)", callback=noise_scale_check)] = None,
    noise_scale_trace: Annotated[Path | None, typer.Option(
        help="CSV with columns progress, noise_scale (progress: fraction of the target)")] = None,
    objective: Annotated[str, typer.Option(help="cost or time")] = "cost",
    deadline: Annotated[str | None, typer.Option(help="e.g. 6h, 90m (a bare number is hours)")] = None,
    start: Annotated[str | None, typer.Option(
        help="TYPE:NODES:WORKERS:GLOBAL_BATCH, WORKERS in all (16 nodes of 4 workers: 16:64; printed 16x4) "
             "(default: local, what thrifty plan's models recommend for the objective and deadline; sim, the "
             "cheapest $/h configuration at the middle batch)")] = None,
    measurement_noise: Annotated[float | None, typer.Option(
        help="sim: lognormal sigma of each measured step, 0-1 (1: steps x/÷5 at 90%; far above, nearly "
             "every draw is near 0) [default: 0.03]",
        callback=number_check(lambda v: 0 <= v <= 1, "a number in [0, 1]"))] = None,
    restart_cost: Annotated[str | None, typer.Option(help="sim: checkpoint + relaunch + resume, e.g. 60s "
                                                          "(a bare number is seconds; local measures its own) "
                                                          "[default: 60s]")] = None,
    startup_cost: Annotated[str, typer.Option(help="Start-up of new VMs, e.g. 60s; a bare number is seconds (local: added, not waited)")] = "60s",
    batch_change_cost: Annotated[str | None, typer.Option(help="sim: a change of the global batch alone, taken in "
                                                               "place on the running VMs, e.g. 5s (a bare number is "
                                                               "seconds; local measures its own) [default: 5s]")] = None,
    seeds: Annotated[int, typer.Option(help="sim: independent searches", min=1, max=10_000)] = 1,
    seed: Annotated[int, typer.Option(help="First seed (0 or more)", min=0)] = 0,
    db: Annotated[Path | None, typer.Option(
        help="SQLite database: every window (probe and checkpoint) is stored as it ends; local: the workload's "
             f"stored profile is read from it, or without --db from {DEFAULT_DB}")] = None,
    resume: Annotated[bool, typer.Option(
        help="Continue the search with these same options stored in --db from its last window")] = False,
    plot: Annotated[Path | None, typer.Option(help="PNG: the path through the cost-time plane")] = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Search while training: probe configurations worth their price, settle on the best."""
    from contextlib import ExitStack

    from thrifty.catalog import load_catalog
    from thrifty.io import check_png_path
    from thrifty.search.harness import Scenario, cheapest_start, oracle
    from thrifty.search.noise_schedule import NoiseSchedule, read_noise_trace
    from thrifty.search.rule import Objective
    from thrifty.search.session import job_targets
    from thrifty.search.trace import load_trace
    from thrifty.store import Store

    if backend not in BACKENDS:
        raise ThriftyError(f"unknown backend {backend!r}: use {' or '.join(BACKENDS)}")
    if noise_scale is not None and noise_scale_trace is not None:
        raise ThriftyError("give one of --noise-scale or --noise-scale-trace")
    if backend == "sim" and (target_samples is None or (noise_scale is None and noise_scale_trace is None)):
        raise ThriftyError("--backend sim needs --target-samples and one of --noise-scale or --noise-scale-trace "
                           "(it has no workload to take them from)")
    if resume and db is None:
        raise ThriftyError("--resume needs --db: the database the search was stored in")
    if backend == "sim" and trace is None:
        raise ThriftyError("--backend sim needs --trace: the step times it replays")
    if backend == "sim" and workload is not None:
        raise ThriftyError("--workload is for --backend local (sim replays --trace)")
    if backend == "local" and seeds > 1:
        raise ThriftyError("--seeds is for --backend sim: a local search trains the job once")
    sim_only = [name for name, value in (("--measurement-noise", measurement_noise), ("--restart-cost", restart_cost),
                                         ("--batch-change-cost", batch_change_cost)) if value is not None]
    if backend == "local" and sim_only:  # a new user's pass: they were ignored in silence
        raise ThriftyError(f"{', '.join(sim_only)} {'is' if len(sim_only) == 1 else 'are'} for --backend sim: "
                           "a local search measures its own steps, restarts and batch changes")
    if backend == "local" and workload is None:
        raise ThriftyError("--backend local needs --workload: the job to train")
    local_only = [name for name, value in (("--types", types), ("--batches", batches), ("--max-nodes", max_nodes),
                                           ("--max-ranks", max_ranks), ("--work-dir", work_dir),
                                           ("--allow-busy", allow_busy or None)) if value is not None]
    if backend == "sim" and local_only:  # a new user's pass: they were ignored in silence
        raise ThriftyError(f"{', '.join(local_only)} {'is' if len(local_only) == 1 else 'are'} for --backend local: "
                           "sim replays the configurations of --trace")
    batches = LOCAL_BATCHES if batches is None else batches
    work_dir = LOCAL_WORK_DIR if work_dir is None else work_dir
    max_nodes = LOCAL_MAX_NODES if max_nodes is None else max_nodes
    max_ranks = LOCAL_MAX_RANKS if max_ranks is None else max_ranks
    if plot is not None:
        check_png_path(plot, "--plot")
    goal = Objective(objective, None if deadline is None else
                     parse_duration_s(deadline, what="deadline", bare_unit="h"))
    rows = None if trace is None else load_trace(trace, load_catalog(catalog or []))
    startup_s = parse_duration_s(startup_cost, what="--startup-cost", bare_unit="s", allow_zero=True)
    # the sim's knobs given; the others at Scenario's defaults
    knobs = {name: parse_duration_s(text, what=option, bare_unit="s", allow_zero=True)
             for name, option, text in (("restart_cost_s", "--restart-cost", restart_cost),
                                        ("batch_change_cost_s", "--batch-change-cost", batch_change_cost))
             if text is not None} | ({} if measurement_noise is None else {"measurement_noise": measurement_noise})
    sizes = [] if backend == "sim" else _local_batches(_given(workload, backend, "--workload"), batches, work_dir,
                                                       resume)
    job = None
    if backend == "local" and (start is None or target_samples is None or
                               (noise_scale is None and noise_scale_trace is None)):
        from thrifty.cli.workload_job_model import workload_job_model
        with Store(db or DEFAULT_DB) as profiles:
            job = workload_job_model(profiles, _given(workload, backend, "--workload"), allow_busy=allow_busy)[0]
    target_samples, noise_scale, origin = job_targets(job, workload, target_samples, noise_scale, noise_scale_trace)
    schedule = (NoiseSchedule.constant(noise_scale, target_samples) if noise_scale is not None
                else read_noise_trace(_given(noise_scale_trace, backend, "--noise-scale or --noise-scale-trace"),
                                      target_samples))
    scenario = None if rows is None else Scenario(rows, schedule, goal, startup_cost_s=startup_s, **knobs)
    best: Outcome | None
    with ExitStack() as stack:
        store = None if db is None else stack.enter_context(Store(db))
        if backend == "sim":
            scenario = _given(scenario, backend, "--trace")
            prices = {r.config: r.price_per_hour for r in scenario.rows}
            first = cheapest_start(prices) if start is None else _start(start, prices, "the trace")
            origin.update(start_source="cheapest" if start is None else "--start", start_predicted=None)
            best = oracle(scenario)
            outcomes = _sim_searches(scenario, first, seed, seeds, store, resume, json_out, stack)
        else:
            from thrifty.search.local import LocalBackend, load_local_types
            local_workload = _given(workload, backend, "--workload")
            local = LocalBackend(local_workload, load_local_types(types), schedule, work_dir, global_batches=sizes,
                                 max_nodes=max_nodes, max_ranks=max_ranks, startup_cost_s=startup_s, seed=seed)
            stack.callback(local.close)
            prices = {c: local.price_per_hour(c) for c in local.candidates()}
            if start is None:
                from thrifty.search.start import plan_start
                if job is None:  # read above whenever --start is not given
                    raise ThriftyError("--backend local without --start needs the workload's job model")
                planned = plan_start(job, local, goal)
                first = planned.config
                origin.update(start_source="plan",
                              start_predicted={"time_s": planned.time_s, "cost_usd": planned.cost_usd})
            else:
                first = _start(start, prices, "the emulated types")
                origin.update(start_source="--start", start_predicted=None)
            best = None if scenario is None else oracle(scenario)
            outcomes = [_local_search(local, local_workload, goal, first, seed, store, resume, json_out, stack)]
    _report(outcomes, best, first, goal, seed, prices, schedule, plot, json_out,
            trace.name if trace else f"{workload} (local)", origin)


def _sim_searches(scenario, first, seed: int, seeds: int, store, resume: bool, json_out: bool, stack) -> list:
    from thrifty.progress import ProgressBar
    from thrifty.search.session import request_of, require_stored, run_search
    if resume:
        require_stored(store, [request_of(scenario, first, s) for s in range(seed, seed + seeds)])
    bar = ProgressBar("search", seeds) if seeds > 1 and not json_out else None
    view = _live_view(stack) if seeds == 1 and not json_out else None
    outcomes = []
    for s in range(seed, seed + seeds):
        outcome, live = run_search(scenario, s, first, store, resume=resume, listeners=[view] if view else [])
        outcomes.append(Ran(outcome, stored=live is None))
        if bar is not None:
            bar.update(len(outcomes))
    return outcomes


def _live_view(stack):
    if not stdout.is_terminal:
        return None
    from thrifty.cli.search_view import LiveView
    return stack.enter_context(LiveView(stdout))


def _local_batches(workload: str, batches: str, work_dir: Path, resume: bool) -> list[int]:
    """--batches checked against the training set, and --work-dir against an earlier search's job."""
    from thrifty.io import check_writable_dir
    from thrifty.workloads import load_workload
    train_size = load_workload(workload).train_size
    sizes = int_list(batches, "--batches")
    if max(sizes) > train_size:
        raise ThriftyError(f"--batches: global batch {max(sizes)} exceeds the training set ({train_size})")
    if not resume and work_dir.exists() and any(work_dir.iterdir()):
        raise ThriftyError(f"--work-dir {work_dir} holds an earlier search's job: give --resume (with its --db) "
                           "or another --work-dir")
    check_writable_dir(work_dir, "--work-dir")
    return sizes


def _local_search(local, workload: str, goal, first, seed: int, store, resume: bool, json_out: bool, stack):
    from thrifty.search.local import local_search_settings
    from thrifty.search.loop import Search
    from thrifty.search.session import local_request, require_stored, run_stored
    from thrifty.workloads.names import workload_key
    key = workload_key(workload)
    request = local_request(local, key, goal, first, seed)
    if resume:
        require_stored(store, [request])
    view = _live_view(stack) if not json_out else None
    search = Search(local, local_search_settings(goal, local), [view] if view else [])
    outcome, live = run_stored(search, request, key, seed, first, store, resume=resume)
    return Ran(outcome, stored=live is None)


class Ran(NamedTuple):
    """One seed's search: its outcome, and whether it is a finished search read back from --db
    under --resume (nothing ran)."""
    outcome: "Outcome"
    stored: bool


def _report(ran: list[Ran], best, first, goal, seed: int, prices: dict, schedule, plot: Path | None,
            json_out: bool, name: str, origin: dict) -> None:
    """`origin`: the target, the noise scale and the start, with where each came from."""
    from thrifty.search.harness import medians, with_overheads
    outcomes = [r.outcome for r in ran]
    runs = [{"seed": seed + i, **(with_overheads(o, best) if best is not None else {
        **o.to_dict(), "oracle_time_s": None, "oracle_cost_usd": None, "overhead_time": None, "overhead_cost": None}),
        "from_store": r.stored} for i, (o, r) in enumerate(zip(outcomes, ran, strict=True))]
    if plot is not None:  # the first seed's path
        from thrifty.search.plot import path_points, plot_path
        plot_path(plot, path_points(outcomes[0].probes, schedule, prices),
                  (outcomes[0].time_s, outcomes[0].cost_usd), None if best is None else (best.time_s, best.cost_usd),
                  f"search (seed {seed}, {goal.kind}) on {name}")
    finals = Counter(json.dumps(r["final_config"], sort_keys=True) for r in runs)
    result = runs[0] if len(runs) == 1 else {  # the most frequent final configuration stands for all
        **medians(runs), "final_config": json.loads(finals.most_common(1)[0][0]),
        "seeds_from_store": sum(r.stored for r in ran), "per_seed": runs}
    result = {**result, "start_config": first.to_dict(),
              "oracle_config": None if best is None else best.final_config.to_dict(),
              "objective": goal.kind, "deadline_s": goal.deadline_s, **origin}
    if goal.deadline_s is not None:
        for run in runs:
            run["deadline_met"] = bool(run["time_s"] <= goal.deadline_s)
        result["deadline_met"] = (runs[0]["deadline_met"] if len(runs) == 1 else
                                  sum(r["deadline_met"] for r in runs) / len(runs))
    if json_out:
        print_json(result)
        return
    median = "median " if len(runs) > 1 else ""
    stored = sum(r.stored for r in ran)
    if stored:
        stdout.print(("this search" if len(runs) == 1 else f"{stored} of {len(runs)} seeds' searches") +
                     " had finished: read from --db as stored, nothing ran")
    stdout.print(f"start  {first.label()} ({_start_note(origin)})")
    noise = "a trace" if origin["noise_scale"] is None else f"{origin['noise_scale']:.4g}"
    target_from, noise_from = origin["target_samples_source"], origin["noise_scale_source"]
    stdout.print(f"target {origin['target_samples']:.4g} samples at small batch, B_noise {noise} " + (
        f"(from the {target_from})" if target_from == noise_from else
        f"(target from the {target_from}, B_noise from the {noise_from})"))
    if best is not None:
        stdout.print(f"oracle {best.final_config.label()}: {fmt_duration(best.time_s)}, {fmt_usd(best.cost_usd)}")
    if len(runs) == 1:
        stdout.print(f"search ended on {type(first)(**runs[0]['final_config']).label()}")
    else:
        top, count = finals.most_common(1)[0]
        p90 = "" if best is None else (f"; p90 {signed_percent(result['p90_overhead_time'])} time, "
                                       f"{signed_percent(result['p90_overhead_cost'])} cost vs the oracle")
        stdout.print(f"search ended on {type(first)(**json.loads(top)).label()} on {count} of {len(runs)} seeds{p90}")
    versus = "" if best is None else f" ({versus_oracle(result['overhead_time'], result['overhead_cost'])})"
    windows = result["probes"] if len(runs) > 1 else len(result["probes"])
    in_place = result["moves_in_place"]
    stdout.print(f"search {median}{fmt_duration(result['time_s'])}, {fmt_usd(result['cost_usd'])}{versus}, "
                 f"{counted(windows, 'window')}, {counted(result['moves'], 'move')}"
                 + ("" if not in_place else f" ({in_place:g} of them the batch alone, in place)" if len(runs) == 1
                    else f"; median {in_place:g} batch changes in place"))
    if len(runs) == 1 and outcomes[0].settled:
        stdout.print(f"settled {settled_line(outcomes[0])}")
    if len(runs) == 1 and outcomes[0].declined is not None and not outcomes[0].stayed:
        stdout.print(f"why    {declined_line(outcomes[0].declined)}")
    if goal.deadline_s is not None:
        stdout.print(deadline_line(goal.deadline_s, [r["time_s"] for r in runs]))
    stayed = sum(bool(r.get("stayed")) for r in runs)
    if stayed:
        from thrifty.search.loop import SearchSettings
        stdout.print(("it" if len(runs) == 1 else f"{stayed} of {len(runs)} seeds") + " stayed on the start: the "
                     f"profile's moves (a restart or an in-place batch change each) would cost more than {SearchSettings.move_budget:.0%} of "
                     "the job left at the start's pace, counted as target / batch steps while B_noise is not yet "
                     "measured")
    if plot is not None:
        stdout.print(f"plot   {plot} (seed {seed})")


def settled_line(outcome: "Outcome") -> str:
    """Where the time and cost outside the windows went: each configuration the search settled on,
    its segments summed, in the order it first settled there."""
    spent: dict = {}
    for s in outcome.settled:
        wall, cost, progress = spent.get(s.config, (0.0, 0.0, 0.0))
        spent[s.config] = (wall + s.wall_time_s, cost + s.cost_usd, progress + s.progress)
    return "; ".join(f"{c.label()} {fmt_duration(wall)}, {fmt_usd(cost)} ({progress:.1%} of the target)"
                     for c, (wall, cost, progress) in spent.items())


def declined_line(declined: dict) -> str:
    """Why the search settled: the best probe it declined then, and the check that declined it (a new
    user's pass: a short time job stayed +264% over the oracle with no word of the move budget)."""
    from thrifty.search.config import Config
    amount = fmt_duration if declined["objective"] == "time" else fmt_usd
    probe = (f"the best probe it declined, {Config(**declined['config']).label()}, was expected to save "
             f"{amount(declined['expected_gain'])} (a {declined['chance']:.2f} chance of winning) for a price of "
             f"{amount(declined['price'])}")
    if declined["reason"] == "move budget":
        return (f"{probe}, but its way there and back, {amount(declined['round_trip'])}, is over the move budget: "
                f"{declined['move_budget']:.0%} of the {amount(declined['objective_left'])} the job still had to pay")
    if declined["reason"] == "recoup":
        return (f"{probe}, but that gain times its chance is under {declined['recoup_factor']:g} times the price "
                "(the recoup check)")
    return f"{probe}: not worth it"


def counted(n: float, noun: str) -> str:
    """'1 window', '3 windows', '2.5 windows' (a median over seeds)."""
    return f"{n:g} {noun}" + ("" if n == 1 else "s")


def deadline_line(deadline_s: float, times_s: list[float]) -> str:
    """Whether the search met its deadline: one run's margin, or how many seeds met it."""
    if len(times_s) == 1:
        margin = deadline_s - times_s[0]
        return (f"deadline {fmt_duration(deadline_s)}: met, {fmt_duration(margin)} to spare" if margin >= 0 else
                f"deadline {fmt_duration(deadline_s)}: MISSED by {fmt_duration(-margin)}")
    met = sum(t <= deadline_s for t in times_s)
    late = [t - deadline_s for t in times_s if t > deadline_s]
    return (f"deadline {fmt_duration(deadline_s)}: met by {met} of {len(times_s)} seeds" +
            (f"; the latest MISSED it by {fmt_duration(max(late))}" if late else ""))


def versus_oracle(overhead_time: float, overhead_cost: float) -> str:
    """The search's time and cost over the oracle's, signed (a search can end cheaper than the
    time objective's oracle, or later than the cost objective's)."""
    return f"{signed_percent(overhead_time)} time, {signed_percent(overhead_cost)} cost vs the oracle"


def signed_percent(share: float) -> str:
    """+1.2%; a share that rounds to zero is +0.0% (a rounding of -0.00001 printed -0.0%)."""
    return f"{share:+.1%}" if round(share, 3) != 0 else "+0.0%"


def _start_note(origin: dict) -> str:
    if origin["start_source"] == "plan":
        predicted = origin["start_predicted"]
        return (f"thrifty plan's recommendation: predicted {fmt_duration(predicted['time_s'])}, "
                f"{fmt_usd(predicted['cost_usd'])}")
    return "--start" if origin["start_source"] == "--start" else "the cheapest $/h at the middle batch"
