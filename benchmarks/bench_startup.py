# SPDX-License-Identifier: MIT
"""How fast the commands answer from a cold process: `thrifty --help`, `thrifty preempt schedule
--job-hours 5 --json`, and the planner's own throughput line of `make demo`'s plan (a stored
profile of builtin:resnet18-cifar10; the first plan of a process, so nothing is warm).

Goals (issue 9): --help < 1 s, preempt schedule < 2 s, >= 1,000,000 candidates/s.
"""

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt

from common import save_figure, write_result

ROOT = Path(__file__).resolve().parent.parent
THRIFTY = [sys.executable, "-m", "thrifty.cli"]
DEMO = ["plan", "--workload", "builtin:resnet18-cifar10", "--db", str(ROOT / ".thrifty" / "demo.db"),
        "--plot", str(ROOT / ".thrifty" / "plan.png"), "--json"]


def wall_s(args: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([*THRIFTY, *args], check=True, capture_output=True, cwd=ROOT, timeout=600)
        times.append(time.perf_counter() - start)
    return times


def main(repeats: int = 7) -> dict:
    subprocess.run([*THRIFTY, *DEMO], check=True, capture_output=True, cwd=ROOT, timeout=900)  # profile once
    planner = []
    for _ in range(repeats):
        done = subprocess.run([*THRIFTY, *DEMO], check=True, capture_output=True, text=True, cwd=ROOT, timeout=600)
        summary = json.loads(done.stdout)
        planner.append({"candidates": summary["candidates_evaluated"], "candidates_per_s": summary["candidates_per_s"]})
    rows = {"help": wall_s(["--help"], repeats),
            "preempt_schedule": wall_s(["preempt", "schedule", "--job-hours", "5", "--json"], repeats)}
    result = {
        "help_wall_s": {"median": statistics.median(rows["help"]), "max": max(rows["help"]), "goal": 1.0},
        "preempt_schedule_wall_s": {"median": statistics.median(rows["preempt_schedule"]),
                                    "max": max(rows["preempt_schedule"]), "goal": 2.0},
        "demo_planner": {"candidates": planner[0]["candidates"],
                         "candidates_per_s_median": statistics.median(p["candidates_per_s"] for p in planner),
                         "candidates_per_s_min": min(p["candidates_per_s"] for p in planner), "goal": 1e6},
        "repeats": repeats, "command": "python benchmarks/bench_startup.py"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    names = ["thrifty --help", "preempt schedule\n--job-hours 5"]
    left.bar(names, [result["help_wall_s"]["median"], result["preempt_schedule_wall_s"]["median"]], color="tab:blue")
    left.scatter(names, [1.0, 2.0], marker="_", s=900, color="red", label="goal", zorder=3)
    left.set_ylabel("wall time, cold process (s)")
    left.legend()
    right.bar(["demo plan"], [result["demo_planner"]["candidates_per_s_median"] / 1e6], color="tab:green")
    right.axhline(1.0, color="red", ls="--", label="goal")
    right.set_ylabel("million candidates / s (first plan of a process)")
    right.legend()
    fig.tight_layout()
    save_figure(fig, "startup")
    write_result("startup", result)
    return result


if __name__ == "__main__":
    r = main()
    print(f"thrifty --help {r['help_wall_s']['median']:.2f} s; preempt schedule "
          f"{r['preempt_schedule_wall_s']['median']:.2f} s; demo planner "
          f"{r['demo_planner']['candidates_per_s_median']:,.0f} candidates/s "
          f"({r['demo_planner']['candidates']:,} candidates)")
