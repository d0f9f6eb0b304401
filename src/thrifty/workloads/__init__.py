"""Training jobs: the Workload protocol, built-ins that run offline, and loading user files."""

from thrifty.workloads.base import Recipe, Workload, classification_accuracy, fetch_batch
from thrifty.workloads.registry import BUILTINS, DEFAULT_WORKLOAD, canonical_name, load_workload, workload_key

__all__ = ["BUILTINS", "Recipe", "DEFAULT_WORKLOAD", "Workload", "canonical_name", "classification_accuracy",
           "fetch_batch", "load_workload", "workload_key"]
