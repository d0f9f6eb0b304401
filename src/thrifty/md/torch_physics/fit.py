# SPDX-License-Identifier: MIT
"""Fit one ion diameter (d+ or d-) of the nanoconfinement model to a target density profile by autograd
through a short torch-engine run.

The run: R replicas of the model, equilibrated without a graph (`window`), then `steps` BAOAB Langevin
steps with the graph kept (create_graph, as in integrator.step) from that fixed start with a fixed seed:
the same random forces for every diameter (common random numbers), so the profile is a smooth,
deterministic function of the diameter and its derivative is exact (autograd through the trajectory).
The observable is a Gaussian-kernel density profile (kernel KERNEL_NM) of the ion's centres, on
md.profiles' bin centres, averaged over the window's steps and replicas, in mol/L:
rho(z) = sum_i exp(-(z - z_i)^2 / 2 w^2) / (sqrt(2 pi) w) / (A N_A) per sample (a smoothed histogram).
The loss is the mean over bins of (rho - target)^2, minimised in one dimension by secant steps on its
derivative (Newton's method with the curvature from the last two derivatives; Nocedal & Wright,
"Numerical Optimization", 2nd ed., ch. 3.5), the first a fixed step downhill, each capped at
MAX_STEP_NM.
"""

import math
from dataclasses import dataclass, replace

import torch

from thrifty.md import profiles as prof
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.torch_physics import integrator as it
from thrifty.md.torch_physics.ewald import Ewald, prepare_ewald
from thrifty.md.torch_physics.potential import energy_and_forces
from thrifty.md.torch_physics.replicas import Replicas, replicas

KERNEL_NM = 0.1  # Gaussian kernel width w: two of md.profiles' bins
MAX_STEP_NM = 0.05
IONS = ("cation", "anion")


@dataclass(frozen=True)
class Window:
    batch: Replicas
    setup: Ewald
    start: it.State  # equilibrated at the model's diameters
    seed: int  # of the differentiated steps' random forces
    steps: int
    grid_nm: torch.Tensor  # (bins,) md.profiles' bin centres, in the box's z


@dataclass(frozen=True)
class Fit:
    diameter_nm: float
    converged: bool  # the last step was below the tolerance
    history: tuple[tuple[float, float, float], ...]  # (diameter nm, loss (mol/L)^2, dloss/dd) per evaluation


def window(model: NanoconfinementModel, n_replicas: int = 4, equilibration_steps: int = 400, steps: int = 100,
           seed: int = 0) -> Window:
    """R copies of `model` equilibrated for `equilibration_steps` (seed), ready for `steps` differentiated ones."""
    model.check()
    batch, positions = replicas([model] * n_replicas, seed)
    setup = prepare_ewald(batch)
    generator = torch.Generator().manual_seed(seed)
    state = it.start(batch, setup, positions, generator)
    for _ in range(equilibration_steps):
        state = it.step(batch, setup, state, generator=generator)
    edges = torch.as_tensor(prof.edges_nm(tuple(batch.walls_nm[0].tolist()), True), dtype=batch.box_nm.dtype)
    return Window(batch, setup, state, seed + 1, steps, 0.5 * (edges[1:] + edges[:-1]))


def smooth_profile(w: Window, ion: str, diameter_nm: torch.Tensor) -> torch.Tensor:
    """(bins,) the window's Gaussian-kernel profile of `ion` (mol/L) with that ion's diameter set to
    `diameter_nm` (a 0-d tensor); differentiable in it."""
    if ion not in IONS:
        raise ValueError(f"ion must be one of {IONS}, got {ion!r}")
    b = w.batch
    chosen = (b.charges_e > 0 if ion == "cation" else b.charges_e < 0) & b.mask
    b = replace(b, diameters_nm=torch.where(chosen, diameter_nm, b.diameters_nm))
    energy, forces = energy_and_forces(b, w.setup, w.start.positions_nm, create_graph=True)
    state = replace(w.start, forces_kj_mol_nm=forces, potential_kj_mol=energy)
    generator = torch.Generator().manual_seed(w.seed)
    total = torch.zeros_like(w.grid_nm)
    for _ in range(w.steps):
        state = it.step(b, w.setup, state, generator=generator, create_graph=True)
        gap = state.positions_nm[..., 2, None] - w.grid_nm  # (R, N, bins)
        kernel = torch.exp(-gap * gap / (2 * KERNEL_NM ** 2)) / (math.sqrt(2 * math.pi) * KERNEL_NM)
        total = total + (kernel * chosen[..., None]).sum((0, 1))
    area_nm2 = float(b.box_nm[0, 0] * b.box_nm[0, 1])
    return total / (w.steps * len(b.models) * area_nm2 * prof.PER_NM3_PER_MOLAR)


def loss_and_gradient(w: Window, ion: str, target_molar: torch.Tensor, diameter_nm: float) -> tuple[float, float]:
    d = torch.tensor(diameter_nm, dtype=w.grid_nm.dtype, requires_grad=True)
    loss = ((smooth_profile(w, ion, d) - target_molar) ** 2).mean()
    (gradient,) = torch.autograd.grad(loss, d)
    return float(loss.detach()), float(gradient)


def fit_diameter(w: Window, ion: str, target_molar: torch.Tensor, start_nm: float, iterations: int = 10,
                 first_step_nm: float = 0.02, tolerance_nm: float = 1e-4) -> Fit:
    """Secant steps on dloss/dd from `start_nm`; stops after a step below `tolerance_nm` or `iterations`."""
    d, history, step = start_nm, [], math.inf
    for _ in range(iterations):
        loss, gradient = loss_and_gradient(w, ion, target_molar, d)
        history.append((d, loss, gradient))
        if len(history) > 1 and (curvature := (gradient - history[-2][2]) / (d - history[-2][0])) > 0:
            step = -gradient / curvature
        else:  # first step, or the loss is not convex between the last two points: go downhill
            step = -math.copysign(first_step_nm, gradient)
        step = max(-MAX_STEP_NM, min(MAX_STEP_NM, step))
        d += step
        if abs(step) < tolerance_nm:
            break
    return Fit(d, abs(step) < tolerance_nm, tuple(history))
