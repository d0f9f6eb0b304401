"""Fault injection: jobs under `thrifty run`, preempted at lifetimes drawn from the Google bathtub
model on a compressed clock, against an uninterrupted run of the same job.

Two jobs: the OpenMM confined-ion simulation (`md`) and `thrifty train` on 2 ranks (`train`).
Preemptions alternate between SIGKILL and SIGTERM-then-SIGKILL after a notice. The checkpoint
schedule is the model's DP schedule for the job's length in model time; its predicted overhead uses
the measured restart cost (and an assumed checkpoint cost) converted to model time. The final state
must be bit-identical (OpenMM's Reference platform; deterministic CPU training) and no checkpoint
may be lost (no restart may have to skip a damaged newest checkpoint: the jobs log every such
fallback).

The MD job's clock is fixed (1 wall s = 24 model h). A restart of `thrifty train` costs seconds of
imports (torch, scikit-learn and torch._dynamo in the launcher and in each rank), so its clock is
set from the start-up S measured in the uninterrupted run: a VM that lives the full 24 h gives the
job 1.6 S. Restarts took from 0.9 S to 1.35 S in trials, so a full life gives 0.25-0.7 S of
training, and a job of about 10 S sees about 20-60 preemptions. Usage:
bench_faults.py [md|train|all] [seed].
"""

import json
import statistics
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from common import save_figure, write_result
from thrifty.checkpoint_file import CheckpointError, decode
from thrifty.transient.protocol import FALLBACK_LOG, checkpoint_files
from thrifty.transient.registry import load_model
from thrifty.transient.runner import Runner
from thrifty.transient.schedule import Job, plan_schedule

CLI = [sys.executable, "-m", "thrifty.cli"]
MD_TIME_SCALE = 86_400.0
MD_STEPS, MD_CHUNK = 20_000, 100  # about 30 preemptions at this time scale
MD_COMMAND = [*CLI, "md", "run", "--system", "ions", "--steps", str(MD_STEPS), "--chunk", str(MD_CHUNK), "--json"]
TRAIN_STEPS = 5_500  # about 60 s of training here, 8-10 start-ups
TRAIN_LIFE_STARTUPS = 1.6  # a full 24 h VM life on the compressed clock, in start-ups
TRAIN_COMMAND = [*CLI, "train", "--nproc", "2", "--policy", "uniform", "--b-max", "64", "--steps", str(TRAIN_STEPS),
                 "--checkpoint-every", "0", "--eval-every", "500", "--json"]
TRAIN_CHECKPOINT_S = 0.05  # assumed: gather the RNG states, write 1.2 MB and the CSV log, fsync


def _inject(command: list[str], tmp: Path, work_s: float, restart_s: float, checkpoint_s: float,
            time_scale: float, seed: int) -> tuple:
    """The injected run of `command` (+ its output options) with the DP schedule for this job."""
    _, model = load_model("gcp-2019")
    job = Job(work_s * time_scale, checkpoint_s * time_scale, restart_s * time_scale)
    schedule = plan_schedule(model, job, "dp")
    runner = Runner(command, tmp / "ck-inj", intervals_s=[i / time_scale for i in schedule.intervals_s[:-1]] or [1e9],
                    notice_s=5.0, lifetimes=model, time_scale=time_scale, kill="mixed", seed=seed, timeout_s=3000)
    report = runner.run()
    fallbacks = tmp / "ck-inj" / FALLBACK_LOG
    checks = {"checkpoints_written": sum(e["event"] == "checkpoint" for e in report.events),
              "checkpoints_lost": len(fallbacks.read_text().split()) if fallbacks.exists() else 0,
              "remaining_checkpoints_intact": all(_verifies(p) for p in checkpoint_files(tmp / "ck-inj"))}
    return report, schedule, checks


def md_part(seed: int) -> dict:
    with TemporaryDirectory(prefix="thrifty-bench-faults-") as tmp:
        tmp = Path(tmp)
        start = time.monotonic()
        Runner([*MD_COMMAND, "--out", str(tmp / "ref")], tmp / "ck-ref").run()
        reference_wall = time.monotonic() - start
        # what a restart pays before the job runs again: Python, the CLI, OpenMM and the MD job module
        startup = Runner([sys.executable, "-c", "import openmm, thrifty.cli.app, thrifty.md.job"],
                         tmp / "ck-startup").run().wall_s
        report, schedule, checks = _inject([*MD_COMMAND, "--out", str(tmp / "inj")], tmp, reference_wall,
                                           startup, 0.02, MD_TIME_SCALE, seed)
        same = json.loads((tmp / "ref" / "summary.json").read_text())["state_sha256"] == \
            json.loads((tmp / "inj" / "summary.json").read_text())["state_sha256"]
    _plot(report.events, reference_wall, "fault_injection", "OpenMM job")
    return write_result("fault_injection", {
        "job": f"OpenMM confined ions, 120 particles, {MD_STEPS} steps, Reference platform",
        "time_scale_model_s_per_wall_s": MD_TIME_SCALE, "model": "gcp-2019",
        "reference_wall_s": reference_wall, "startup_wall_s": startup,
        "injected": report.summary(), "bit_identical": same, **checks,
        "measured_overhead_percent": 100 * (report.wall_s / reference_wall - 1),
        "predicted_overhead_percent": 100 * schedule.overhead_fraction,
        "schedule_intervals_model_h": [i / 3600 for i in schedule.intervals_s]})


def train_part(seed: int) -> dict:
    with TemporaryDirectory(prefix="thrifty-bench-faults-train-") as tmp:
        tmp = Path(tmp)
        # the uninterrupted run, with one checkpoint asked for at once: it is written after the
        # first step, so it times the start-up; the final checkpoint ends the training
        reference = Runner([*TRAIN_COMMAND, "--run-dir", str(tmp / "ref"), "--db", str(tmp / "ref.db")],
                           tmp / "ck-ref", intervals_s=[0.01, 1e9]).run()
        saves = [e["t_s"] for e in reference.events if e["event"] == "checkpoint"]
        startup, work = saves[0], saves[-1] - saves[0]
        time_scale = 86_400.0 / (TRAIN_LIFE_STARTUPS * startup)
        report, schedule, checks = _inject([*TRAIN_COMMAND, "--run-dir", str(tmp / "inj"), "--db", str(tmp / "inj.db")],
                                           tmp, work, startup, TRAIN_CHECKPOINT_S, time_scale, seed)
        ref = json.loads((tmp / "ref" / "summary.json").read_text())
        inj = json.loads((tmp / "inj" / "summary.json").read_text())
    _plot(report.events, reference.wall_s, "fault_injection_train", "thrifty train, 2 ranks")
    restarts = _first_steps(report.events)
    return write_result("fault_injection_train", {
        "job": f"thrifty train, builtin:digits, 2 ranks, global batch 64, {TRAIN_STEPS} steps, uniform split, CPU",
        "time_scale_model_s_per_wall_s": time_scale, "model": "gcp-2019",
        "reference_wall_s": reference.wall_s, "startup_wall_s": startup, "training_wall_s": work,
        "injected_startups_s": {"attempts_that_trained": len(restarts), "median": statistics.median(restarts),
                                "max": max(restarts)} if restarts else None,
        "injected": report.summary(), "bit_identical": inj["parameter_digests"] == ref["parameter_digests"],
        "steps": inj["steps"], **checks,
        "measured_overhead_percent": 100 * (report.wall_s / reference.wall_s - 1),
        "predicted_overhead_percent": 100 * schedule.overhead_fraction,
        "schedule_intervals_model_h": [i / 3600 for i in schedule.intervals_s]})


def _first_steps(events: list[dict]) -> list[float]:
    """Per attempt that trained: start to first step (its first checkpoint: requests wait for it)."""
    starts = {e["attempt"]: e["t_s"] for e in events if e["event"] == "start"}
    first: dict[int, float] = {}
    for e in events:
        if e["event"] == "checkpoint" and e["attempt"] not in first:
            first[e["attempt"]] = e["t_s"] - starts[e["attempt"]]
    return list(first.values())


def _verifies(path: Path) -> bool:
    try:
        decode(path.read_bytes(), str(path))
        return True
    except CheckpointError:
        return False


def _plot(events: list[dict], reference_wall: float, name: str, job: str) -> None:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 3))
    starts = [e["t_s"] for e in events if e["event"] == "start"]
    for kind, marker, colour in (("checkpoint", "|", "tab:green"), ("preemption", "x", "tab:red")):
        ts = [e["t_s"] for e in events if e["event"] == kind]
        ax.scatter(ts, [1] * len(ts), marker=marker, color=colour, s=120, label=kind)
    ax.scatter(starts, [0.9] * len(starts), marker="^", color="tab:blue", label="start / restart")
    ax.axvline(reference_wall, color="k", ls="--", label="uninterrupted run ends")
    ax.set(xlabel="wall time (s)", yticks=[], title=f"fault injection, {job}: events")
    ax.legend(fontsize=8, ncol=4)
    fig.tight_layout()
    save_figure(fig, name)


def main(part: str = "all", seed: int = 7) -> dict:
    parts = {"md": md_part, "train": train_part}
    chosen = parts if part == "all" else {part: parts[part]}
    return {name: run(seed) for name, run in chosen.items()}


if __name__ == "__main__":
    results = main(*(sys.argv[1:2] or ["all"]), *(int(a) for a in sys.argv[2:3]))
    for path in results.values():
        data = json.loads(Path(path).read_text())
        print(json.dumps({k: v for k, v in data.items() if k != "schedule_intervals_model_h"}, indent=2))
