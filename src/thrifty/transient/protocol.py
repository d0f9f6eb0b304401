# SPDX-License-Identifier: MIT
"""The job's side of `thrifty run`: restore from the newest good checkpoint, save when asked.

The runner starts the job with THRIFTY_CHECKPOINT_DIR set, sends SIGUSR1 when a checkpoint is due
and SIGTERM as a preemption notice (a first Ctrl-C, which a terminal sends the runner and the job
alike, is taken as the same notice). A job does:

    ckpt = JobCheckpoints.from_environment()
    state = ckpt.latest()              # bytes of the newest intact checkpoint, or None
    ckpt.working()                     # restored: the restart's cost ends here
    while work remains:
        ...one chunk of work...
        if ckpt.due():                 # SIGUSR1 or SIGTERM arrived
            ckpt.save(serialise(...))
        if ckpt.notice:                # preempted: saved above, stop now
            sys.exit(PREEMPTED_EXIT)

Files are `ckpt-000001.bin`, ... (thrifty.checkpoint_file: checksummed, temp name, fsync,
rename); the newest `keep` are kept (KEEP unless the job says), and a damaged newest file falls
back to the one before.

Under a runner the job reports what its checkpoints and restarts cost, one JSON line each in
`job_reports.jsonl`: `{"event": "working"}` once restored (the runner takes the time since it
started the process as the restart's cost, and times its checkpoint requests from there), and
`{"event": "checkpoint", "file": ..., "cost_s": ...}` per checkpoint, from `began_s` (when the job
stopped working to save: gathering its state, flushing its logs) to the file's rename. The runner
plans its checkpoint schedule again with them (transient.adaptive).
"""

import json
import os
import signal
import time
from pathlib import Path

from thrifty.checkpoint_file import CheckpointError, decode, encode
from thrifty.io import write_bytes_atomic

ENV_DIR = "THRIFTY_CHECKPOINT_DIR"
PREEMPTED_EXIT = 75  # EX_TEMPFAIL: "try again", i.e. restart me
KEEP = 3  # the MD job's; `thrifty train` keeps --keep-checkpoints
FALLBACK_LOG = "fallbacks.log"
REPORTS = "job_reports.jsonl"


def under_runner() -> bool:
    """Started by `thrifty run`, or by a task that names its checkpoint directory the same way (a
    spot plan's SkyPilot task: a folder of its bucket), in the environment."""
    return bool(os.environ.get(ENV_DIR))


def ready_file(directory: Path, pid: int) -> Path:
    """Created by the job once its signal handlers are installed (SIGUSR1 would kill it before)."""
    return Path(directory) / f".ready-{pid}"


def checkpoint_files(directory: Path) -> list[Path]:
    return sorted(Path(directory).glob("ckpt-*.bin"))


def newest_intact(directory: Path) -> tuple[Path, bytes] | None:
    """The newest checkpoint whose checksum holds (older ones when newer are damaged)."""
    for path in reversed(checkpoint_files(directory)):
        try:
            return path, decode(path.read_bytes(), str(path))
        except (CheckpointError, OSError):
            continue
    return None


def check_checkpoint_folder(directory: Path, what: str = "--checkpoint-dir", *, job_files_allowed: bool = False) -> None:
    """Refuse a folder a job would silently misread: files that are not a job's checkpoints (unless
    `job_files_allowed`: a folder an earlier `thrifty run` of the job used, whose other files are
    the job's own), or checkpoints none of which is intact (resuming would quietly start over and
    delete them)."""
    directory = Path(directory)
    if not directory.is_dir():
        return
    # the job's and the runner's (transient.runner) logs; a file system's own lost+found at its root
    ours = (FALLBACK_LOG, REPORTS, "events.jsonl", "lost+found")
    try:
        foreign = sorted(p.name for p in directory.iterdir() if not (
            p.name.startswith("ckpt-") and p.suffix == ".bin" or p.name in ours or p.name.startswith(".")))
    except OSError as exc:
        raise CheckpointError(f"cannot read {what} {directory}: {exc.strerror or exc}") from None
    if foreign and not job_files_allowed:
        raise CheckpointError(f"{what} {directory} holds files that are not checkpoints ({', '.join(foreign[:3])}): "
                           f"give an empty or new folder")
    files = checkpoint_files(directory)
    if files and newest_intact(directory) is None:
        raise CheckpointError(f"{what} {directory} holds {len(files)} checkpoint file(s) and none is intact: "
                           f"give another folder, or remove them to start over")


class JobCheckpoints:
    def __init__(self, directory: Path, *, handle_signals: bool = True, keep: int = KEEP) -> None:
        if keep < 1:
            raise CheckpointError(f"keep at least one checkpoint, got {keep}")
        self.directory = Path(directory)
        self.keep = keep
        self.directory.mkdir(parents=True, exist_ok=True)
        self.requested = False
        self.notice = False
        self.skipped: list[str] = []
        runner_dir = os.environ.get(ENV_DIR)  # a runner reads the reports there
        self.reporting = bool(runner_dir and Path(runner_dir).resolve() == self.directory.resolve())
        if handle_signals:
            signal.signal(signal.SIGUSR1, self._on_request)
            signal.signal(signal.SIGTERM, self._on_notice)
            if under_runner():  # a terminal's Ctrl-C reaches the runner and its job alike: the first is
                signal.signal(signal.SIGINT, self._on_first_ctrl_c)  # the runner's notice, a second stops
            ready_file(self.directory, os.getpid()).touch()  # the runner may signal from now on

    @classmethod
    def from_environment(cls, default: Path | None = None) -> "JobCheckpoints":
        directory = os.environ.get(ENV_DIR) or default
        if directory is None:
            raise CheckpointError(f"{ENV_DIR} is not set and no checkpoint directory was given")
        return cls(Path(directory))

    def _on_request(self, *_) -> None:
        self.requested = True

    def _on_notice(self, *_) -> None:
        self.requested = self.notice = True

    def _on_first_ctrl_c(self, *_) -> None:
        self._on_notice()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def take_notice(self) -> None:
        """The notice from the job itself (md run's first Ctrl-C): checkpoint at the next chance, then stop."""
        self._on_notice()

    def close(self) -> None:
        """Done: ignore further requests (Python resets handlers to the default, fatal for SIGUSR1,
        while the interpreter shuts down) and tell the runner to stop sending them."""
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        ready_file(self.directory, os.getpid()).unlink(missing_ok=True)

    def due(self) -> bool:
        return self.requested

    def working(self) -> None:
        """Restored and about to work: under a runner, the restart's cost ends now."""
        self._report({"event": "working"})

    def _report(self, record: dict) -> None:
        """One line for the runner; no fsync (a report lost with the machine costs a measurement)."""
        if self.reporting:
            with (self.directory / REPORTS).open("a") as handle:
                handle.write(json.dumps(record) + "\n")

    def latest(self) -> bytes | None:
        """The newest intact checkpoint's payload (see `latest_file`)."""
        found = self.latest_file()
        return None if found is None else found[1]

    def latest_file(self) -> tuple[Path, bytes] | None:
        """The newest intact checkpoint and its payload; damaged newer ones are skipped, listed in
        `fallbacks.log` (a checkpoint lost) and removed, so that the newest `keep` are good ones."""
        found = newest_intact(self.directory)
        newer = [p for p in checkpoint_files(self.directory) if found is None or p.name > found[0].name]
        self.skipped = [p.name for p in newer]
        if self.skipped:
            with (self.directory / FALLBACK_LOG).open("a") as handle:
                handle.write(" ".join(self.skipped) + "\n")
        for path in newer:
            path.unlink(missing_ok=True)
        return found

    def save(self, payload: bytes, *, began_s: float | None = None) -> Path:
        """Write the next checkpoint; its cost, from `began_s` (time.monotonic() when the job
        began this checkpoint; default now) to the rename, is reported to the runner."""
        began = time.monotonic() if began_s is None else began_s
        files = checkpoint_files(self.directory)
        number = int(files[-1].stem.split("-")[1]) + 1 if files else 1
        path = self.directory / f"ckpt-{number:06d}.bin"
        write_bytes_atomic(path, encode(payload))
        for old in files[:len(files) - (self.keep - 1)]:
            old.unlink(missing_ok=True)
        self.requested = False
        self._report({"event": "checkpoint", "file": path.name, "cost_s": time.monotonic() - began})
        return path


class PeriodicCheckpoints(JobCheckpoints):
    """JobCheckpoints that also asks for a save every `every_s` wall seconds: a job run alone, with no
    runner to ask (`md run --checkpoint-every`), loses at most that much to a SIGKILL or a crash."""

    def __init__(self, directory: Path, every_s: float, **options) -> None:
        super().__init__(directory, **options)
        self.every_s = every_s
        self._last_save = time.monotonic()

    def due(self) -> bool:
        return self.requested or time.monotonic() - self._last_save >= self.every_s

    def save(self, payload: bytes, *, began_s: float | None = None) -> Path:
        path = super().save(payload, began_s=began_s)
        self._last_save = time.monotonic()
        return path
