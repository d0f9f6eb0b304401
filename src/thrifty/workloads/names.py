# SPDX-License-Identifier: MIT
"""Workload names without loading any workload (no torch): the built-ins, and the keys under
which the store keeps a workload's profiles."""

import functools
import hashlib
from pathlib import Path

from thrifty.errors import WorkloadError

BUILTINS = {"digits": "thrifty.workloads.digits:make_workload",
            "digits-bn": "thrifty.workloads.digits:make_bn_workload",
            "tabular": "thrifty.workloads.tabular:make_workload",
            "resnet18-cifar10": "thrifty.workloads.resnet_builtins:make_cifar10",
            "resnet50-imagenet": "thrifty.workloads.resnet_builtins:make_imagenet"}
DEFAULT_WORKLOAD = "builtin:digits"


def canonical_name(spec: str) -> str:
    """A stable key for the store: built-ins by name, files by absolute path."""
    name = spec.removeprefix("builtin:")
    if name in BUILTINS and not spec.endswith(".py"):
        return f"builtin:{name}"
    if spec.startswith("builtin:"):
        raise WorkloadError(f"unknown built-in workload {name!r}; choose from {', '.join(BUILTINS)}")
    return str(Path(spec).resolve())


def _digest(paths: list[Path], spec: str) -> str:
    sha = hashlib.sha256()
    try:
        for path in paths:
            sha.update(path.read_bytes())
    except OSError as exc:
        raise WorkloadError(f"cannot read workload file {spec}: {exc.strerror}") from None
    return sha.hexdigest()[:16]


@functools.cache
def _builtins_digest() -> str:
    """The built-ins' code as this process loaded it: hashed once, not on every plan."""
    return _digest(sorted(Path(__file__).parent.glob("*.py")), "builtin")


def workload_key(spec: str) -> str:
    """The store's key for a workload: name or path plus a content hash, so a stored profile is
    used only for the code that made it. Files hash their own source and the Python beside them
    (workload_sources); built-ins hash every module of this package (a thrifty version whose
    workloads changed profiles them again)."""
    name = canonical_name(spec)
    if name.startswith("builtin:"):
        return f"{name}#sha256:{_builtins_digest()}"
    if not Path(name).is_file() or Path(name).suffix != ".py":
        raise WorkloadError(
            f"workload {spec!r} is neither a built-in ({', '.join(BUILTINS)}) nor an existing .py file")
    return f"{name}#sha256:{_digest(workload_files(Path(name)), spec)}"


def workload_sources(path: Path) -> list[Path]:
    """What a workload file may import from where it lies, as `python FILE` does (its folder is first
    on sys.path: workloads.registry): the file, the other .py files beside it and the packages (folders
    with __init__.py) beside it. A profile's key hashes them all (an edited helper module is profiled
    again) and a plan's SkyPilot task mounts them (plan.launch)."""
    path = Path(path)
    beside = sorted(p for p in path.parent.iterdir() if p != path and (
        p.suffix == ".py" and p.is_file() or p.is_dir() and (p / "__init__.py").is_file()))
    return [path, *beside]


def workload_files(path: Path) -> list[Path]:
    """The Python files of workload_sources, packages walked (their .py files, sorted)."""
    files = []
    for source in workload_sources(path):
        files.extend(sorted(source.rglob("*.py")) if source.is_dir() else [source])
    return files
