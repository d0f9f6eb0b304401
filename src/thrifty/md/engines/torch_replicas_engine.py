# SPDX-License-Identifier: MIT
"""The torch engine (md.torch_physics: BAOAB Langevin, slab Ewald) behind the engine protocol: R
nanoconfinement systems advance together (one generator, one step for all, as
tests/md/torch_reference_sampling.py's plain loop: with the same seed, chunk and sampling the
profiles are that loop's, which the tests check). `thrifty md run --engine torch` is a batch of
one; a campaign batches --replicas points. It starts from the model's lattice without an energy
minimisation, so let the equilibration cover the lattice's relaxation. Checkpoints: md.engines.torch_checkpoint.
"""

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from thrifty.errors import ThriftyError
from thrifty.md.engines.protocol import Progress, ReplicaLayout, Saved
from thrifty.md.engines.torch_checkpoint import TorchCheckpoint, check_resume, pack, unpack
from thrifty.md.nanoconfinement import SPECIES_NAMES, TIMESTEP_PS, NanoconfinementModel, ion_counts, radii_nm, slit_nm
from thrifty.md.torch_physics import integrator as it
from thrifty.md.torch_physics.ewald import prepare_ewald
from thrifty.md.torch_physics.replicas import replicas

DTYPES = {"float64": torch.float64, "float32": torch.float32}


def layout(model: NanoconfinementModel) -> ReplicaLayout:
    cations, anions = ion_counts(model)
    return ReplicaLayout("nanoconfinement", asdict(model), np.array([0] * cations + [1] * anions), SPECIES_NAMES,
                         slit_nm(model), True, model.side_nm ** 2, TIMESTEP_PS, radii_nm(model),
                         {**asdict(model), "box_nm": model.side_nm, "box_z_nm": model.box_z_nm})


class TorchEngine:
    """R replicas of the nanoconfinement model, float64 or float32, on the CPU or a GPU."""

    name = "torch"

    def __init__(self, models: list[NanoconfinementModel], seed: int = 0, dtype: str = "float64",
                 device: str = "cpu") -> None:
        if dtype not in DTYPES:
            raise ThriftyError(f"unknown --dtype {dtype!r}; choose {', '.join(DTYPES)}")
        self.seed, self.dtype, self.device = seed, dtype, device
        self.batch, self._positions = replicas(models, seed, DTYPES[dtype], device)  # checks every model
        self.layouts = [layout(m) for m in models]
        self.counts = [lay.particles for lay in self.layouts]
        self.setup = prepare_ewald(self.batch)
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.identity = [{"engine": "torch", "dtype": dtype, "device": torch.device(device).type, "system": lay.system,
                          "parameters": lay.parameters, "particles": lay.particles} for lay in self.layouts]
        self._state: it.State | None = None

    @property
    def state(self) -> it.State:
        if self._state is None:
            raise RuntimeError("start() or restore() the engine first")
        return self._state

    def read(self, payload: bytes, where: Path) -> Saved:
        saved = unpack(payload, where)
        check_resume(saved.identity, self.identity, where)
        return Saved(Progress(saved.step, saved.samples, saved.blocks), saved.identity[0]["seed"],
                     saved.identity[0]["sampling"], saved)

    def start(self) -> None:
        self._state = it.start(self.batch, self.setup, self._positions, self.generator)

    def restore(self, saved: Saved) -> None:
        checkpoint: TorchCheckpoint = saved.state
        to: dict[str, Any] = {"dtype": DTYPES[self.dtype], "device": self.device}
        self._state = it.restore(self.batch, self.setup, torch.as_tensor(checkpoint.positions_nm, **to),
                                 torch.as_tensor(checkpoint.velocities_nm_ps, **to))
        self.generator.set_state(torch.from_numpy(checkpoint.rng_state))

    def advance(self, steps: int) -> None:
        state = self.state
        for _ in range(steps):
            state = it.step(self.batch, self.setup, state, generator=self.generator)
        self._state = state

    def positions_z_nm(self) -> list[np.ndarray]:
        z = self.state.positions_nm[..., 2].double().cpu().numpy()
        return [z[i, :k] for i, k in enumerate(self.counts)]

    def energies(self, step: int) -> list[dict[str, float]]:
        """One thermo.csv row per replica (temperature: integrator.temperature_k, 3 N degrees of freedom)."""
        state = self.state
        return [{"step": step, "time_ps": step * it.TIMESTEP_PS, "potential_energy_kj_mol": u,
                 "kinetic_energy_kj_mol": k, "temperature_k": t}
                for u, k, t in zip(state.potential_kj_mol.tolist(), it.kinetic_kj_mol(self.batch, state).tolist(),
                                   it.temperature_k(self.batch, state).tolist(), strict=True)]

    def payload(self, progress: Progress, sampling: dict) -> bytes:
        identity = [this | {"seed": self.seed, "sampling": sampling} for this in self.identity]
        return pack(TorchCheckpoint(identity, progress.step, progress.samples, progress.blocks,
                                    self.state.positions_nm.cpu().numpy(), self.state.velocities_nm_ps.cpu().numpy(),
                                    self.generator.get_state().numpy()))

    def final_state(self) -> list[tuple[np.ndarray, np.ndarray]]:
        positions = self.state.positions_nm.double().cpu().numpy()
        velocities = self.state.velocities_nm_ps.double().cpu().numpy()
        return [(positions[i, :k], velocities[i, :k]) for i, k in enumerate(self.counts)]

    def describe(self) -> dict[str, Any]:
        """What ran: the engine, its precision, and per replica the Ewald splitting it chose
        (md.torch_physics.ewald: real-space reach, alpha, k-vectors) and, on the CPU, the threads."""
        return {"engine": self.name, "platform": f"torch-{torch.device(self.device).type}", "dtype": self.dtype,
                "replicas": len(self.layouts),
                "splitting": {"real_space_reach_nm": self.setup.reach_nm.tolist(),
                              "alpha_per_nm": self.setup.alpha_per_nm.tolist(),
                              "k_vectors": (self.setup.weight_nm > 0).sum(-1).tolist()},
                "threads": torch.get_num_threads() if torch.device(self.device).type == "cpu" else None}
