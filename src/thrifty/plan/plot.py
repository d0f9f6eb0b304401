# SPDX-License-Identifier: MIT
"""Cost-versus-time scatter of the feasible candidates with the Pareto front and the choice."""

from pathlib import Path

import numpy as np

from thrifty.io import write_png
from thrifty.plan.optimizer import PlanResult


def plot_plan(result: PlanResult, path: Path, title: str = "") -> Path:
    c, ok = result.candidates, result.feasible_mask
    hours = c.time_s / 3600

    def draw(fig, ax) -> None:
        for spot, colour, label in ((False, "tab:blue", "on-demand"), (True, "tab:orange", "spot")):
            mask = ok & (c.spot == spot)
            ax.scatter(hours[mask], c.cost_usd[mask], s=4, alpha=0.25, color=colour, label=label,
                       rasterized=True)
        if np.any(~ok):
            ax.scatter(hours[~ok], c.cost_usd[~ok], s=3, alpha=0.1, color="grey", label="infeasible",
                       rasterized=True)
        front = result.front  # fastest first; the recommended point (cost, time or knee) is on it
        ax.plot(hours[front], c.cost_usd[front], "-o", color="black", ms=3, lw=1, label="Pareto front")
        best = result.best
        ax.errorbar(hours[best], c.cost_usd[best],
                    xerr=[[hours[best] - c.time_low_s[best] / 3600], [c.time_high_s[best] / 3600 - hours[best]]],
                    yerr=[[c.cost_usd[best] - c.cost_low_usd[best]], [c.cost_high_usd[best] - c.cost_usd[best]]],
                    fmt="*", color="red", ms=14, capsize=3,
                    label=f"choice ({result.request.objective}): {result.describe(best)['instance_type']}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("predicted time to target (hours)")
        ax.set_ylabel("predicted cost to target (USD)")
        ax.set_title(title or f"{int(np.sum(ok)):,} feasible of {len(c):,} candidates")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, markerscale=2)  # off the data
    return write_png(path, draw, figsize=(10, 5.5), dpi=120)
