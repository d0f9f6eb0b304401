"""The job's side of `thrifty run`: restore from the newest good checkpoint, save when asked.

The runner starts the job with THRIFTY_CHECKPOINT_DIR set, sends SIGUSR1 when a checkpoint is due
and SIGTERM as a preemption notice. A job does:

    ckpt = JobCheckpoints.from_environment()
    state = ckpt.latest()              # bytes of the newest intact checkpoint, or None
    while work remains:
        ...one chunk of work...
        if ckpt.due():                 # SIGUSR1 or SIGTERM arrived
            ckpt.save(serialise(...))
        if ckpt.notice:                # preempted: saved above, stop now
            sys.exit(PREEMPTED_EXIT)

Files are `ckpt-000001.bin`, ... (thrifty.checkpoint_file: checksummed, temp name, fsync,
rename); the newest `keep` are kept (KEEP unless the job says), and a damaged newest file falls
back to the one before.
"""

import os
import signal
from pathlib import Path

from thrifty.checkpoint_file import CheckpointError, decode, encode
from thrifty.io import write_bytes_atomic

ENV_DIR = "THRIFTY_CHECKPOINT_DIR"
PREEMPTED_EXIT = 75  # EX_TEMPFAIL: "try again", i.e. restart me
KEEP = 3  # the MD job's; `thrifty train` keeps --keep-checkpoints
FALLBACK_LOG = "fallbacks.log"


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
        if handle_signals:
            signal.signal(signal.SIGUSR1, self._on_request)
            signal.signal(signal.SIGTERM, self._on_notice)
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

    def close(self) -> None:
        """Done: ignore further requests (Python resets handlers to the default, fatal for SIGUSR1,
        while the interpreter shuts down) and tell the runner to stop sending them."""
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        ready_file(self.directory, os.getpid()).unlink(missing_ok=True)

    def due(self) -> bool:
        return self.requested

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

    def save(self, payload: bytes) -> Path:
        files = checkpoint_files(self.directory)
        number = int(files[-1].stem.split("-")[1]) + 1 if files else 1
        path = self.directory / f"ckpt-{number:06d}.bin"
        write_bytes_atomic(path, encode(payload))
        for old in files[:len(files) - (self.keep - 1)]:
            old.unlink(missing_ok=True)
        self.requested = False
        return path
