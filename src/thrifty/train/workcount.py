"""Moved to thrifty.workloads.workcount (the work of a workload's step sits below training, so
workloads.published can count its models without importing train). These names stay importable
from here for the importers in tests/ and benchmarks/ written before the move; delete this module
once they import thrifty.workloads.workcount."""

from thrifty.workloads.workcount import CudnnRNN, FusedDropout, KernelRecorder, count_model_step, count_workload

__all__ = ["CudnnRNN", "FusedDropout", "KernelRecorder", "count_model_step", "count_workload"]
