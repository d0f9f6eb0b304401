# SPDX-License-Identifier: MIT
"""The step-time fit with and without the measured sync, side by side on the same samples.

`thrifty model fit` (perf.steptime.fit_step_time) fits its compute term to one rank's measured
compute (the step less its sync) as well as the whole model to the step times, where the samples
carry a sync column; fed the step times alone it must split compute from network on its own. Both
fits see the same samples and predict the same held-out configurations:

- Pollux-shaped traces (pollux_shaped.py, 20 workloads): nodes of 4 GPUs, up to 16 nodes, 1-4
  GPUs a node, local batches 16-512 (250 configurations), step times from perf.steptime's own
  model with a random workload, each configuration's all-reduce off the ring by a lognormal
  factor (log sd 0.15) and every measurement by 3%. Fitted on 5% of the configurations
  (13), redrawn until two local batches are in; MdAPE against the noise-free step.
  Within the model's own family: this measures what a few samples can identify, not how well the
  model matches a cluster. The workload's own parameters still miss each configuration's all-reduce
  draw: their error on the same held-out rows, which no fit beats at the median, is reported beside
  it (`known_params_median_mdape_percent`, the floor of this test bed).
- Irregular traces (benchmarks/irregular_traces.py, the search's harsher test bed): each GPU
  type's configurations on their own (28 each), fitted on 6 or 10 of them
  from their first launch (sync scaled with it), MdAPE against the median launch. Their sync
  modes and placement factors are, by construction, no function of the other configurations.
  The fit to every configuration of the type (one per trace, scored on each fit's held-out
  rows, which it saw: `all_rows_median_mdape_percent`) is what the model's family can do there
  with every sample; the rest of the held-out error is the few samples'.
  The configurations of a kind of network no fitted row had (ranks inside one node, or several
  nodes: a 5% draw often holds no one-node multi-rank row) are reported apart
  (`unseen_network_*`): the fit guesses that network (perf.steptime).
- Measured here: the local traces of bench_search_local (real `thrifty train` launches of digits
  and tabular on emulated VM types, 1-2 ranks over loopback), each type's rows (one and
  two ranks, or two only) predicted from the others of its type (leave one out).

Run:
    PYTHONPATH=src python benchmarks/bench_steptime_fit.py
"""

import csv
from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np

from common import RESULTS, save_figure, write_result
from irregular_traces import FRESH_SEEDS, HELD_OUT_SEEDS, TUNE_SEEDS, first_launch, irregular_trace
from pollux_shaped import SYNC_SD, step_and_sync, workload_params
from thrifty.errors import ModelError
from thrifty.perf.steptime import fit_step_time, predict_step_time

POLLUX_SEEDS = tuple(range(20))
POLLUX_NODES, POLLUX_GPUS_PER_NODE = (1, 2, 3, 4, 6, 8, 12, 16), (1, 2, 3, 4)
POLLUX_LOCAL_BATCHES = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
POLLUX_SHARE, STEP_SD = 0.05, 0.03
IRREGULAR_FIT_SIZES, DRAWS = (6, 10), 5
LOCAL_TRACES = ("digits", "tabular")

# one configuration: nodes, workers, local batch, measured step, measured sync, true step
Row = tuple[float, float, float, float, float, float]
# one trace's rows, and the known parameters of the workload where the trace was drawn from them
Trace = tuple[str, list[Row], np.ndarray | None]


def pollux_shaped_rows(seed: int) -> tuple[list[Row], np.ndarray]:
    """(rows, the workload's parameters) of one Pollux-shaped trace."""
    rng = np.random.default_rng(seed)
    params = workload_params(rng)
    rows = []
    for nodes in POLLUX_NODES:
        for per_node in POLLUX_GPUS_PER_NODE:
            if nodes > 1 and per_node == 3:
                continue
            workers = nodes * per_node
            for batch in POLLUX_LOCAL_BATCHES:
                step, sync = step_and_sync(params, nodes, workers, batch, rng)
                noise = rng.lognormal(0, STEP_SD)
                rows.append((nodes, workers, batch, step * noise, sync * noise, step))
    return rows, params


def irregular_by_type(seed: int) -> dict[str, list[Row]]:
    trace = irregular_trace(seed)
    by_type: dict[str, list[Row]] = {}
    for r in trace.rows:
        c, (first, sync) = r.config, first_launch(trace, r)
        by_type.setdefault(c.instance_type, []).append(
            (c.num_nodes, c.num_workers, c.local_batch, first, sync or 0.0, r.step_time_s))
    return by_type


def local_by_type(workload: str) -> dict[str, list[Row]]:
    by_type: dict[str, list[Row]] = {}
    with open(RESULTS / f"local_trace_{workload}.csv") as f:
        for r in csv.DictReader(f):
            step = float(r["step_time_s"])
            by_type.setdefault(r["instance_type"], []).append(
                (float(r["num_nodes"]), float(r["num_workers"]), float(r["local_batch"]), step,
                 float(r["sync_time_s"]), step))
    return by_type


def held_out_errors(rows: list[Row], fit: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray] | None:
    """(errors, inside, unseen): absolute relative errors on the rows outside `fit` for the fit with
    the sync column and the fit on step times alone, whether each held-out step lies in the former's
    90% interval, and whether its kind of network (ranks in one node, several nodes) was absent from
    the fitted rows; None where either cannot be fitted (one local batch)."""
    n, w, b, step, sync, truth = (np.array([r[i] for r in rows], float) for i in range(6))
    try:
        models = {name: fit_step_time(n[fit], w[fit], b[fit], step[fit], sync_time_s=column)
                  for name, column in (("with_sync", sync[fit]), ("step_only", None))}
    except ModelError:
        return None
    held, true = (n[~fit], w[~fit], b[~fit]), truth[~fit]
    with np.errstate(over="ignore", invalid="ignore"):  # a far extrapolation's interval may be unbounded
        low, high = models["with_sync"].interval(*held)
    unseen = models["with_sync"].unseen_network_sd_log(*held) > 0
    return ({name: np.abs(m.predict(*held) / true - 1) for name, m in models.items()},
            (low <= true) & (true <= high), unseen)


def draw_fit(rows: list[Row], size: int, rng: np.random.Generator) -> np.ndarray:
    """A random `size` of the rows with at least two local batches among them."""
    while True:
        fit = np.zeros(len(rows), bool)
        fit[rng.choice(len(rows), size, replace=False)] = True
        if len({rows[i][2] for i in np.flatnonzero(fit)}) >= 2:
            return fit


def summarise(mdapes: dict[str, list[float]], coverage: list[float]) -> dict:
    both = {k: 100 * np.array(v) for k, v in mdapes.items() if v}
    fitted = ("with_sync", "step_only")
    return {**{f"{k}_median_mdape_percent": float(np.median(v)) for k, v in both.items()},
            **{f"{k}_worst_mdape_percent": float(np.max(v)) for k, v in both.items() if k in fitted},
            "fits": len(both["with_sync"]),
            "with_sync_better_share": float(np.mean(both["with_sync"] < both["step_only"])),
            "with_sync_coverage_90": float(np.mean(coverage))}


def floors(rows: list[Row], params: np.ndarray | None) -> dict[str, Callable[[np.ndarray], float]]:
    """What no few-sample fit can beat, as the median absolute error on a fit's held-out rows (a
    mask over `rows`): the fit (with the sync column) to every row of the trace, and, where the trace
    was drawn from the model, the workload's own parameters."""
    n, w, b, step, sync, truth = (np.array([r[i] for r in rows], float) for i in range(6))
    everything = fit_step_time(n, w, b, step, sync_time_s=sync).predict(n, w, b)
    predictions = {"all_rows": everything}
    if params is not None:
        predictions["known_params"] = predict_step_time(params, n, w, b)
    return {name: (lambda held, p=p: float(np.median(np.abs(p[held] / truth[held] - 1))))
            for name, p in predictions.items()}


def sampled(sets: list[Trace], size: Callable[[list[Row]], int], draws: int) -> dict:
    mdapes: dict[str, list[float]] = {"with_sync": [], "step_only": [], "all_rows": [], "known_params": []}
    coverage: list[float] = []  # each fit's share of held-out steps inside its 90% interval
    unseen_errors: list[float] = []  # held-out configurations of a network kind no fitted row had
    unseen_inside: list[bool] = []
    for key, rows, params in sets:
        rng = np.random.default_rng([ord(ch) for ch in key])  # seeded by the trace's name, the same every run
        floor = floors(rows, params)
        for _ in range(draws):
            fit = draw_fit(rows, size(rows), rng)
            result = held_out_errors(rows, fit)
            if result is not None:
                errors, inside, unseen = result
                coverage.append(float(np.mean(inside)))
                unseen_errors.extend(errors["with_sync"][unseen])
                unseen_inside.extend(inside[unseen])
                for name, e in errors.items():
                    mdapes[name].append(float(np.median(e)))
                for name, error_on in floor.items():
                    mdapes[name].append(error_on(~fit))
    mdapes = {name: values for name, values in mdapes.items() if values}  # known parameters: drawn traces only
    summary = summarise(mdapes, coverage)
    summary.update(unseen_network_predictions=len(unseen_errors),
                   unseen_network_mdape_percent=float(100 * np.median(unseen_errors)) if unseen_errors else None,
                   unseen_network_coverage_90=float(np.mean(unseen_inside)) if unseen_inside else None)
    return {"summary": summary, "mdapes": mdapes}


def leave_one_out(sets: list[Trace]) -> dict:
    errors: dict[str, list[float]] = {"with_sync": [], "step_only": []}
    for _, rows, _ in sets:
        for i in range(len(rows)):
            fit = np.ones(len(rows), bool)
            fit[i] = False
            result = held_out_errors(rows, fit)
            if result is not None:
                for name, value in result[0].items():
                    errors[name].append(float(value[0]))
    both = {k: 100 * np.array(v) for k, v in errors.items()}
    return {"summary": {**{f"{k}_mdape_percent": float(np.median(v)) for k, v in both.items()},
                        **{f"{k}_worst_ape_percent": float(np.max(v)) for k, v in both.items()},
                        "predictions": len(both["with_sync"])}, "errors": errors}


def main() -> dict:
    pollux: list[Trace] = [(f"pollux-{s}", *pollux_shaped_rows(s)) for s in POLLUX_SEEDS]
    irregular: list[Trace] = [(f"irregular-{s}-{t}", rows, None) for s in HELD_OUT_SEEDS + FRESH_SEEDS + TUNE_SEEDS
                              for t, rows in irregular_by_type(s).items()]
    local: list[Trace] = [(f"local-{w}-{t}", rows, None) for w in LOCAL_TRACES
                          for t, rows in local_by_type(w).items() if len(rows) >= 3]
    results = {"pollux_shaped": sampled(pollux, lambda rows: int(np.ceil(POLLUX_SHARE * len(rows))), DRAWS)}
    for size in IRREGULAR_FIT_SIZES:
        results[f"irregular_fit_{size}"] = sampled([t for t in irregular if len(t[1]) > size],
                                                   lambda rows, s=size: s, DRAWS)
    results["measured_here_leave_one_out"] = leave_one_out(local)
    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 4))
    for ax, (name, r) in zip(axes, results.items(), strict=True):
        values = r.get("mdapes") or r["errors"]
        x, y = (100 * np.array(values[k]) for k in ("step_only", "with_sync"))
        ax.loglog(x, y, ".", alpha=0.5)
        top = max(x.max(), y.max()) * 1.2
        low = max(min(x.min(), y.min()), 0.01)
        ax.plot([low, top], [low, top], "k:", lw=1)
        ax.set_xlabel("step times alone, % error")
        ax.set_ylabel("with the sync column, % error")
        ax.set_title(name.replace("_", " "), fontsize=9)
    fig.suptitle("held-out step-time error, the same samples fitted two ways (below the line: the sync helps)",
                 fontsize=10)
    fig.tight_layout()
    save_figure(fig, "steptime_fit")
    out = {"pollux_share": POLLUX_SHARE, "sync_sd": SYNC_SD, "step_sd": STEP_SD, "draws": DRAWS,
           "summary": {k: v["summary"] for k, v in results.items()}, "detail": results}
    write_result("steptime_fit", out)
    return out


if __name__ == "__main__":
    for name, s in main()["summary"].items():
        print(name, {k: v if v is None else round(v, 2) for k, v in s.items()})
