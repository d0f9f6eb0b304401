# SPDX-License-Identifier: MIT
"""Folders named by `--watch` at start: training runs being written (steps.csv, thrifty.records)
and jobs under `thrifty run` (events.jsonl in their checkpoint folder, transient.runner).

The server lists these folders itself, up to two levels below each watched folder, and gives
each an id (`w{watch}-{digest of its path}`, stable while the folder stays: scan); a request
names only such an id, never a path. A job is running
while the pid of its newest `start` event is alive and no `finished` or `failed` event follows
it; its runner is that process's parent. Stopping a job is the notice `thrifty run` itself takes
from a cloud (transient.runner): SIGTERM to the runner, which forwards it to the job, gives it
time to checkpoint and stops without restarting it.
"""

import hashlib
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from thrifty.records import STEPS_CSV, RunLog
from thrifty.transient.protocol import checkpoint_files

EVENTS = "events.jsonl"  # transient.runner's log
DEPTH = 2


def _folders(root: Path) -> list[Path]:
    found, level = [], [root]
    for _ in range(DEPTH + 1):
        found += level
        level = sorted(p for folder in level if folder.is_dir() for p in folder.iterdir()
                       if p.is_dir() and not p.name.startswith("."))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # field 4, after the command name in parentheses


def _command_line(pid: int) -> list[str]:
    try:
        return [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    except OSError:
        return []


@dataclass(frozen=True)
class Job:
    id: str
    folder: Path
    name: str  # the folder's path below its watched root (watched_name)

    def events(self) -> list[dict]:
        try:
            lines = (self.folder / EVENTS).read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line being written
                continue
        return out

    def state(self) -> dict:
        events = self.events()
        starts = [i for i, e in enumerate(events) if e.get("event") == "start"]
        logged = events[starts[-1]].get("pid") if starts else None
        pid = None if logged is None else int(logged)
        ended = any(e.get("event") in ("finished", "failed") for e in events[starts[-1]:]) if starts else True
        running = pid is not None and not ended and _alive(pid)
        runner = _parent(pid) if pid is not None and running else None
        return {"id": self.id, "name": self.name, "running": running, "pid": pid if running else None,
                "runner_pid": runner, "command": _command_line(pid) if pid is not None and running else [],
                # the checkpoints the runner saw taken (its log), and those on disk (a few kept)
                "attempts": len(starts), "checkpoints": sum(e.get("event") == "checkpoint" for e in events),
                "checkpoints_kept": len(checkpoint_files(self.folder)),
                "preemptions": sum(e.get("event") == "preemption" for e in events),
                "last_event": events[-1] if events else None}

    def stop(self) -> dict:
        """Give the job's runner the preemption notice; what was signalled."""
        state = self.state()
        if not state["running"] or state["runner_pid"] is None:
            return {**state, "signalled": None}
        os.kill(state["runner_pid"], signal.SIGTERM)
        return {**state, "signalled": state["runner_pid"]}


@dataclass(frozen=True)
class RunFolder:
    id: str
    folder: Path
    name: str  # the folder's path below its watched root (watched_name)

    def summary(self) -> dict:
        return {"id": self.id, "source": "folder", "name": self.name}

    def detail(self) -> dict:
        from dataclasses import asdict
        steps = [asdict(r) for r in RunLog.read(self.folder).steps]
        return {"id": self.id, "source": "folder", "name": self.name, "steps": steps}


def watched_name(root: Path, folder: Path) -> str:
    """How the page names a folder: its path below the watched root (a new user's pass: four
    search work folders' runs all read "run"), the root's own name for the root itself."""
    relative = folder.relative_to(root).as_posix()
    return root.resolve().name if relative == "." else relative  # resolved: `--watch .` has no name


def folder_key(root: Path, folder: Path) -> str:
    """A folder's part of its id: a digest of its path below the watched root, the same on every
    scan. A position in the folder listing had shifted when another folder appeared before it, and
    a stop sent to a job's id stopped the job listed there next."""
    relative = folder.relative_to(root).as_posix()
    return hashlib.sha256(relative.encode()).hexdigest()[:12]


def scan(roots: list[Path]) -> tuple[dict[str, RunFolder], dict[str, Job]]:
    """Every run folder and job folder under the watched roots, by id (w/j, the root's place in
    --watch, folder_key)."""
    runs: dict[str, RunFolder] = {}
    jobs: dict[str, Job] = {}
    for w, root in enumerate(roots):
        for folder in _folders(Path(root)):
            key, name = folder_key(Path(root), folder), watched_name(Path(root), folder)
            if (folder / STEPS_CSV).is_file():
                runs[f"w{w}-{key}"] = RunFolder(f"w{w}-{key}", folder, name)
            if (folder / EVENTS).is_file():
                jobs[f"j{w}-{key}"] = Job(f"j{w}-{key}", folder, name)
    return runs, jobs


def job_for_run(run: RunFolder, jobs: dict[str, Job]) -> Job | None:
    """The running job whose command names this run's folder (thrifty train --run-dir DIR)."""
    for job in jobs.values():
        state = job.state()
        if state["running"] and any(_same(arg, run.folder, int(state["pid"])) for arg in state["command"]):
            return job
    return None


def _same(arg: str, folder: Path, pid: int) -> bool:
    """Whether a command-line argument of process `pid` names `folder` (relative to its cwd)."""
    try:
        path = Path(arg) if Path(arg).is_absolute() else Path(os.readlink(f"/proc/{pid}/cwd")) / arg
        return path.exists() and path.resolve() == folder.resolve()
    except OSError:
        return False
