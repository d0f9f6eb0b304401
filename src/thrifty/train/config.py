# SPDX-License-Identifier: MIT
"""A training run's configuration: every knob with its default once, and the checks that can run
before any process starts."""

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from thrifty.errors import ThriftyError
from thrifty.perf.jobmodel import MAX_TRAINED_EPOCHS
from thrifty.train.hetero import SlowdownSchedule
from thrifty.train.policies import ControllerSettings
from thrifty.train.runtime import PRECISIONS, resolve_device
from thrifty.workloads import DEFAULT_WORKLOAD, load_workload

# ten times plan's --epochs cap (a plan's launch line caps an --until-target run at twice its steps'
# upper end, and never above this: plan.optimizer)
MAX_EPOCHS = MAX_TRAINED_EPOCHS


@dataclass(frozen=True)
class TrainConfig:
    """One training run. `steps` wins over `epochs`; `global_batch` None = the workload's default."""

    workload: str = DEFAULT_WORKLOAD
    workers: int = 2
    global_batch: int | None = None
    policy: str = "dynamic"
    steps: int | None = None
    epochs: float | None = 10.0
    slowdown: SlowdownSchedule | None = None
    emulate: str = "sleep"
    capacities: tuple[float, ...] | None = None
    b_min: int = 1
    b_max: int | None = None  # same limit for every rank; None = probe by `b_max_rule`
    b_max_rule: str = "memory"
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    eval_every: int | None = None  # steps; None = four times per epoch
    until_target: bool = False
    target: float | None = None
    checkpoint_every: int = 50  # steps; 0 = only at the end (and whenever `thrifty run` asks)
    keep_checkpoints: int = 2  # the newest k; a damaged newest one falls back to the one before
    run_dir: Path = Path(".thrifty/runs/train")
    checkpoint_dir: Path | None = None  # None: $THRIFTY_CHECKPOINT_DIR under `thrifty run`, else run_dir
    resume: bool = False  # implied under `thrifty run` when its directory holds a checkpoint
    resume_if_any: bool = False  # resume where the checkpoint folder holds a checkpoint, else start (a relaunched task)
    force: bool = False  # a fresh run may delete the checkpoints of an earlier run in run_dir
    step_stream: Path | None = None  # rank 0 appends one JSON line per step (a supervisor follows it)
    sync_bn: bool = True
    seed: int = 0
    progress: bool = True
    timeout_s: float = 3600.0
    device: str | None = None  # None: cuda:LOCAL_RANK where CUDA is, else cpu (train.runtime)
    precision: str = "fp32"  # fp32, tf32, amp or bf16 (train.runtime)
    loader_workers: int = 2  # worker processes per rank prefetching an item-by-item data set

    def __post_init__(self) -> None:
        """The checks that need nothing but the numbers: a bad option fails before any work."""
        def at_least(value, low: int, option: str) -> None:
            if value is not None and value < low:
                raise ThriftyError(f"{option} must be at least {low}, got {value}")
        for value, low, option in ((self.workers, 1, "--nproc"), (self.global_batch, 1, "--global-batch"),
                                   (self.steps, 1, "--steps"), (self.b_min, 1, "--b-min"),
                                   (self.b_max, 1, "--b-max"), (self.eval_every, 1, "--eval-every"),
                                   (self.checkpoint_every, 0, "--checkpoint-every"),
                                   (self.loader_workers, 0, "--loader-workers")):
            at_least(value, low, option)
        if self.epochs is not None and not (math.isfinite(self.epochs) and self.epochs > 0):
            raise ThriftyError(f"--epochs must be a positive number, got {self.epochs}")
        if self.epochs is not None and self.epochs > MAX_EPOCHS:  # 1e9 started a 22-billion-step run
            raise ThriftyError(f"--epochs must be at most {MAX_EPOCHS:,}, got {self.epochs:g}")
        if self.target is not None and not math.isfinite(self.target):
            raise ThriftyError(f"--target must be a finite number, got {self.target}")
        if self.b_max is not None and self.b_min > self.b_max:
            raise ThriftyError(f"--b-min {self.b_min} is above --b-max {self.b_max}")
        if self.precision not in PRECISIONS:
            raise ThriftyError(f"unknown --precision {self.precision!r}; choose from {', '.join(PRECISIONS)}")


def global_batch_for(global_batch: int | None, workload) -> int:
    """The global batch a run uses: the one asked for, else the workload's default."""
    return workload.default_global_batch if global_batch is None else global_batch


def total_steps(config: TrainConfig, train_size: int, global_batch: int,
                at: tuple[int, int, int] | None = None) -> int:
    """The step counter's value at which the run stops (an --until-target run may stop earlier).

    `--steps S` counts steps since the run began, across resumes and moves, whatever each step's
    global batch: the run stops at step S (a resume after step S trains no more). `--epochs E`
    counts passes over the data: E x floor(N / B) steps for a run that keeps B. For a resumed run
    pass `at` = (step, epoch, sample offset in the epoch) of the checkpoint: the run then stops
    when E epochs are done, counting the epochs (and the part of the current one) already done,
    whatever their global batch, with the steps still to go counted at the new B: the rest of
    the current epoch (floor((N - offset) / B) steps), then floor(N / B) per epoch, the last one
    cut at its fraction. Without a move this is exactly E x floor(N / B) rounded up, as before, and
    `at` = (0, 0, 0), a fresh start, gives what no `at` gives.
    """
    if config.steps is not None:
        return config.steps
    epochs, per_epoch = config.epochs or 1.0, train_size // global_batch
    if at is None:
        return max(1, math.ceil(epochs * per_epoch))
    step, epoch, offset = at
    whole = max(1, math.ceil(epochs * per_epoch))  # the steps of a run that keeps B throughout
    this_epoch = (train_size - offset) // global_batch  # steps left in the current epoch
    if epochs - epoch >= 1:  # the rest of this epoch, then the later ones (the last cut)
        return step + this_epoch + whole - (epoch + 1) * per_epoch
    # this epoch is the last (or past it): stop at its fraction, counted in steps of the new B
    return step + max(0, min(this_epoch, math.ceil(whole - epoch * per_epoch - offset / global_batch)))


def check_config(config: TrainConfig, max_workers: int) -> TrainConfig:
    """Validate what can be checked before any process starts; fill in the global batch."""
    from thrifty.io import check_writable_dir, check_writable_file
    from thrifty.train.split import check_split_bounds
    if not 1 <= config.workers <= max_workers:
        raise ThriftyError(f"--nproc {config.workers} is outside 1..{max_workers} allowed on this machine")
    workload = load_workload(config.workload)
    global_batch = global_batch_for(config.global_batch, workload)
    if global_batch < 1:
        raise ThriftyError(f"--global-batch must be positive, got {global_batch}")
    if global_batch > workload.train_size:
        raise ThriftyError(f"global batch {global_batch} exceeds the training set ({workload.train_size})")
    limits = [config.b_max or global_batch] * config.workers
    check_split_bounds(global_batch, config.workers, config.b_min, limits)
    if config.steps is not None and config.steps < 1:
        raise ThriftyError(f"--steps must be at least 1, got {config.steps}")
    if config.steps is None and config.epochs is not None and not config.epochs > 0:
        raise ThriftyError(f"--epochs must be positive, got {config.epochs}")
    if config.slowdown is not None:
        config.slowdown.check_workers(config.workers)
    if config.keep_checkpoints < 1:
        raise ThriftyError(f"--keep-checkpoints must be at least 1, got {config.keep_checkpoints}")
    resolve_device(config.device, 0)  # a device this machine does not have fails here
    check_writable_dir(config.run_dir, "the run directory")
    if config.step_stream is not None:
        check_writable_file(config.step_stream, "--step-stream")
    return replace(config, global_batch=global_batch)
