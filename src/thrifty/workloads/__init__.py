# SPDX-License-Identifier: MIT
"""Training jobs: the Workload protocol, built-ins that run offline, and loading user files.

Names resolve on first use (PEP 562), so `thrifty.workloads.names` (no torch) can be imported alone
while `from thrifty.workloads import Workload` keeps working for workload files."""

from importlib import import_module

_WHERE = {"Recipe": "base", "Workload": "base", "classification_accuracy": "base", "fetch_batch": "base",
          "load_workload": "registry", "BUILTINS": "names", "DEFAULT_WORKLOAD": "names",
          "canonical_name": "names", "workload_key": "names"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'thrifty.workloads' has no attribute {name!r}")
    return getattr(import_module(f"thrifty.workloads.{_WHERE[name]}"), name)
