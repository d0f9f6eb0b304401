# SPDX-License-Identifier: MIT
"""Plain records of what training measured: per-step rows, evaluations, profiles, calibration
runs, and a run's log with its CSV files. No torch: the store, the fitters and the CLI read them
without loading the training runtime.

One step of one rank is one `StepRow`, whoever ran it: the profiler stores them in
`step_samples`, `thrifty train` appends them to `steps.csv` and stores them in `train_steps`, with
the same field names everywhere.
"""

import csv
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from thrifty.errors import ThriftyError
from thrifty.io import read_csv, write_csv

NAN = float("nan")


@dataclass(frozen=True)
class StepRow:
    """One measured step of one rank. Times in seconds; NaN where a run did not measure it."""

    step: int  # 0-based step of the run (the profiler: of its setting)
    rank: int
    num_workers: int
    local_batch: int  # b_k, this rank's samples
    global_batch: int  # B = sum b_k
    epoch: int = 0
    num_nodes: int = 1
    slowdown: float = 1.0  # emulated slowdown factor f of this rank (train.emulation)
    compute_time_s: float = NAN  # forward + backward (+ emulated slowdown): what the controller sees
    wait_time_s: float = NAN  # idle in the all-reduce until the slowest rank arrived: max_j t_j - t_k
    sync_time_s: float = NAN  # end of compute to end of the all-reduce: wait + the collective
    update_time_s: float = NAN  # optimizer step and controller, after the all-reduce
    controller_time_s: float = NAN  # the batch policy's share of update_time_s
    step_time_s: float = NAN  # the whole step
    samples_per_s: float = NAN  # the group's throughput in this step: global_batch / step_time_s
    peak_memory_bytes: int = 0  # peak resident memory of the process (GPU: peak allocated)
    small_batch: int = 0  # gradient-noise inputs (McCandlish et al. 2018, App. A): |g|^2 over b_k
    small_grad_sq: float = NAN
    big_batch: int = 0  # ... and over the aggregated batch
    big_grad_sq: float = NAN
    update_skipped: int = 0  # 1: amp's loss scaler skipped this step's update (its gradients overflowed)

    @property
    def has_noise(self) -> bool:
        return self.small_grad_sq == self.small_grad_sq and self.big_grad_sq == self.big_grad_sq


STEP_FIELDS = tuple(f.name for f in fields(StepRow))
NOISE_FIELDS = ("small_batch", "small_grad_sq", "big_batch", "big_grad_sq")


@dataclass(frozen=True)
class EvalRow:
    step: int
    train_time_s: float
    metric: float


EVAL_FIELDS = tuple(f.name for f in fields(EvalRow))


@dataclass
class Profile:
    """Everything one `thrifty profile` run measured, ready for the store and the fitters."""

    workload: str
    samples: list[StepRow]
    param_count: int
    train_size: int
    threads_per_rank: int
    instance_type: str = "local"
    meta: dict = field(default_factory=dict)


@dataclass
class TrainResult:
    """A calibration run: steps until the target at one global batch, and the noise inputs."""

    global_batch: int
    steps: int
    reached_target: bool
    final_metric: float
    wall_time_s: float
    metric_history: list[tuple[int, float]] = field(default_factory=list)
    noise: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in NOISE_FIELDS})


STEPS_CSV, EVALS_CSV = "steps.csv", "evals.csv"


@dataclass
class RunLog:
    """A training run's rows; rank 0 keeps them and appends them to steps.csv and evals.csv.

    `written` counts the rows of each file already on disk (None: the files are not this log's
    yet, and the next `append` writes them whole). A checkpoint records the files' lengths in
    bytes, which `resume` cuts them back to: the log always reaches at least the newest
    checkpoint, and a resumed run continues exactly where that checkpoint stood."""

    steps: list[StepRow] = field(default_factory=list)
    evals: list[EvalRow] = field(default_factory=list)
    written: dict[str, int] | None = None

    def truncate(self, after_step: int) -> None:
        """Forget rows of steps after `after_step` (they were not checkpointed); the next
        `append` rewrites the files whole."""
        self.steps = [r for r in self.steps if r.step <= after_step]
        self.evals = [r for r in self.evals if r.step <= after_step]
        self.written = None

    def append(self, run_dir: Path) -> dict[str, int]:
        """Write the rows not on disk yet (fsynced) and return each file's length in bytes. The
        first call writes header and rows to fresh files, replacing any a previous run left."""
        run_dir = Path(run_dir)
        lengths = {}
        for name, columns, rows in ((STEPS_CSV, STEP_FIELDS, self.steps),
                                    (EVALS_CSV, EVAL_FIELDS, self.evals)):
            done = None if self.written is None else self.written[name]
            lengths[name] = _append_rows(run_dir / name, columns, [asdict(r) for r in rows[done or 0:]],
                                         fresh=done is None)
        self.written = {STEPS_CSV: len(self.steps), EVALS_CSV: len(self.evals)}
        return lengths

    @classmethod
    def read(cls, run_dir: Path) -> "RunLog":
        return cls(steps=_rows(StepRow, Path(run_dir) / STEPS_CSV),
                   evals=_rows(EvalRow, Path(run_dir) / EVALS_CSV))

    @classmethod
    def resume(cls, run_dir: Path, log_bytes: dict[str, int]) -> "RunLog":
        """The log as a checkpoint left it: each file cut back to the length in bytes that the
        checkpoint recorded (rows written after it, and a line half-written by a kill, go), then
        read."""
        run_dir = Path(run_dir)
        if not has_log(run_dir):
            return cls()  # a new machine (a spot job recovered elsewhere): its log starts afresh
        check_log_bytes(run_dir, log_bytes)
        for name, length in log_bytes.items():
            if (run_dir / name).stat().st_size > length:
                os.truncate(run_dir / name, length)
        log = cls.read(run_dir)
        log.written = {STEPS_CSV: len(log.steps), EVALS_CSV: len(log.evals)}
        return log


def has_log(run_dir: Path) -> bool:
    """Whether the run directory holds any of a training log's files."""
    return any((Path(run_dir) / name).exists() for name in (STEPS_CSV, EVALS_CSV))


def check_log_bytes(run_dir: Path, log_bytes: dict[str, int]) -> None:
    """A log file shorter than its checkpoint recorded belongs to another run: a one-line error.
    A run directory without any log (a new machine resuming from a bucket's checkpoint) passes:
    its log starts afresh with the steps after the checkpoint."""
    if not has_log(run_dir):
        return
    for name, length in log_bytes.items():
        path = Path(run_dir) / name
        size = path.stat().st_size if path.is_file() else 0
        if size < length:
            raise ThriftyError(f"{path} holds {size} bytes, fewer than the {length} its checkpoint recorded: "
                               f"resume with the --run-dir of the run that wrote the checkpoint")


def _append_rows(path: Path, columns: tuple[str, ...], rows: list[dict], *, fresh: bool) -> int:
    """Rows appended to `path` (a new file with its header when `fresh`), fsynced; its length."""
    if fresh:
        write_csv(path, columns, rows)  # atomic: header and rows at once
        return path.stat().st_size
    try:
        with path.open("a", newline="") as handle:  # csv.writer's "\r\n" lines, as write_csv's
            csv.writer(handle).writerows([row[c] for c in columns] for row in rows)
            handle.flush()
            os.fsync(handle.fileno())
            return os.fstat(handle.fileno()).st_size
    except OSError as exc:
        raise ThriftyError(f"cannot append to {path}: {exc.strerror or exc}") from None


def _rows(kind, path: Path) -> list:
    if not path.exists():
        return []
    types = {f.name: (int if f.type in (int, "int") else float) for f in fields(kind)}
    required = [f.name for f in fields(kind)]
    return [kind(**{k: types[k](row[k]) for k in required})
            for row in read_csv(path, ThriftyError, "run log", required=required, allow_empty=True, appended=True)]
