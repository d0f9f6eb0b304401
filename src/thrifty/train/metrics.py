# SPDX-License-Identifier: MIT
"""What a `thrifty train` run measured, per step and rank, and what it reached: the summary and
the plot of a run's log (thrifty.records.RunLog).

Rank 0 keeps the rows (every rank's compute time reaches it inside the gradient all-reduce) and
writes, under the run directory: steps.csv (one row per step and rank) and evals.csv (metric over
training time), appended at every checkpoint (just before it; records.RunLog, and a resumed run
cuts them back to its checkpoint), then summary.json and training.png at the end.
"""

import json
import statistics
from pathlib import Path

from thrifty.io import write_png, write_text_atomic
from thrifty.perf.noise import unbiased_norm_estimates
from thrifty.records import RunLog, StepRow


def step_line(rows: list[StepRow]) -> str:
    """One step of every rank as one JSON line (`--step-stream`): the step's time, the slowest
    rank's compute and the ranks' mean time in the gradient synchronisation; on a step that
    measured the gradient noise, `grad_sq` and `trace` too (noise_estimates)."""
    first = rows[0]
    line = {"step": first.step, "epoch": first.epoch, "num_workers": first.num_workers,
            "global_batch": first.global_batch, "step_time_s": first.step_time_s,
            "compute_time_s": max(r.compute_time_s for r in rows),
            "sync_time_s": statistics.fmean(r.sync_time_s for r in rows)}
    if all(r.has_noise for r in rows):
        line["grad_sq"], line["trace"] = noise_estimates(rows)
    return json.dumps(line)


def cut_step_stream(path: Path, first_step: int) -> None:
    """A resumed run's `--step-stream` keeps the steps before `first_step`, the checkpoint's: the steps
    the killed run streamed past it are trained again (a new user's pass: after a SIGKILL under
    `thrifty run` 1,540 lines for 1,500 steps, steps 850 on twice), and a line half-written when it
    died is dropped. The file is rewritten only where it held such lines (atomically)."""
    if first_step <= 0 or not path.is_file():
        return
    lines = path.read_text().splitlines(keepends=True)
    kept = []
    for line in lines:
        try:
            if line.endswith("\n") and json.loads(line)["step"] < first_step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            pass  # a line the killed run did not finish
    if len(kept) < len(lines):
        write_text_atomic(path, "".join(kept))


def noise_estimates(rows: list[StepRow]) -> tuple[float, float]:
    """One step's unbiased (|G|^2, tr(Sigma)) (thrifty.perf.noise, McCandlish et al. 2018 App. A),
    the mean over ranks of each rank's small batch (its local one; with one rank, the first
    micro-batch) against the big batch (the global one; with one rank, the rank's)."""
    grad_sq, trace = unbiased_norm_estimates([r.small_batch for r in rows], [r.small_grad_sq for r in rows],
                                             [r.big_batch for r in rows], [r.big_grad_sq for r in rows])
    return float(statistics.fmean(grad_sq)), float(statistics.fmean(trace))


def summarise(log: RunLog, *, world_size: int, global_batch: int, split: list[int],
              adjustments: int, target: float, wall_time_s: float, policy: str,
              workload: str, metric_name: str, train_size: int, higher_is_better: bool = True) -> dict:
    """The `--json` summary of a run (keys documented in docs/training.md, "Metrics"); a step at
    global batch B is 1 / (N // B) of an epoch (N = `train_size`: the sampler drops the last partial
    batch, train.sampler), so a run of part of one, or one that moved B, says so, and the count
    never falls as steps are added (at one epoch size for all, a resume from B = 64 to 7 went from
    0.909 to 0.902 epochs)."""
    by_step: dict[int, list[StepRow]] = {}
    for row in log.steps:
        by_step.setdefault(row.step, []).append(row)
    train_time = sum(rows[0].step_time_s for rows in by_step.values())
    # each step at its own global batch: a resume may have moved B (epochs and throughput counted
    # at today's B had said 3 epochs for an --epochs 2 run)
    samples = sum(rows[0].global_batch for rows in by_step.values())
    epochs = sum(1.0 / max(train_size // rows[0].global_batch, 1) for rows in by_step.values())
    waits = sum(r.wait_time_s for r in log.steps)
    busy = sum(r.step_time_s for r in log.steps)
    reached = next((e for e in log.evals if (e.metric >= target if higher_is_better else e.metric <= target)), None)
    controller = [rows[0].controller_time_s / rows[0].step_time_s for rows in by_step.values() if rows[0].step_time_s > 0]
    return {
        "workload": workload, "policy": policy, "workers": world_size, "global_batch": global_batch,
        "steps": len(by_step), "epochs": epochs,
        "wall_time_s": wall_time_s, "train_time_s": train_time,
        "samples_per_s": samples / train_time if train_time else 0.0,
        "time_per_epoch_s": train_time / epochs if epochs else 0.0,
        "metric_name": metric_name, "target_metric": target, "higher_is_better": higher_is_better,
        "final_metric": log.evals[-1].metric if log.evals else float("nan"),
        "time_to_target_s": reached.train_time_s if reached else None,
        "steps_to_target": reached.step + 1 if reached else None,  # an eval's step is 0-based: the steps run by then
        "final_batch_sizes": list(split), "adjustments": adjustments,
        "wait_fraction": waits / busy if busy else 0.0,
        "controller_overhead_fraction": statistics.fmean(controller) if controller else 0.0,
    }


def write_summary(run_dir: Path, summary: dict) -> None:
    write_text_atomic(run_dir / "summary.json", json.dumps(summary, indent=2))


def plot_run(run_dir: Path, log: RunLog, title: str) -> Path:
    """training.png: batch sizes over time, per-rank compute and step time, metric vs time."""
    ranks = sorted({r.rank for r in log.steps})

    def draw(fig, axes) -> None:
        for k in ranks:
            mine = [r for r in log.steps if r.rank == k]
            steps = [r.step for r in mine]
            axes[0].plot(steps, [r.local_batch for r in mine], label=f"rank {k}")
            axes[1].plot(steps, [r.compute_time_s * 1e3 for r in mine], lw=0.8, label=f"rank {k} compute")
        rank0 = [r for r in log.steps if r.rank == ranks[0]] if ranks else []
        axes[1].plot([r.step for r in rank0], [r.step_time_s * 1e3 for r in rank0], "k", lw=1.2, label="step")
        axes[0].set(xlabel="step", ylabel="local batch", title="batch split")
        axes[1].set(xlabel="step", ylabel="ms", title="per-rank compute time and step time")
        axes[2].plot([e.train_time_s for e in log.evals], [e.metric for e in log.evals], "o-")
        axes[2].set(xlabel="training time (s)", ylabel="metric", title="metric vs time")
        axes[0].legend(fontsize=7)
        axes[1].legend(fontsize=7)

    return write_png(Path(run_dir) / "training.png", draw, ncols=3, figsize=(14, 4), title=title)
