# SPDX-License-Identifier: MIT
"""The processes of a local `thrifty train` launch, as the tests find them: the launcher's children
are multiprocessing's resource tracker and forkserver; the ranks are the forkserver's children."""

import subprocess
from pathlib import Path


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def descendants(pid: int) -> list[int]:
    mine = children(pid)
    return mine + [grandchild for child in mine for grandchild in descendants(child)]


def local_ranks(launcher: int) -> list[int]:
    """The rank processes of the launch run by process `launcher`, in the order they were forked."""
    servers = [pid for pid in children(launcher) if _is_forkserver(pid)]
    return sorted(pid for server in servers for pid in children(server))


def _is_forkserver(pid: int) -> bool:
    try:
        return b"multiprocessing.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def listening_addresses(pids: list[int]) -> list[str]:
    """Local addresses of the listening TCP sockets these processes hold (ss -tlnp)."""
    import re
    lines = subprocess.run(["ss", "-tlnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    return [line.split()[3] for line in lines if any(int(p) in pids for p in re.findall(r"pid=(\d+)", line))]
