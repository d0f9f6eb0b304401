# SPDX-License-Identifier: MIT
"""A lifetime model against the Kaplan-Meier curve of the data, and its hazard (PNG)."""

from pathlib import Path

import numpy as np

from thrifty.io import write_png
from thrifty.transient.fitting import Lifetimes, kaplan_meier
from thrifty.transient.lifetimes import HOUR, LifetimeModel


def plot_fit(models: dict[str, LifetimeModel], data: Lifetimes, path: Path, title: str) -> Path:
    times, survival = kaplan_meier(data)
    horizon = max(float(data.lifetime_s.max()), 1.0) * 1.02
    t = np.linspace(0.0, horizon, 800)

    def draw(fig, axes) -> None:
        left, right = axes
        left.step(np.concatenate([[0.0], times]) / HOUR, np.concatenate([[0.0], 1 - survival]), where="post",
                  color="k", lw=1.5, label=f"Kaplan-Meier ({data.lifetime_s.size} VMs, "
                                           f"{int(data.preempted.sum())} preempted)")
        for name, model in models.items():
            left.plot(t / HOUR, model.cdf(t), label=name)
            right.plot(t / HOUR, np.clip(model.hazard(t) * HOUR, 0, None), label=name)
        left.set(xlabel="VM age (h)", ylabel="P(preempted by then)", title="lifetime cdf", ylim=(0, 1.02))
        right.set(xlabel="VM age (h)", ylabel="hazard (1/h)", title="hazard rate", yscale="log")
        right.set_ylim(1e-3, 1e2)
        left.legend(fontsize=8)
        right.legend(fontsize=8)
    return write_png(path, draw, ncols=2, figsize=(12, 4.5), title=title)
