"""Fault injection: the OpenMM confined-ion job under `thrifty run`, preempted at lifetimes drawn
from the Google bathtub model on a compressed clock, against an uninterrupted run.

1 wall second = `TIME_SCALE` model seconds (4 model hours). Preemptions alternate
between SIGKILL and SIGTERM-then-SIGKILL after a notice. The checkpoint schedule is the model's DP
schedule for the job's length in model time; its predicted overhead uses the measured checkpoint
and restart costs converted to model time. The final state must be bit-identical (Reference
platform) and no checkpoint may be lost (no restart may have to skip a damaged newest checkpoint:
the job logs every such fallback).
"""

import json
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

TIME_SCALE = 14400.0
STEPS, CHUNK = 120_000, 100  # long enough for about 25 preemptions at this time scale
COMMAND = [sys.executable, "-m", "thrifty.cli", "md", "run", "--system", "ions", "--steps", str(STEPS),
           "--chunk", str(CHUNK), "--json"]


def main(seed: int = 7) -> dict:
    _, model = load_model("gcp-2019")
    with TemporaryDirectory(prefix="thrifty-bench-faults-") as tmp:
        tmp = Path(tmp)
        start = time.monotonic()
        Runner([*COMMAND, "--out", str(tmp / "ref")], tmp / "ck-ref").run()
        reference_wall = time.monotonic() - start
        # what a restart pays before the job runs again: Python, the CLI, OpenMM and the MD job module
        startup = Runner([sys.executable, "-c", "import openmm, thrifty.cli.app, thrifty.md.job"],
                         tmp / "ck-startup").run().wall_s
        job_model_s = reference_wall * TIME_SCALE
        ckpt_cost_model_s, restart_model_s = 0.02 * TIME_SCALE, startup * TIME_SCALE
        schedule = plan_schedule(model, Job(job_model_s, ckpt_cost_model_s, restart_model_s), "dp")
        runner = Runner([*COMMAND, "--out", str(tmp / "inj")], tmp / "ck-inj",
                        intervals_s=[i / TIME_SCALE for i in schedule.intervals_s[:-1]] or [1e9],
                        notice_s=5.0, lifetimes=model, time_scale=TIME_SCALE, kill="mixed", seed=seed,
                        timeout_s=3000)
        report = runner.run()
        same = json.loads((tmp / "ref" / "summary.json").read_text())["state_sha256"] == \
            json.loads((tmp / "inj" / "summary.json").read_text())["state_sha256"]
        written = [e for e in report.events if e["event"] == "checkpoint"]
        fallbacks = tmp / "ck-inj" / FALLBACK_LOG
        lost = len(fallbacks.read_text().split()) if fallbacks.exists() else 0
        intact = all(_verifies(p) for p in checkpoint_files(tmp / "ck-inj"))
        events = report.events
    result = {
        "job": f"OpenMM confined ions, 120 particles, {STEPS} steps, Reference platform",
        "time_scale_model_s_per_wall_s": TIME_SCALE, "model": "gcp-2019",
        "reference_wall_s": reference_wall, "startup_wall_s": startup,
        "injected": report.summary(), "bit_identical": same,
        "checkpoints_written": len(written), "checkpoints_lost": lost,
        "remaining_checkpoints_intact": bool(intact),
        "measured_overhead_percent": 100 * (report.wall_s / reference_wall - 1),
        "predicted_overhead_percent": 100 * schedule.overhead_fraction,
        "schedule_intervals_model_h": [i / 3600 for i in schedule.intervals_s],
    }
    _plot(events, reference_wall)
    write_result("fault_injection", result)
    return result


def _verifies(path: Path) -> bool:
    try:
        decode(path.read_bytes(), str(path))
        return True
    except CheckpointError:
        return False


def _plot(events: list[dict], reference_wall: float) -> None:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 3))
    starts = [e["t_s"] for e in events if e["event"] == "start"]
    for kind, marker, colour in (("checkpoint", "|", "tab:green"), ("preemption", "x", "tab:red")):
        ts = [e["t_s"] for e in events if e["event"] == kind]
        ax.scatter(ts, [1] * len(ts), marker=marker, color=colour, s=120, label=kind)
    ax.scatter(starts, [0.9] * len(starts), marker="^", color="tab:blue", label="start / restart")
    ax.axvline(reference_wall, color="k", ls="--", label="uninterrupted run ends")
    ax.set(xlabel="wall time (s)", yticks=[], title="fault injection: events")
    ax.legend(fontsize=8, ncol=4)
    fig.tight_layout()
    save_figure(fig, "fault_injection")


if __name__ == "__main__":
    r = main(*(int(a) for a in sys.argv[1:2]))
    print(json.dumps({k: v for k, v in r.items() if k != "schedule_intervals_model_h"}, indent=2))
