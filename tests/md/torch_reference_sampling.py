# SPDX-License-Identifier: MIT
"""A reference the tests hold the MD job loop to: density profiles of R replicas from one batched
torch run, written as a plain loop over the integrator with no engine protocol, checkpoints or
convergence test (the library's one loop is md.engines.job_loop driving
md.engines.torch_replicas_engine; with the same seed, chunk and sampling its profiles are these).

Each replica samples its ions' z every `chunk` steps after `equilibration_steps` into the block
histograms of md.profiles (same bins, block averages and mol/L units). The start is
md.nanoconfinement's lattice (a diameter between layers, so no overlaps) with Maxwell-Boltzmann
velocities; there is no energy minimisation, so let the equilibration cover the lattice's relaxation.
"""

import numpy as np
import torch

from thrifty.md import profiles as prof
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.torch_physics import integrator as it
from thrifty.md.torch_physics.ewald import prepare_ewald
from thrifty.md.torch_physics.replicas import replicas


def sample_profiles(models: list[NanoconfinementModel], steps: int, equilibration_steps: int = 0, chunk: int = 100,
                    samples_per_block: int = 10, seed: int = 0, dtype: torch.dtype = torch.float64,
                    device: str | torch.device = "cpu") -> list[prof.Profiles]:
    """Run all replicas `steps` Langevin steps together; each replica's cation and anion profiles."""
    for model in models:
        model.check()
    batch, positions = replicas(models, seed, dtype, device)
    setup = prepare_ewald(batch)
    generator = torch.Generator(device=device).manual_seed(seed)
    state = it.start(batch, setup, positions, generator)
    counts = batch.mask.sum(-1).tolist()
    species = [np.where(batch.charges_e[i, :n].cpu().numpy() > 0, 0, 1) for i, n in enumerate(counts)]
    edges = [prof.edges_nm(wall_pair, True) for wall_pair in batch.walls_nm.double().cpu().tolist()]
    blocks = [np.zeros((0, 2, len(e) - 1)) for e in edges]
    samples = 0
    for done in range(chunk, steps + 1, chunk):
        for _ in range(chunk):
            state = it.step(batch, setup, state, generator=generator)
        if done <= equilibration_steps:
            continue
        z = state.positions_nm[..., 2].double().cpu().numpy()
        for i, n in enumerate(counts):
            blocks[i] = prof.add_sample(blocks[i], prof.histogram(z[i, :n], species[i], 2, edges[i]), samples,
                                        samples_per_block)
        samples += 1
    return [prof.profiles(b, samples, samples_per_block, e, m.side_nm ** 2, symmetric=True)  # between walls
            for b, e, m in zip(blocks, edges, models, strict=True)]
