# SPDX-License-Identifier: MIT
"""The results tables quoted in the docs' prose pages (search.md, gpu-projection.md, md-surrogate.md),
each rendered from one benchmarks/results/*.json file.

A doc marks where a table goes:

    <!-- table: NAME -->
    ...                     (replaced by TABLES[NAME] on every render)
    <!-- /table -->

`python benchmarks/render_results.py` fills every marked block in docs/*.md; `--check` (and
tests/test_results_docs.py) fails when one is not what its JSON renders to, so a table cannot be
typed or go stale. A table names the JSON it reads in its first line.
"""

import statistics
from collections.abc import Callable
from dataclasses import dataclass

Lines = list[str]


@dataclass(frozen=True)
class DocTable:
    result: str                      # benchmarks/results/RESULT.json
    render: Callable[[dict], Lines]  # the markdown lines of the table, from that file's data


def _row(cells: list[object]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header: list[str], rows: list[list[object]]) -> Lines:
    return [_row(header), "|" + "---|" * len(header), *(_row(r) for r in rows)]


def _signed_percent(fraction: float) -> str:
    return f"{100 * fraction:+.1f}%"


# search_real: one row per (trace set, job length, objective), over the workloads of the set


SEARCH_SETS = ("held out", "fresh", "tuned on", "pollux-shaped", "pollux-shaped 4-GPU nodes only",
               "pollux-shaped 1-GPU nodes only", "pollux-shaped 4-GPU nodes, 1/2/4 used",
               "pollux-shaped uneven, 3 launches")
SEARCH_JOBS = ("3 h", "short")
SEARCH_OBJECTIVES = ("cost", "time")
SEARCH_GOAL_MEDIAN, SEARCH_GOAL_WORST = 0.05, 0.10   # issue 22: median <= 5%, worst <= 10% over the oracle


def search_real_summary(data: dict) -> Lines:
    """Per trace set, job and objective: the range of the workloads' median excess over the oracle,
    the worst seed, the range of the overheads of the configurations the search ended on, and how
    many workloads meet each goal (the `after` variant: with the recoup check)."""
    rows = []
    for trace_set in SEARCH_SETS:
        for job in SEARCH_JOBS:
            for objective in SEARCH_OBJECTIVES:
                cells = [v["after"] for k, v in data["results"].items()
                         if k.split(" | ")[0].rsplit(" ", 1)[0] == trace_set and k.endswith(f"| {job}, {objective}")]
                if not cells:
                    continue
                medians = [c["median"] for c in cells]
                worsts = [c["worst"] for c in cells]
                gaps = [c["settle_gap_median"] for c in cells]
                n = len(cells)
                rows.append([f"{trace_set}, {job}, {objective}",
                             f"{_signed_percent(min(medians))} to {_signed_percent(max(medians))}",
                             _signed_percent(max(worsts)),
                             f"{_signed_percent(min(gaps))} to {_signed_percent(max(gaps))}",
                             f"{sum(m <= SEARCH_GOAL_MEDIAN for m in medians)} of {n}",
                             f"{sum(w <= SEARCH_GOAL_WORST for w in worsts)} of {n}"])
    return [f"From `search_real.json` (`after`), {data['seeds']} seeds per workload:", "",
            *_table(["rows", "medians", "worst", "where it ended", "median <= 5%", "worst <= 10%"], rows),
            "", "(where it ended: the median overhead of training the whole job on the configuration the search",
            "ended on; the rest of the median is the moves and probes.)"]


# search: the online search and the baselines on the bundled synthetic traces


SEARCH_STRATEGIES = ("search", "search_no_recheck", "plan_alone", "exhaustive", "random", "ernest", "bayes_opt",
                     "defaults_most_workers", "defaults_cheapest")
SEARCH_ROWS = (("cost", "overhead_cost"), ("time", "overhead_time"), ("cost, deadline", "overhead_cost"))


def search_synthetic_summary(data: dict) -> Lines:
    """Per strategy and objective: the range over the traces of the median overhead over the oracle
    in that objective, and with a deadline the share of runs that met it (worst trace)."""
    def cells(strategy: str) -> list[str]:
        out = []
        for objective, field in SEARCH_ROWS:
            values = [v[strategy][field] for k, v in data["results"].items()
                      if k.split(" | ")[1] == objective and strategy in v]
            out.append(f"{_signed_percent(min(values))} to {_signed_percent(max(values))}" if values else "-")
        met = [v[strategy]["met_deadline"] for k, v in data["results"].items()
               if k.split(" | ")[1] == "cost, deadline" and strategy in v]
        return [*out, f"{min(met):.0%}" if met else "-"]
    strategies = [s for s in SEARCH_STRATEGIES if any(s in v for v in data["results"].values())]
    rows = [[strategy, *cells(strategy)] for strategy in strategies]
    fields = dict(SEARCH_ROWS)
    p90 = max(v["search"][f"p90_{fields[k.split(' | ')[1]]}"] for k, v in data["results"].items())
    traces = sorted({k.split(" | ")[0] for k in data["results"]})
    return [f"From `search.json`: {len(traces)} traces ({'; '.join(traces)}), {data['seeds']} seeds; the median "
            "overhead over the oracle in each row's objective, its range over the traces:", "",
            *_table(["strategy", "cost", "time", "cost, deadline", "deadline met (worst trace)"], rows),
            "", f"The search's p90 overhead in the row's objective is at most {_signed_percent(p90)}."]


def search_local_summary(data: dict) -> Lines:
    """The relaunch and the in-place batch change this machine pays per workload; per measured trace and objective the search's
    median overhead against the best baseline's; and the one real end-to-end search."""
    restarts = ", ".join(f"{w} {t:.1f} s" for w, t in data["measured_restart_s"].items())
    changes = ", ".join(f"{w} {t * 1000:.2f} ms" for w, t in data.get("measured_batch_change_s", {}).items())
    rows = []
    for trace, objectives in data["sim"].items():
        for objective, v in objectives.items():
            field = "overhead_cost" if objective == "cost" else "overhead_time"
            others = {k: b[field] for k, b in v.items() if isinstance(b, dict) and field in b and k != "search"}
            best = min(others, key=others.__getitem__)
            rows.append([trace.replace(" | ", ", "), objective, _signed_percent(v["search"][field]),
                         f"{v['search']['moves']:g}",
                         f"{best} {_signed_percent(others[best])}"])
    end = data["end_to_end"]
    return [f"From `search_local.json` ({data['seeds']} sim seeds on each measured trace): the relaunch measured "
            f"here, {restarts}" + (f"; a batch change in place, {changes}" if changes else "") + ";", "",
            *_table(["trace", "objective", "search, median", "moves", "best baseline"], rows),
            "", f"End to end, one real local search of digits: {end['search']['moves']} moves, "
            f"{_signed_percent(end['overhead_time'])} in time and {_signed_percent(end['overhead_cost'])} in cost "
            "over the oracle's configuration trained from the start."]


# gpu_projection: median APE per regime, and the projections for GPUs with no training rows


GPU_REGIMES = (("launch", "launch-bound"), ("memory", "memory-bound"), ("compute", "compute-bound"))
GPU_GOAL_PERCENT = 12.0   # issue 22: <= 12% median APE in each regime


def _percent_or_none(value: float | None) -> str:
    return "no rows" if value is None else f"{value:.1f}%"


def gpu_projection_per_regime(data: dict) -> Lines:
    """Leave-one-model-out and leave-one-GPU-out median APE per regime, against the goal."""
    model_out, gpu_out = data["per_regime"]["leave_one_model_out"], data["per_regime"]["leave_one_gpu_out"]
    rows = []
    for key, name in GPU_REGIMES:
        apes = [s["median_ape_percent"] for s in (model_out[key], gpu_out[key]) if s["median_ape_percent"] is not None]
        met = "" if not apes else (": met" if max(apes) <= GPU_GOAL_PERCENT else ": not met")
        rows.append([name, f"{model_out[key]['rows']} / {gpu_out[key]['rows']}",
                     _percent_or_none(model_out[key]["median_ape_percent"]),
                     _percent_or_none(gpu_out[key]["median_ape_percent"]), f"<= {GPU_GOAL_PERCENT:g}%{met}"])
    overall = data["median_ape_percent"]
    rows.append(["all rows", len(data["rows"]), _percent_or_none(overall["leave_one_model_out"]),
                 _percent_or_none(overall["leave_one_gpu_out"]), ""])
    return ["From `gpu_projection.json`:", "",
            *_table(["regime", "rows (model / GPU split)", "leave one model out", "leave one GPU out", "goal"], rows)]


GPU_PARAMS = (("launch_s", "launch floor per kernel", lambda v: f"{1e6 * v:.1f} us"),
              ("vector_efficiency", "FP32 (non-tensor) efficiency", lambda v: f"{v:.2f}"),
              ("tensor_efficiency", "tensor-core efficiency, matrix multiplies", lambda v: f"{v:.2f}"),
              ("conv_tensor_efficiency", "tensor-core efficiency, convolutions", lambda v: f"{v:.2f}"),
              ("matrix_outputs_per_sm", "outputs per SM per wave, matmul/conv", lambda v: f"{v:,.0f}"),
              ("vector_outputs_per_sm", "outputs per SM per wave, the rest", lambda v: f"{v:,.0f}"),
              ("power_fraction", "power fraction", lambda v: f"{v:.2f}"),
              ("bandwidth_efficiency", "share of peak memory bandwidth", lambda v: f"{v:.0%}"),
              ("allreduce_efficiency", "all-reduce share of the link", lambda v: f"{v:.0%}"),
              ("overlap_g", "overlap g", lambda v: f"{v:.2f}"))


def gpu_projection_per_model_and_gpu(data: dict) -> Lines:
    """Median APE of each model left out and of each GPU left out, and the fitted parameters."""
    models = data["per_model_median_ape_percent"]
    gpus = data["per_gpu_median_ape_percent"]
    return ["From `gpu_projection.json`, median APE when left out:", "",
            *_table(["model", "left out"], [[m, f"{v:.1f}%"] for m, v in models.items()]), "",
            *_table(["GPU", "left out"], [[g, f"{v:.1f}%"] for g, v in gpus.items()]), "",
            f"Fitted on all rows (`{data['made_by']}`); in-sample median APE "
            f"{data['median_ape_percent']['in_sample']:.1f}%, held-out error of log throughput "
            f"{data['held_out_sigma_log']:.2f}, of which {data['other_gpu_sigma_log']:.2f} differs between GPUs and "
            f"{data['same_gpu_sigma_log']:.2f} between configurations on one GPU die (the rest is shared, and `plan` "
            "tells such projections apart by these: `plan/ties.py`):", "",
            *_table(["parameter", "fitted"], [[name, show(data["params"][key])] for key, name, show in GPU_PARAMS])]


def gpu_projection_spec_only(data: dict) -> Lines:
    """The projections for a GPU with no training rows (reached from its specs alone), per batch,
    with the time each regime's kernels take in the step."""
    rows = [[p["model"], p["gpu"].upper(), p["precision"].upper(), p["batch"], f"{p['samples_per_s']:.0f}",
             f"{1e3 * p['step_s']:.1f}",
             " / ".join(f"{1e3 * p['regime_s'][key]:.1f}" for key, _ in GPU_REGIMES)]
            for p in data["spec_only_projections"]]
    return ["From `gpu_projection.json` (`spec_only_projections`):", "",
            *_table(["model", "GPU", "precision", "batch", "samples/s", "step, ms",
                     "launch / memory / compute kernels, ms"], rows)]


# steptime_prediction and statistical_efficiency: the profile's models against held-out measurements


def _range_percent(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}%"


def steptime_prediction_summary(data: dict) -> Lines:
    """Per fit design: the held-out MdAPE pooled over launches and per launch, thrifty's model,
    the same model fitted to the step times alone and Ernest's, with the pooled 90% coverage; and
    the largest launch-to-launch spread."""
    rows = [[design, f"{v['pooled_mdape_percent']:.1f}%", _range_percent(v["single_launch_mdape_percent"]),
             f"{v['pooled_mdape_percent_step_only']:.1f}%", _range_percent(v["single_launch_mdape_percent_step_only"]),
             f"{v['pooled_mdape_percent_ernest']:.1f}%", _range_percent(v["single_launch_mdape_percent_ernest"]),
             f"{v['pooled_coverage_90']:.2f}"]
            for design, v in data["summary"].items()]
    return [f"From `steptime_prediction.json` ({data['workload']}, {data['repeats']} launches, workers "
            f"{', '.join(map(str, data['workers']))}, local batches {', '.join(map(str, data['local_batches']))}):", "",
            *_table(["fitted on", "held-out MdAPE, pooled", "single launches", "step times alone, pooled",
                     "step times alone, single", "Ernest, pooled", "Ernest, single", "90% coverage, pooled"], rows),
            "", f"One configuration moved by up to {data['launch_to_launch_spread_percent_max']:.1f}% between "
            f"launches (`launch_to_launch_spread_percent_max`)."]


def steptime_fit_summary(data: dict) -> Lines:
    """Per test bed: the held-out error of the fit with the sync column and on step times alone, the
    floors no few-sample fit beats, and the mean share of held-out steps inside the former's 90% interval."""
    names = {"pollux_shaped": f"Pollux-shaped, {data['pollux_share']:.0%} of 250 configurations",
             "irregular_fit_6": "irregular, 6 configurations of a type",
             "irregular_fit_10": "irregular, 10 configurations of a type",
             "measured_here_leave_one_out": "measured here, leave one out"}
    def floor(v: dict, key: str) -> str:
        value = v.get(f"{key}_median_mdape_percent")
        return "-" if value is None else f"{value:.1f}%"

    rows = []
    for key, v in data["summary"].items():
        if "fits" in v:
            rows.append([names[key], f"{v['fits']} fits", f"{v['with_sync_median_mdape_percent']:.1f}%",
                         f"{v['step_only_median_mdape_percent']:.1f}%", floor(v, "all_rows"), floor(v, "known_params"),
                         f"{v['with_sync_worst_mdape_percent']:.1f}%", f"{v['step_only_worst_mdape_percent']:.1f}%",
                         f"{v['with_sync_better_share']:.0%}", f"{v['with_sync_coverage_90']:.2f}"])
        else:
            rows.append([names[key], f"{v['predictions']} predictions", f"{v['with_sync_mdape_percent']:.1f}%",
                         f"{v['step_only_mdape_percent']:.1f}%", "-", "-", f"{v['with_sync_worst_ape_percent']:.1f}%",
                         f"{v['step_only_worst_ape_percent']:.1f}%", "-", "-"])
    return ["From `steptime_fit.json` (median over fits of each fit's held-out MdAPE, and the worst fit; for the "
            "leave-one-out rows the median and worst single error). The floors, on the same held-out rows: the fit "
            "to every configuration of the trace (which saw them), and the workload's own parameters where the "
            "trace was drawn from the model:", "",
            *_table(["test bed", "fits", "with sync, median", "step times alone, median", "floor: every row fitted",
                     "floor: known parameters", "with sync, worst", "step times alone, worst", "with sync better",
                     "with sync, 90% coverage"], rows)]


def statistical_efficiency_steps(data: dict) -> Lines:
    """Steps to the target per global batch: measured (median over seeds) against predicted from the
    noise scale measured at the smallest batch."""
    rows = [[batch, f"{data['measured_median_steps'][batch]:g}", f"{data['predicted_steps'][batch]:.0f}",
             f"{data['prediction_error_percent'][batch]:+.1f}%" if batch in data["prediction_error_percent"]
             else "(fitted here)"]
            for batch in data["measured_median_steps"]]
    return [f"From `statistical_efficiency.json` ({data['workload']} to {data['target_metric']:g}, seeds "
            f"{', '.join(map(str, data['seeds']))}; B_noise measured at the smallest batch: "
            f"{data['noise_scale_at_smallest_batch']:.1f}):", "",
            *_table(["global batch", "measured steps (median)", "predicted", "error"], rows)]


# md_surrogate: held-out accuracy of the network beside the no-ML baselines


SURROGATE_PREDICTORS = (("network", "network"), ("flat", "flat profile"), ("nearest run", "nearest run"),
                        ("gaussian process", "Gaussian process"))


def _pair(values: dict[str, float]) -> str:
    return f"{values['cation']:.3f} / {values['anion']:.3f}"


def md_surrogate_heldout(data: dict) -> Lines:
    """Medians over the splits of each predictor's held-out scores, and what the exact profile would score."""
    summary, setup = data["summary"], data["setup"]
    medians = summary["median_over_splits"]
    rows = [[name, _pair(medians[key]["rms_molar"]), _pair(medians[key]["rms_vs_truth_molar"]),
             f"{medians[key]['within_2_bars']:.3f}", f"{medians[key]['chi2_per_bin']:.2f}",
             f"{medians[key]['max_abs_net_charge_molar_nm']:.2g}"]
            for key, name in SURROGATE_PREDICTORS]
    exact = summary["exact_predictor"]
    rows.append(["exact profile (expected)", f"{_pair(summary['noise_rms_molar'])} (the noise)", "0",
                 f"{exact['within_2_bars']:.3f}", f"{exact['chi2_per_bin']:.2f}", "0"])
    per_split = [["band coverage (goal 0.85-0.95)", *(f"{c:.3f}" for c in summary["band_coverage"])],
                 *([f"RMS vs truth / flat's, {ion}", *(f"{r:.2f}" for r in summary["rms_vs_truth_over_flat"][ion])]
                   for ion in ("cation", "anion")),
                 *([f"RMS vs MD / flat's, {ion}", *(f"{r:.2f}" for r in summary["rms_over_flat"][ion])]
                   for ion in ("cation", "anion")),
                 ["flagged out of domain", *(f"{f:.2f}" for f in summary["flagged_out_of_domain"])]]
    return [f"From `md_surrogate.json`: {setup['train_runs']} training and {setup['test_runs']} held-out runs, "
            f"splits {', '.join(map(str, setup['splits']))}; medians over the splits:", "",
            *_table(["predictor", "RMS vs MD cation / anion, M", "RMS vs truth cation / anion, M", "within 2 bars",
                     "chi^2/bin", "max abs(net charge), M nm"], rows),
            "", "Per split:", "",
            *_table(["", *(f"split {s}" for s in setup["splits"])], per_split),
            "", f"Median RMS vs truth over the flat profile's: cation "
            f"{statistics.median(summary['rms_vs_truth_over_flat']['cation']):.2f}, anion "
            f"{statistics.median(summary['rms_vs_truth_over_flat']['anion']):.2f} (goal <= 0.5)."]


def md_surrogate_bases(data: dict) -> Lines:
    """Each shape basis tried: median (over the selection splits) held-out RMS against the truth over
    the flat profile's, per ion, and the mean chi^2/bin."""
    setup = data["setup"]
    rows = [[name, f"{b['median_rms_vs_truth_over_flat']['cation']:.2f}",
             f"{b['median_rms_vs_truth_over_flat']['anion']:.2f}", f"{b['chi2_per_bin_mean']:.2f}"]
            for name, b in data["bases"].items()]
    return [f"From `md_surrogate_basis.json`: splits {setup['splits'][0]}-{setup['splits'][-1]}, "
            f"{setup['train_runs']} training and {setup['test_runs']} held-out runs each:", "",
            *_table(["basis", "RMS vs truth / flat's, cation", "anion", "mean chi^2/bin"], rows)]


# torch_md: the torch engine against OpenMM


TORCH_MD_ENGINES = (("openmm_cpu", "OpenMM CPU"), ("torch_float64", "torch float64"), ("torch_float32", "torch float32"))


def torch_md_speed(data: dict) -> Lines:
    """One default system: ms a step per engine (median of the repeats, and their range) and the
    ratio to OpenMM; then R small replicas: ion-steps per second per engine."""
    one = data["one_default_system"]
    ions = round(one["openmm_cpu_ion_steps_per_s"] * one["openmm_cpu_ms_per_step"] / 1e3)
    rows = []
    for key, name in TORCH_MD_ENGINES:
        repeats = sorted(1e3 * ions / r[f"{key}_ion_steps_per_s"] for r in one["repeats"])
        ratio = "1" if key == "openmm_cpu" else f"{one[f'{key}_ms_over_openmm_ms']:.1f}x"
        rows.append([name, f"{one[f'{key}_ms_per_step']:.2f}", f"{repeats[0]:.2f}-{repeats[-1]:.2f}", ratio])
    replicas = [[r["replicas"], *(f"{r[f'{key}_ion_steps_per_s']:,.0f}" for key, _ in TORCH_MD_ENGINES),
                 f"{r['torch_float64_over_openmm']:.2f} / {r['torch_float32_over_openmm']:.2f}"]
                for r in data["rows"]]
    return [f"From `torch_md.json` ({data['threads']} thread, `clock {data['clock']}`): one default system, "
            f"{ions} ions, {one['steps']} steps, {len(one['repeats'])} alternating repeats:", "",
            *_table(["engine", "ms a step (median)", "repeats", "over OpenMM"], rows),
            "", "R small replicas (4 nm boxes) in one batch, ion-steps per second:", "",
            *_table(["R", *(name for _, name in TORCH_MD_ENGINES), "torch / OpenMM (float64 / float32)"], replicas)]


# md_replay: runs the active pick needs to reach random sampling's final accuracy


def md_replay_ratio(data: dict) -> Lines:
    """Per seed: random sampling's held-out chi^2/bin at its budget, when active learning reaches it,
    the ratio of runs, and the grid's value at its largest level."""
    budget = data["setup"]["budget"]
    rows = []
    for seed in data["seeds"]:
        active = seed["curves"]["active"]
        reached = seed["active_runs_to_random_final"]
        if reached is None:
            at_budget = next(c for c in active if c["runs"] == budget)
            when = f"not within {budget} ({at_budget['chi2_per_bin']:.3f} at {budget})"
        else:
            when = f"{reached} ({next(c for c in active if c['runs'] == reached)['chi2_per_bin']:.3f})"
        ratio = seed["ratio_to_random_budget"]
        grid = seed["curves"]["grid"][-1]
        rows.append([seed["seed"], f"{seed['random_final']['chi2_per_bin']:.3f}", when,
                     "-" if ratio is None else f"{ratio:g}", f"{grid['chi2_per_bin']:.3f} at {grid['runs']}"])
    met = "met" if data["goal_met"] else "NOT met"
    k, compare = data["setup"]["k"], data["at_k_compare"]
    compare_ratios = ", ".join("-" if v is None else f"{v:g}" for v in compare["ratio_per_seed"])
    return ["From `md_replay.json`:", "",
            *_table(["seed", f"random's chi^2/bin at {budget}", "active reaches it at", "ratio", "grid"], rows),
            "", f"{k} runs a round. Median ratio {data['median_ratio']:g}: the goal (<= 0.7) is {met}. "
            f"The same replay at {compare['k']} runs a round: median {compare['median_ratio']:g} "
            f"(per seed {compare_ratios}).", "",
            f"The metric's noise floor: random's own curve reaches its final value at a median "
            f"{data['random_own_median_ratio']:g} of the budget. Active's chi^2/bin below random's at the same runs: "
            + ", ".join(f"{p['seeds_active_better']} of {p['seeds']} seeds at {p['runs']}" for p in data["paired_by_runs"])
            + f" (mean difference at {data['paired_by_runs'][-1]['runs']}: "
            f"{data['paired_by_runs'][-1]['mean_difference']:+.3f})."]


TABLES: dict[str, DocTable] = {
    "search_real_summary": DocTable("search_real", search_real_summary),
    "search_synthetic_summary": DocTable("search", search_synthetic_summary),
    "search_local_summary": DocTable("search_local", search_local_summary),
    "gpu_projection_per_regime": DocTable("gpu_projection", gpu_projection_per_regime),
    "gpu_projection_per_model_and_gpu": DocTable("gpu_projection", gpu_projection_per_model_and_gpu),
    "gpu_projection_spec_only": DocTable("gpu_projection", gpu_projection_spec_only),
    "steptime_prediction_summary": DocTable("steptime_prediction", steptime_prediction_summary),
    "steptime_fit_summary": DocTable("steptime_fit", steptime_fit_summary),
    "statistical_efficiency_steps": DocTable("statistical_efficiency", statistical_efficiency_steps),
    "md_surrogate_heldout": DocTable("md_surrogate", md_surrogate_heldout),
    "md_surrogate_bases": DocTable("md_surrogate_basis", md_surrogate_bases),
    "md_replay_ratio": DocTable("md_replay", md_replay_ratio),
    "torch_md_speed": DocTable("torch_md", torch_md_speed),
}
