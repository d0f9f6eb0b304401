# SPDX-License-Identifier: MIT
"""Find a workload by built-in name (`builtin:digits`) or by a Python file exposing make_workload()."""

import importlib
import importlib.util
import math
import numbers
import sys
from pathlib import Path

import numpy as np

from thrifty.errors import WorkloadError
from thrifty.workloads.base import Workload
from thrifty.workloads.names import BUILTINS, DEFAULT_WORKLOAD, canonical_name


def _make(module, origin: str, factory_name: str = "make_workload") -> Workload:
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise WorkloadError(f"{origin} has no make_workload() function")
    try:
        workload = factory()
    except SystemExit as exc:  # the user's code ended the process: say so instead of vanishing
        raise WorkloadError(f"{origin}: make_workload() called sys.exit({exc.code!r})") from None
    except Exception as exc:  # the user's code: report it on one line
        raise WorkloadError(f"{origin}: make_workload() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(workload, Workload):
        raise WorkloadError(f"{origin}: make_workload() must return a thrifty.workloads.Workload")
    _check_fields(workload, origin)
    if workload.train_size < 1:
        raise WorkloadError(f"{origin}: the training data set is empty")
    return workload


def _check_fields(workload: Workload, origin: str) -> None:
    """The Workload's fields of the types they are used as, refused in one line naming the field (a
    target given as the string "0.9" had ended a profile's minute of work in a traceback, and a rank
    mid-run; a default batch of 0 had been blamed on a --global-batch nobody gave)."""
    def bad(field: str, wanted: str) -> WorkloadError:
        return WorkloadError(f"{origin}: Workload.{field} must be {wanted}, got {getattr(workload, field)!r}")

    for name in ("make_model", "loss_fn", "make_optimizer", "evaluate", "lr_schedule"):
        if not callable(getattr(workload, name)):
            raise bad(name, "callable")
    for name in ("name", "metric_name", "description"):
        if not isinstance(getattr(workload, name), str):
            raise bad(name, "a string")
    if not workload.name.strip():
        raise bad("name", "a non-empty string")
    target = workload.target_metric  # numpy's numbers count (np.float32, np.int64, np.bool_), as Python's
    if isinstance(target, (bool, np.bool_)) or not isinstance(target, numbers.Real) or not math.isfinite(target):
        raise bad("target_metric", "a finite number")
    batch = workload.default_global_batch
    if isinstance(batch, (bool, np.bool_)) or not isinstance(batch, numbers.Integral) or batch < 1:
        raise bad("default_global_batch", "a positive whole number")
    if not isinstance(workload.higher_is_better, (bool, np.bool_)):
        raise bad("higher_is_better", "True or False")
    # as Python's own types from here on (a np.int64 batch had failed later, in the JSON it was written to)
    workload.target_metric, workload.default_global_batch = float(target), int(batch)
    workload.higher_is_better = bool(workload.higher_is_better)
    for name in ("train_data", "eval_data"):
        if not hasattr(getattr(workload, name), "__len__"):
            raise bad(name, "a sized torch Dataset (with __len__)")
    if len(workload.eval_data) < 1:
        raise WorkloadError(f"{origin}: the evaluation data set is empty (its metric would read 0)")
    why = workload.unreachable(workload.target_metric, origin)  # 95 for an accuracy in [0, 1]
    if why is not None:
        raise WorkloadError(why.replace("--target", "Workload.target_metric"))


def _check_model(workload: Workload, origin: str) -> None:
    """A user's make_model() must build a torch module; checked once here, in the command's own
    process, so that no rank or profiling process is the first to find out."""
    from torch import nn
    try:
        model = workload.make_model()
    except Exception as exc:  # the user's code: report it on one line
        raise WorkloadError(f"workload {origin}: make_model() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise WorkloadError(f"workload {origin}: make_model() must return a torch.nn.Module, got {type(model).__name__}")


def load_workload(spec: str = DEFAULT_WORKLOAD) -> Workload:
    """`builtin:NAME`, a bare built-in NAME, or a path to a .py file with make_workload()."""
    name = canonical_name(spec)  # the one place that tells built-ins from files
    if name.startswith("builtin:"):
        module_name, factory_name = BUILTINS[name.removeprefix("builtin:")].split(":")
        return _make(importlib.import_module(module_name), name, factory_name)
    path = Path(spec)
    if not path.is_file() or path.suffix != ".py":
        raise WorkloadError(
            f"workload {spec!r} is neither a built-in ({', '.join(BUILTINS)}) nor an existing .py file")
    module_name = f"thrifty_user_workload_{abs(hash(str(path.resolve())))}"
    folder = str(path.resolve().parent)
    # its own folder first while it imports, as `python FILE` has it (modules beside it import), then last:
    # a sqlite3.py beside it had shadowed the one thrifty's store imports later in the ranks
    sys.path.insert(0, folder)
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:  # not for a .py file that exists
            raise WorkloadError(f"workload {path}: Python cannot load it as a module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    except SystemExit as exc:
        sys.modules.pop(module_name, None)
        raise WorkloadError(f"workload {path}: importing it called sys.exit({exc.code!r})") from None
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise WorkloadError(f"workload {path}: importing it failed with {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(folder)
        if folder not in sys.path:
            sys.path.append(folder)  # its functions' own later imports still find what lies beside it
    workload = _make(module, str(path))
    _check_model(workload, str(path))
    return workload
