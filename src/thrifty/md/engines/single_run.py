# SPDX-License-Identifier: MIT
"""One MD job as `thrifty md run` asks for it: the engine's options checked in one line each, the
sampling settings with their defaults, the engine made, and the job loop run (with the torch
engine's thread count). Importable without OpenMM or torch: each is imported only for the engine
that needs it, so `md run --engine torch` works where OpenMM is not installed.

"""

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from thrifty.errors import ThriftyError
from thrifty.md.engines.choices import DEFAULT_PLATFORM, ENGINES, PLATFORMS, SYSTEMS
from thrifty.md.engines.protocol import Engine
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.sampling_settings import SamplingSettings
from thrifty.transient.protocol import JobCheckpoints

DEFAULT_EQUILIBRATION_STEPS = 20_000  # nanoconfinement without --steps; with --steps N: N / 5
DEFAULT_STEPS = 5000  # the test systems (lj, ions)
DEFAULT_CHUNK = 100


@dataclass(frozen=True)
class EngineOptions:
    """Which engine runs the job and how; `checked()` refuses what does not apply, in one line."""

    engine: str = "openmm"
    system: str = "nanoconfinement"
    platform: str | None = None  # OpenMM's (None: Reference)
    dtype: str = "float64"  # the torch engine's
    device: str = "cpu"  # the torch engine's
    threads: int | None = None  # the torch engine's CPU threads (None: every core this process may use)
    seed: int = 0

    def checked(self) -> "EngineOptions":
        """These options with the OpenMM platform resolved; a ThriftyError names the first that
        does not apply (before any output folder is made)."""
        if self.system not in SYSTEMS:
            raise ThriftyError(f"unknown MD system {self.system!r}; choose {', '.join(SYSTEMS)}")
        if self.engine not in ENGINES:
            raise ThriftyError(f"unknown --engine {self.engine!r}; choose {', '.join(ENGINES)}")
        if self.engine == "torch":
            return self._checked_torch()
        if (self.dtype, self.device) != ("float64", "cpu"):
            raise ThriftyError("--dtype and --device apply to --engine torch; OpenMM takes --platform")
        if self.threads is not None:
            raise ThriftyError("--threads applies to --engine torch (OpenMM's CPU platform reads OPENMM_CPU_THREADS)")
        platform = self.platform or DEFAULT_PLATFORM
        if platform not in PLATFORMS:
            raise ThriftyError(f"unknown OpenMM platform {platform!r}; choose {', '.join(PLATFORMS)}")
        from thrifty.extras import require
        require("openmm")
        from thrifty.md.engines.openmm_systems import get_platform
        get_platform(platform)  # unavailable here: say so before any folder is made
        return replace(self, platform=platform)

    def _checked_torch(self) -> "EngineOptions":
        from thrifty.extras import require
        require("torch")
        if self.system != "nanoconfinement":
            raise ThriftyError(f"--engine torch runs --system nanoconfinement only, not {self.system}")
        if self.platform is not None:
            raise ThriftyError("--platform applies to --engine openmm; the torch engine takes --device cpu or cuda")
        check_dtype_and_device(self.dtype, self.device)
        if self.threads is not None and self.threads < 1:
            raise ThriftyError(f"--threads must be at least 1, got {self.threads}")
        if self.device == "cuda":
            import torch
            if not torch.cuda.is_available():
                raise ThriftyError("--device cuda: torch finds no CUDA device here; give --device cpu")
        return self

    def make(self, model: NanoconfinementModel | None) -> Engine:
        """The engine these (checked) options ask for, for `model` (None for the test systems)."""
        return make_engine(self.engine, [] if model is None else [model], seed=self.seed, dtype=self.dtype,
                           device=self.device, platform=self.platform or DEFAULT_PLATFORM, system=self.system)

    def run(self, model: NanoconfinementModel | None, settings: SamplingSettings, out: Path,
            checkpoints: JobCheckpoints, on_chunk: Callable[[int], None] | None = None) -> dict:
        """Run (or resume) the job in `out`; its summary (md.engines.job_loop.run_one)."""
        from thrifty.md.engines.job_loop import run_one
        engine = self.make(model)
        if self.engine != "torch":
            return run_one(engine, settings, out, checkpoints, on_chunk)
        from thrifty.md.torch_physics.threads import available_cores, use_threads
        with use_threads(self.threads or available_cores()):
            return run_one(engine, settings, out, checkpoints, on_chunk)


def check_dtype_and_device(dtype: str, device: str) -> None:
    """The torch engine's --dtype and --device (md run and md sweep), refused in one line."""
    if dtype not in ("float64", "float32"):
        raise ThriftyError(f"unknown --dtype {dtype!r}; choose float64 or float32")
    if device not in ("cpu", "cuda"):
        raise ThriftyError(f"unknown --device {device!r}; choose cpu or cuda")


def make_engine(engine: str, models: list[NanoconfinementModel], *, seed: int, dtype: str = "float64",
                device: str = "cpu", platform: str = DEFAULT_PLATFORM, system: str = "nanoconfinement") -> Engine:
    """The engine for `models` (md.engines.protocol.Engine): the torch engine runs them as one batch
    of replicas, OpenMM one system at a time (`models` empty for the test systems lj and ions)."""
    if engine == "torch":
        if system != "nanoconfinement" or not models:
            raise ThriftyError("--engine torch runs --system nanoconfinement only")
        from thrifty.md.engines.torch_replicas_engine import TorchEngine
        return TorchEngine(models, seed, dtype, device)
    if engine != "openmm":
        raise ThriftyError(f"unknown --engine {engine!r}; choose {', '.join(ENGINES)}")
    if len(models) > 1:
        raise ThriftyError(f"the OpenMM engine runs one point at a time, not a batch of {len(models)}: "
                           f"give --replicas 1, or --engine torch")
    from thrifty.md.engines.openmm_engine import OpenMMEngine
    return OpenMMEngine(system, platform, seed, models[0] if models else None)


def run_length(system: str, steps: int | None, chunk: int | None, cap_steps: int) -> tuple[int, int]:
    """The last step the run may reach and its chunk: --steps, or for nanoconfinement without it
    --cap-steps (it stops earlier once converged); a chunk of at most the run, 100 by default."""
    if (steps is not None and steps < 1) or (chunk is not None and chunk < 1) or cap_steps < 1:
        raise ThriftyError("--steps, --chunk and --cap-steps must be positive")
    last = cap_steps if steps is None and system == "nanoconfinement" else steps or DEFAULT_STEPS
    if chunk is not None and chunk > last:
        raise ThriftyError(f"--chunk {chunk:,} is longer than the run ({'--cap-steps' if steps is None else '--steps'}"
                           f" {last:,}): give a chunk of at most that many steps")
    return last, min(DEFAULT_CHUNK, last) if chunk is None else chunk


def nanoconfinement_sampling(steps: int | None, chunk: int, equilibrate: int | None, tolerance_molar: float,
                             relative_tolerance: float, cap_steps: int) -> SamplingSettings:
    """Sampling of a nanoconfinement run: to convergence (capped) without `steps`, else exactly
    `steps`; equilibration 20,000 steps, or steps / 5 with `steps`."""
    if equilibrate is None:
        equilibrate = DEFAULT_EQUILIBRATION_STEPS if steps is None else steps // 5
    settings = SamplingSettings(steps, chunk, equilibrate, tolerance_molar=tolerance_molar,
                                relative_tolerance=relative_tolerance, cap_steps=cap_steps)
    settings.check()
    return settings


def fixed_length_sampling(steps: int, chunk: int) -> SamplingSettings:
    """Sampling of a test system (lj, ions): `steps` steps, no equilibration, no convergence test."""
    settings = SamplingSettings(steps, chunk, equilibration_steps=0)
    settings.check()
    return settings
