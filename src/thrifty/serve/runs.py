# SPDX-License-Identifier: MIT
"""Training runs as the page draws them: from a run's per-step rows (thrifty.records.StepRow, one
per rank and step), the batch split over time (each rank's local batch b_k per step) and the step
times (each rank's compute time, the step's wall time)."""

import math
from collections import defaultdict


def run_series(steps: list[dict]) -> dict:
    """Per rank, in step order: step numbers, local batch, compute time; per step: the step time
    (the slowest rank's, as every rank waits in the all-reduce for it) and the global batch."""
    by_rank: dict[int, dict[str, list]] = defaultdict(lambda: {"step": [], "local_batch": [], "compute_time_s": []})
    step_time: dict[int, float] = {}
    for row in sorted(steps, key=lambda r: (r["step"], r["rank"])):
        series = by_rank[int(row["rank"])]
        series["step"].append(int(row["step"]))
        series["local_batch"].append(int(row["local_batch"]))
        series["compute_time_s"].append(row.get("compute_time_s"))
        t = row.get("step_time_s")
        if t is not None and not math.isnan(t):
            step_time[int(row["step"])] = max(step_time.get(int(row["step"]), 0.0), float(t))
    ordered = sorted(step_time)
    return {"ranks": {str(rank): by_rank[rank] for rank in sorted(by_rank)},
            "steps": ordered, "step_time_s": [step_time[s] for s in ordered],
            "last_step": max((int(r["step"]) for r in steps), default=None)}
