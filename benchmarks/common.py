# SPDX-License-Identifier: MIT
"""Shared by the benchmark scripts: where results go and how they are written."""

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from thrifty.io import write_text_atomic  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


# the libraries whose versions a result records (those installed)
LIBRARIES = ("torch", "numpy", "scipy", "openmm", "ray", "matplotlib")


def command_line() -> str:
    """How this process was started, as a user would type it (`python benchmarks/bench_x.py ARGS`)."""
    return " ".join(["python", *(shlex.quote(arg) for arg in sys.argv)])


def provenance() -> dict:
    """The code, command and libraries a result came from: git revision, whether src/ or benchmarks/
    (its results/ aside) had uncommitted changes (`dirty`), the command line, library versions, machine."""
    root = Path(__file__).resolve().parent.parent
    try:
        revision = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                                  text=True, check=True).stdout.strip()
        changes = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "src", "benchmarks",
                                  ":(exclude)benchmarks/results"],  # outputs: a figure written before its JSON
                                 cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        dirty: bool | None = bool(changes)
    except (OSError, subprocess.CalledProcessError):
        revision, dirty = "unknown (not a git checkout)", None
    versions = {}
    for library in LIBRARIES:
        try:
            versions[library] = metadata.version(library)
        except metadata.PackageNotFoundError:
            pass
    return {"revision": revision, "dirty": dirty, "command": command_line(), "versions": versions,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"}


def write_result(name: str, data: dict) -> Path:
    """Write benchmarks/results/NAME.json: the benchmark's data after its provenance (the data's own
    keys win, e.g. a benchmark that records the command it timed under "command" keeps it)."""
    data = {"benchmark": name, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), **provenance(), **data}
    path = RESULTS / f"{name}.json"
    write_text_atomic(path, json.dumps(data, indent=2))
    return path


def save_figure(fig, name: str) -> Path:
    import io

    from thrifty.io import write_bytes_atomic
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    path = RESULTS / f"{name}.png"
    write_bytes_atomic(path, buffer.getvalue())
    return path
