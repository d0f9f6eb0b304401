# SPDX-License-Identifier: MIT
"""Which GPUs the torch that `thrifty plan`'s GPU task installs can train on (data/torch_cuda.csv).

The task pins the torch installed here (plan.launch) and a GPU VM installs PyPI's default wheel of
it, a CUDA build whose kernels are compiled for a list of GPU architectures. A kernel binary
(cubin) built for compute capability X.y runs on a GPU of capability X.z with z >= y and on no
other major version (NVIDIA, CUDA C++ Programming Guide, "Binary Compatibility"); PyTorch's
wheels carry binaries only (`-gencode arch=compute_XY,code=sm_XY`, no PTX to compile for other
GPUs at load time). So a GPU trains iff one of the build's architectures has its major and a minor
at most its own; on any other the first kernel fails ("no kernel image is available for execution
on the device"). PyPI's torch 2.13.0 is built with CUDA 13.0 for 7.5 (T4) and later: no V100
(7.0), P100 (6.0) or P4 (6.1).
"""

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata

from thrifty.catalog.gpus import GPUSpec, parse_capability
from thrifty.data import data_path
from thrifty.errors import CatalogError
from thrifty.io import read_csv

COLUMNS = ("torch", "cuda", "kernel_archs")


@dataclass(frozen=True)
class TorchCudaBuild:
    """One torch release's default CUDA wheel: its CUDA version and the architectures (major,
    minor) its kernels are compiled for."""

    torch: str
    cuda: str
    kernel_archs: tuple[tuple[int, int], ...]

    def runs_on(self, gpu: GPUSpec) -> bool:
        """Whether the build has kernels for `gpu` (module docstring); True where the GPU's compute
        capability is not known (nothing to refuse it on)."""
        return gpu.compute_capability is None or kernels_run_on(gpu.compute_capability, self.kernel_archs)

    def describe(self) -> str:
        lowest = min(self.kernel_archs)
        return f"torch {self.torch}'s CUDA {self.cuda} build has kernels for compute capability {lowest[0]}.{lowest[1]} and later"


def kernels_run_on(capability: tuple[int, int], binaries: Iterable[tuple[int, int]],
                   ptx: Iterable[tuple[int, int]] = ()) -> bool:
    """Whether a GPU of compute `capability` runs code compiled to `binaries` (cubins: same major,
    minor at most its own) or to `ptx` (compiled for the GPU at load time: any capability at least
    the PTX's). NVIDIA, CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility"."""
    major, minor = capability
    return (any(m == major and n <= minor for m, n in binaries)
            or any((m, n) <= (major, minor) for m, n in ptx))


def installed_torch() -> str | None:
    """The torch version installed here, without its local part (2.13.0 for 2.13.0+cpu); None
    where thrifty plans without torch (its planning core)."""
    try:
        return metadata.version("torch").split("+")[0]
    except metadata.PackageNotFoundError:
        return None


def _archs(text: str, where: str) -> tuple[tuple[int, int], ...]:
    archs = []
    for word in text.split():
        arch = parse_capability(word)
        if arch is None:
            raise CatalogError(f"{where}: kernel_archs must list MAJOR.MINOR words, such as 7.5 8.0, got {word!r}")
        archs.append(arch)
    if not archs:
        raise CatalogError(f"{where}: kernel_archs is empty")
    return tuple(archs)


@functools.cache
def recorded_builds() -> dict[str, TorchCudaBuild]:
    """Every build data/torch_cuda.csv records, by torch version (read once: a bundled file, asked
    for by every plan, projection and served plan)."""
    path = data_path("torch_cuda.csv")
    rows = read_csv(path, CatalogError, "torch CUDA builds", required=COLUMNS)
    return {r["torch"]: TorchCudaBuild(r["torch"], r["cuda"], _archs(r["kernel_archs"], f"{path}:{line}"))
            for line, r in enumerate(rows, start=2)}


def _release(version: str) -> tuple[int, ...]:
    """(2, 13, 1) for "2.13.1" (and for "2.13.1rc1" or "2.13.1.dev20261201": the leading numbers)."""
    numbers = []
    for part in version.split("."):
        digits = part[:len(part) - len(part.lstrip("0123456789"))]
        if not digits:
            break
        numbers.append(int(digits))
        if digits != part:
            break
    return tuple(numbers)


def task_torch_build(version: str | None = None) -> TorchCudaBuild | None:
    """The build a plan's GPU task installs for `version` (default: the torch installed here, which
    the task pins; where none is installed the task installs the newest): the newest recorded
    build at or below it, since PyPI's default CUDA builds only ever drop old GPUs (2.13.1 or 2.14
    is taken as 2.13.0's CUDA 13 build at least). None for a version below every recorded one:
    nothing is known of its kernels, and every GPU is offered."""
    builds = recorded_builds()
    version = version or installed_torch()
    if version is None:
        return builds[max(builds, key=_release)]
    older = [v for v in builds if _release(v) <= _release(version)]
    return builds[max(older, key=_release)] if older else None
