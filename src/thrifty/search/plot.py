# SPDX-License-Identifier: MIT
"""The search's path through the cost-time plane, as PNG.

Each window is drawn where its configuration would put the whole job at the step time it
measured: time = S(B) T, cost = time x price, with S(B) the steps from 0 to the target at global
batch B under the job's noise schedule (search.noise_schedule). Consecutive windows are joined in the
order they ran (each join is a move), cut-short windows are crosses; the search's actual end
(exploration and moves included) and the oracle's point sit beside them, so the plot shows both
where the search looked and what looking cost."""

from dataclasses import dataclass
from pathlib import Path

from thrifty.io import write_png
from thrifty.search.events import Probe
from thrifty.search.noise_schedule import NoiseSchedule


@dataclass(frozen=True)
class PathPoint:
    label: str
    time_s: float
    cost_usd: float
    cut_short: bool


def path_points(probes: list[Probe], schedule: NoiseSchedule, price_per_hour: dict) -> list[PathPoint]:
    """Where each window's configuration would put the whole job (module docstring)."""
    target = float(schedule.progress[-1])
    points = []
    for p in probes:
        time_s = schedule.steps(0.0, target, p.config.global_batch) * p.step_time_s
        points.append(PathPoint(p.config.label(), time_s, time_s * price_per_hour[p.config] / 3600, p.cut_short))
    return points


def plot_path(path: Path, points: list[PathPoint], final: tuple[float, float], oracle: tuple[float, float] | None,
              title: str = "") -> Path:
    """`final` and `oracle` are (time_s, cost_usd) of the whole job."""
    hours = [p.time_s / 3600 for p in points]
    costs = [p.cost_usd for p in points]

    def draw(fig, ax) -> None:
        ax.plot(hours, costs, "-", color="grey", lw=1, zorder=1, label="moves (in order)")
        for cut, marker, name in ((False, "o", "window"), (True, "x", "window cut short")):
            sel = [i for i, p in enumerate(points) if p.cut_short == cut]
            if sel:
                ax.scatter([hours[i] for i in sel], [costs[i] for i in sel], marker=marker, s=30, zorder=2,
                           color="tab:blue", label=name)
        if points:
            ax.annotate("start", (hours[0], costs[0]), textcoords="offset points", xytext=(5, 5), fontsize=8)
        ax.scatter([final[0] / 3600], [final[1]], marker="*", s=180, color="red", zorder=3,
                   label="search (exploration included)")
        if oracle is not None:
            ax.scatter([oracle[0] / 3600], [oracle[1]], marker="D", s=60, color="black", zorder=3, label="oracle")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("time to target (hours)")
        ax.set_ylabel("cost to target (USD)")
        ax.set_title(title or f"{len(points)} windows")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return write_png(path, draw, figsize=(9, 5), dpi=110)
