# SPDX-License-Identifier: MIT
"""The physics of the batched, differentiable torch engine for the nanoconfinement model
(md.nanoconfinement); the engine itself, which the job loop drives, is md.engines.torch_replicas_engine.

R replicas with different parameters in padded tensors (replicas), a Verlet neighbour list for a
run's pair terms (neighbours) and dense all-pairs with the minimum image for autograd (pairs), WCA ion-ion and ion-wall repulsions (short_range), slab Ewald electrostatics (ewald),
hand-derived forces for runs, in groups of replicas of similar size (forces), autograd through the
dynamics for gradients (potential), and a BAOAB Langevin integrator (integrator). Runs are
sampled by the one MD job loop (md.engines.job_loop with md.engines.torch_replicas_engine):
`thrifty md run --engine torch` runs one replica through it, and an ion diameter is fitted to a
target profile by autograd through a short run (fit, imported on its own: not re-exported here). float64 or float32, CPU or GPU (written for both;
tested on CPU); threads sets torch's thread count for a run. Imports torch: nothing on the CLI's import path may import this package.
"""

from thrifty.md.torch_physics.ewald import Ewald, prepare_ewald
from thrifty.md.torch_physics.potential import TERMS, energies, energy_and_forces
from thrifty.md.torch_physics.replicas import Replicas, replicas

__all__ = ["TERMS", "Ewald", "Replicas", "energies", "energy_and_forces", "prepare_ewald", "replicas"]
