# SPDX-License-Identifier: MIT
"""What the user asks `thrifty plan` for."""

import math
from dataclasses import dataclass

from thrifty.errors import PlanError

OBJECTIVES = ("cost", "time", "knee")
PRECISIONS = ("fp32", "tf32", "amp", "bf16")
# Seconds from asking for a VM to the first training step: boot, image, `pip install torch` and the
# project (SkyPilot's setup), data staging left out. Our assumption, order of magnitude of what the
# clouds' own docs describe as VM start times (about a minute) plus a torch install; override with
# --startup.
DEFAULT_STARTUP_S = {"aws": 180.0, "gcp": 180.0, "azure": 240.0}
FALLBACK_STARTUP_S = 240.0
SPOT_CHOICES = ("both", "only", "never")
MAX_PLAN_WORKERS = 4096  # ranks a plan or a projection considers


@dataclass(frozen=True)
class PlanRequest:
    objective: str = "cost"
    deadline_s: float | None = None
    budget_usd: float | None = None
    max_workers: int = 32
    spot: str = "both"
    top_k: int = 10
    batches: tuple[int, ...] | None = None  # global batches to consider (None: the job's range)
    precision: str = "fp32"
    startup_s: float | None = None  # None: the cloud's default (DEFAULT_STARTUP_S)

    def startup_s_for(self, cloud: str) -> float:
        if self.startup_s is not None:
            return self.startup_s
        return DEFAULT_STARTUP_S.get(cloud, FALLBACK_STARTUP_S)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise PlanError(f"unknown objective {self.objective!r}; choose from {', '.join(OBJECTIVES)}")
        if self.spot not in SPOT_CHOICES:
            raise PlanError(f"unknown spot choice {self.spot!r}; choose from {', '.join(SPOT_CHOICES)}")
        if self.max_workers < 1 or self.max_workers > MAX_PLAN_WORKERS:
            raise PlanError(f"--max-workers must be between 1 and {MAX_PLAN_WORKERS}, got {self.max_workers}")
        if self.top_k < 1:
            raise PlanError(f"--top must be at least 1, got {self.top_k}")
        if self.precision not in PRECISIONS:
            raise PlanError(f"unknown precision {self.precision!r}; choose from {', '.join(PRECISIONS)}")
        if self.batches is not None and (not self.batches or min(self.batches) < 1):
            raise PlanError("--batch needs positive global batch sizes, e.g. 128,256")
        if self.startup_s is not None and not (math.isfinite(self.startup_s) and self.startup_s >= 0):
            raise PlanError(f"--startup must be a duration of zero or more, got {self.startup_s}")
