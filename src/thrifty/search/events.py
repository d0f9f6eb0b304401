# SPDX-License-Identifier: MIT
"""What the search records and tells its observers after every window: the probe, the store's
recorder (checkpoint and probe rows), the live view and tests. Plain data, so observers hold no
search logic."""

from dataclasses import asdict, dataclass

from thrifty.search.config import Config


@dataclass(frozen=True)
class Probe:
    """One measurement window on one configuration."""

    config: Config
    steps: int
    step_time_s: float  # mean
    cost_usd: float  # of the window, with the move into it
    cut_short: bool
    step_time_se_s: float | None = None  # standard error of the mean (None: a single step)
    sync_time_s: float | None = None  # mean time in gradient synchronisation, when reported
    wall_time_s: float = 0.0  # seconds of the window, with the move into it
    billed_s: float = 0.0  # cost_usd at the configuration's $/h, in seconds (billing minimums included)

    def to_dict(self) -> dict:
        return {**asdict(self), "config": self.config.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "Probe":
        return cls(**{**data, "config": Config(**data["config"])})


@dataclass(frozen=True)
class Settled:
    """Training outside the measurement windows on one configuration, where the search settled:
    consecutive segments there merged (the re-checks' own windows are probes)."""

    config: Config
    after_windows: int  # how many windows came before it: its place among the probes
    wall_time_s: float  # with the move into it
    cost_usd: float
    progress: float  # share of the target made there

    def to_dict(self) -> dict:
        return {**asdict(self), "config": self.config.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "Settled":
        return cls(**{**data, "config": Config(**data["config"])})


@dataclass(frozen=True)
class Prediction:
    """The model's best configuration for what is left of the job, by its mean remaining objective
    J (seconds or dollars), with J's 90% interval (J = r K exp(X), X ~ N(mu, sd^2): search.rule)."""

    config: Config
    objective: str  # "time" (J in seconds) or "cost" (J in dollars)
    remaining: float
    low: float
    high: float


@dataclass(frozen=True)
class WindowDone:
    """One measurement window finished; `index` counts windows from 0 over the whole search."""

    index: int
    probe: Probe
    elapsed_s: float
    cost_usd: float
    progress: float
    target: float
    exploration_usd: float  # the windows' cost so far, moves into them included
    prediction: Prediction | None  # None until the first decision after the profile
