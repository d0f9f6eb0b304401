# SPDX-License-Identifier: MIT
"""Processes as Linux's /proc shows them: a process tree, a task's state, the runnable count.
Read fresh on every call (processes come and go); where /proc is absent the readers say nothing."""

from pathlib import Path

PROC = Path("/proc")


def stat_fields(path: Path) -> list[str] | None:
    """A /proc/PID/stat (or task) file's fields after the command name, which may hold spaces:
    [state, ppid, ...]; None when the task ended while it was read."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def process_tree(roots: list[int], proc: Path = PROC) -> set[int]:
    """`roots` and every process below them."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit() and (fields := stat_fields(entry / "stat")) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return tree


def procs_running(proc: Path = PROC) -> float:
    """The machine's runnable tasks (threads) now: /proc/stat's procs_running (OSError without /proc)."""
    with open(proc / "stat") as stat:
        return next(float(line.split()[1]) for line in stat if line.startswith("procs_running"))
