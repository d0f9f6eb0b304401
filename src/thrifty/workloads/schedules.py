# SPDX-License-Identifier: MIT
"""Learning-rate schedules as functions of training progress in samples.

A schedule maps (samples seen, samples the run will see) to a factor of the learning rate that
the workload's `make_optimizer(params, B)` set for the current global batch B. Progress is counted
in samples, not steps, so a run that moves to another global batch or world size (checkpoint,
relaunch, resume) continues at the same point of its schedule, at the new B's base rate; a
checkpoint stores the samples seen, so a resumed run takes the same rates step for step.

- Constant: 1.
- Cosine (Loshchilov & Hutter 2017, SGDR, without restarts; torch CosineAnnealingLR):
  final + (1 - final) * (1 + cos(pi * s / S)) / 2 over the whole run of S samples.
- Step (He et al. 2016): the factor is multiplied by `gamma` at each milestone, given as fractions
  of the run (ResNet-50: epochs 30, 60 and 80 of 90).
- Warmup (Goyal et al. 2017, arXiv:1706.02677, "gradual warm-up"): linear from `start` to the
  inner schedule's factor over the first `samples` samples, then the inner schedule.
"""

import math
from dataclasses import dataclass, field
from typing import Protocol


class LRSchedule(Protocol):
    def __call__(self, samples_seen: float, total_samples: float) -> float:
        """The learning-rate factor after `samples_seen` of the run's `total_samples`."""
        ...


@dataclass(frozen=True)
class Constant:
    def __call__(self, samples_seen: float, total_samples: float) -> float:
        return 1.0


@dataclass(frozen=True)
class Cosine:
    final: float = 0.0  # the factor at the end of the run

    def __call__(self, samples_seen: float, total_samples: float) -> float:
        progress = min(max(samples_seen / max(total_samples, 1.0), 0.0), 1.0)
        # SGDR (Loshchilov & Hutter 2017), eq. 5 without restarts
        return self.final + (1.0 - self.final) * (1.0 + math.cos(math.pi * progress)) / 2.0


@dataclass(frozen=True)
class Step:
    milestones: tuple[float, ...] = field(default=(1 / 3, 2 / 3, 8 / 9))  # fractions of the run
    gamma: float = 0.1

    def __call__(self, samples_seen: float, total_samples: float) -> float:
        passed = sum(samples_seen >= m * total_samples for m in self.milestones)
        return self.gamma ** passed


@dataclass(frozen=True)
class Warmup:
    samples: float  # length of the warm-up in samples (Goyal et al.: 5 epochs)
    after: LRSchedule = field(default_factory=Constant)
    start: float = 0.1  # the factor at the first sample

    def __call__(self, samples_seen: float, total_samples: float) -> float:
        later = self.after(samples_seen, total_samples)
        if samples_seen >= self.samples:
            return later
        return self.start + (later - self.start) * samples_seen / self.samples  # linear ramp

