"""Find a workload by built-in name (`builtin:digits`) or by a Python file exposing make_workload()."""

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path

from thrifty.errors import WorkloadError
from thrifty.workloads.base import Workload

BUILTINS = {"digits": "thrifty.workloads.digits:make_workload",
            "digits-bn": "thrifty.workloads.digits:make_bn_workload",
            "tabular": "thrifty.workloads.tabular:make_workload",
            "resnet18-cifar10": "thrifty.workloads.resnet_builtins:make_cifar10",
            "resnet50-imagenet": "thrifty.workloads.resnet_builtins:make_imagenet"}
DEFAULT_WORKLOAD = "builtin:digits"


def _make(module, origin: str, factory_name: str = "make_workload") -> Workload:
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise WorkloadError(f"{origin} has no make_workload() function")
    try:
        workload = factory()
    except Exception as exc:  # the user's code: report it on one line
        raise WorkloadError(f"{origin}: make_workload() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(workload, Workload):
        raise WorkloadError(f"{origin}: make_workload() must return a thrifty.workloads.Workload")
    if workload.train_size < 1:
        raise WorkloadError(f"{origin}: the training data set is empty")
    return workload


def load_workload(spec: str = DEFAULT_WORKLOAD) -> Workload:
    """`builtin:NAME`, a bare built-in NAME, or a path to a .py file with make_workload()."""
    name = spec.removeprefix("builtin:")
    if name in BUILTINS and not spec.endswith(".py"):
        module_name, factory_name = BUILTINS[name].split(":")
        return _make(importlib.import_module(module_name), f"builtin:{name}", factory_name)
    if spec.startswith("builtin:"):
        raise WorkloadError(f"unknown built-in workload {name!r}; choose from {', '.join(BUILTINS)}")
    path = Path(spec)
    if not path.is_file():
        raise WorkloadError(
            f"workload {spec!r} is neither a built-in ({', '.join(BUILTINS)}) nor an existing .py file")
    module_name = f"thrifty_user_workload_{abs(hash(str(path.resolve())))}"
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)  # type: ignore[union-attr]
    except Exception as exc:
        raise WorkloadError(f"{path}: importing failed with {type(exc).__name__}: {exc}") from exc
    return _make(module, str(path))


def canonical_name(spec: str) -> str:
    """A stable key for the store: built-ins by name, files by absolute path."""
    name = spec.removeprefix("builtin:")
    if name in BUILTINS and not spec.endswith(".py"):
        return f"builtin:{name}"
    return str(Path(spec).resolve())


def workload_key(spec: str) -> str:
    """The store's key for a workload: built-ins by name, files by path and content hash, so an
    edited workload file is profiled again."""
    name = canonical_name(spec)
    if name.startswith("builtin:"):
        return name
    try:
        digest = hashlib.sha256(Path(name).read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise WorkloadError(f"cannot read workload file {spec}: {exc.strerror}") from None
    return f"{name}#sha256:{digest}"
