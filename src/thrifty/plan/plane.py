# SPDX-License-Identifier: MIT
"""A plan's cost-time plane as `thrifty plan` stores it beside its decision and `thrifty serve`
draws it: at most MAX_POINTS feasible candidates (an even thinning of those sorted by time, the
Pareto front and the recommendation always included), each with its time, cost, spot flag and a
label, and the front as `thrifty plan --json` prints it."""

import numpy as np

from thrifty.io import json_safe
from thrifty.plan.optimizer import PlanResult

MAX_POINTS = 2000  # a scatter of 2,000 points shows the plane's shape; about 120 kB of JSON


def plane(result: PlanResult) -> dict:
    """{"plane": {time_s, cost_usd, spot, label, candidates, feasible, shown}, "pareto": [...]}."""
    c, ok = result.candidates, result.feasible_mask
    feasible = np.flatnonzero(ok)
    feasible = feasible[np.argsort(c.time_s[feasible], kind="stable")]
    keep = feasible[np.linspace(0, len(feasible) - 1, min(MAX_POINTS, len(feasible))).astype(int)] \
        if len(feasible) else feasible
    keep = np.union1d(keep, np.append(result.front, result.best))
    return json_safe({
        "plane": {"time_s": c.time_s[keep].tolist(), "cost_usd": c.cost_usd[keep].tolist(),
                  "spot": c.spot[keep].astype(bool).tolist(), "label": _labels(result, keep),
                  "candidates": len(c), "feasible": int(ok.sum()), "shown": len(keep)},
        "pareto": [{**result.describe(int(i)), "merged": int(m)}
                   for i, m in zip(result.front, result.front_merged, strict=True)]})


def _labels(result: PlanResult, keep: np.ndarray) -> list[str]:
    """'cloud:type NODESxRANKS B=batch [spot]' per kept candidate."""
    c, vms = result.candidates, result.vmx.vms
    return [f"{vms[v].qualified_type} {int(n)}x{int(w) // int(n)} B={int(b)}{' spot' if s else ''}"
            for v, n, w, b, s in zip(c.vm_index[keep].astype(int).tolist(), c.nodes[keep].tolist(),
                                     c.workers[keep].tolist(), c.global_batch[keep].tolist(), c.spot[keep].tolist(),
                                     strict=True)]
