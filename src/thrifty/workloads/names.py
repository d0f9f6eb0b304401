"""Workload names without loading any workload (no torch): the built-ins, and the keys under
which the store keeps a workload's profiles."""

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


def workload_key(spec: str) -> str:
    """The store's key for a workload: built-ins by name, files by path and content hash, so an
    edited workload file is profiled again."""
    name = canonical_name(spec)
    if name.startswith("builtin:"):
        return name
    if not Path(name).is_file():
        raise WorkloadError(
            f"workload {spec!r} is neither a built-in ({', '.join(BUILTINS)}) nor an existing .py file")
    try:
        digest = hashlib.sha256(Path(name).read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise WorkloadError(f"cannot read workload file {spec}: {exc.strerror}") from None
    return f"{name}#sha256:{digest}"
