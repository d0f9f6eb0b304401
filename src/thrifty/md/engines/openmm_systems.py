# SPDX-License-Identifier: MIT
"""OpenMM systems for the MD jobs (units: nm, ps, kJ/mol, amu, e), and OpenMM's platforms.

- `lj`: a Lennard-Jones fluid (argon: sigma 0.34 nm, epsilon 0.996 kJ/mol, 39.95 amu) in a cubic
  periodic box at reduced density 0.8, cutoff 2.5 sigma with a switching function.
- `ions`: monovalent cations and anions between two planar walls in implicit water, after the
  Jadhao group's nanoconfinement simulations (e.g. Kadupitiya, Fox & Jadhao, "Machine learning for
  parameter auto-tuning in molecular dynamics", 2019): water is a continuum of relative
  permittivity 80, so charges are scaled by 1/sqrt(80) in vacuum Coulomb (reaction field beyond
  the cutoff); ions repel each other with a WCA (purely repulsive LJ) core; each wall is a 9-3 LJ
  wall. The box is periodic in x and y; z is padded so the walls confine the ions.
Positions start on a lattice and velocities are drawn from a seeded Maxwell-Boltzmann; the
Langevin integrator's seed is fixed, so on the Reference platform a run is reproducible bit for bit.
Each system carries its name and builder parameters, which a checkpoint records to refuse a resume
into a different system (OpenMM itself would only fail deep inside with "wrong number of particles").
"""

import math
from dataclasses import dataclass

import numpy as np
import openmm
from openmm import unit

from thrifty.errors import ThriftyError
from thrifty.md.nanoconfinement import WATER_PERMITTIVITY


@dataclass(frozen=True)
class MDSystem:
    name: str
    parameters: dict[str, float]  # the builder's arguments that shape the system (not the seed)
    system: openmm.System
    positions: np.ndarray  # nm
    temperature_k: float
    timestep_ps: float
    species: np.ndarray  # per particle: an index into species_names
    species_names: tuple[str, ...]  # names the density-profile columns, e.g. cation_per_nm3
    slit_nm: tuple[float, float] | None  # z of the two walls in the box, for density profiles along z
    radii_nm: tuple[float, ...] | None = None  # per species: an ion touches a wall at this distance from it


def _lattice(n: int, box_nm: np.ndarray, rng: np.random.Generator, jitter_nm: float = 0.01) -> np.ndarray:
    per_side = math.ceil(n ** (1 / 3))
    grid = np.stack(np.meshgrid(*(np.arange(per_side),) * 3, indexing="ij"), -1).reshape(-1, 3)[:n]
    positions = (grid + 0.5) / per_side * box_nm
    return positions + rng.normal(0.0, jitter_nm, positions.shape)


def lennard_jones_fluid(n_atoms: int = 216, seed: int = 0) -> MDSystem:
    sigma, epsilon, mass = 0.34, 0.996, 39.948
    box = (n_atoms / 0.8) ** (1 / 3) * sigma
    system = openmm.System()
    system.setDefaultPeriodicBoxVectors(openmm.Vec3(box, 0, 0), openmm.Vec3(0, box, 0), openmm.Vec3(0, 0, box))
    force = openmm.NonbondedForce()
    force.setNonbondedMethod(openmm.NonbondedForce.CutoffPeriodic)
    force.setCutoffDistance(min(2.5 * sigma, 0.49 * box))
    force.setUseSwitchingFunction(True)
    force.setSwitchingDistance(min(2.2 * sigma, 0.45 * box))
    force.setUseDispersionCorrection(True)
    for _ in range(n_atoms):
        system.addParticle(mass)
        force.addParticle(0.0, sigma, epsilon)
    system.addForce(force)
    rng = np.random.default_rng(seed)
    return MDSystem("lj", {"n_atoms": n_atoms}, system, _lattice(n_atoms, np.full(3, box), rng), 120.0, 0.005,
                    np.zeros(n_atoms, int), ("particle",), None)


def confined_ions(n_pairs: int = 60, wall_separation_nm: float = 3.0, seed: int = 0) -> MDSystem:
    """n_pairs cations and anions (diameter 0.5 nm, 1 M-like) between walls at z = 0 and z = h."""
    diameter, epsilon, mass = 0.5, 1.0, 40.0
    h = wall_separation_nm
    side = math.sqrt(2 * n_pairs / (h * 1.2))  # about 1 M ions in the slit
    box_z = h + 3.0
    system = openmm.System()
    system.setDefaultPeriodicBoxVectors(openmm.Vec3(side, 0, 0), openmm.Vec3(0, side, 0), openmm.Vec3(0, 0, box_z))
    scale = 1.0 / math.sqrt(WATER_PERMITTIVITY)
    coulomb = openmm.NonbondedForce()
    coulomb.setNonbondedMethod(openmm.NonbondedForce.CutoffPeriodic)
    coulomb.setCutoffDistance(min(1.5, 0.49 * side))
    coulomb.setReactionFieldDielectric(1.0)  # the medium is already in the scaled charges
    wca = openmm.CustomNonbondedForce(
        "step(rc - r) * (4 * eps * ((sig / r)^12 - (sig / r)^6) + eps); rc = sig * 2^(1/6)")
    wca.addGlobalParameter("eps", epsilon)
    wca.addGlobalParameter("sig", diameter)
    wca.setNonbondedMethod(openmm.CustomNonbondedForce.CutoffPeriodic)
    wca.setCutoffDistance(diameter * 2 ** (1 / 6))
    walls = openmm.CustomExternalForce(
        "ew * ((s / dz1)^9 - 1.5 * (s / dz1)^3 + (s / dz2)^9 - 1.5 * (s / dz2)^3);"
        "dz1 = max(z - z0, 0.05); dz2 = max(z1 - z, 0.05)")
    for name, value in (("ew", 2.0), ("s", diameter / 2), ("z0", 1.5 - diameter / 2), ("z1", 1.5 + h + diameter / 2)):
        walls.addGlobalParameter(name, value)
    species = np.array([0, 1] * n_pairs)
    for kind in species:
        system.addParticle(mass)
        coulomb.addParticle(scale * (1.0 if kind == 0 else -1.0), diameter, 0.0)
        wca.addParticle([])
        walls.addParticle(system.getNumParticles() - 1, [])
    for force in (coulomb, wca, walls):
        system.addForce(force)
    rng = np.random.default_rng(seed)
    positions = _lattice(2 * n_pairs, np.array([side, side, h - diameter]), rng) + np.array([0, 0, 1.5 + diameter / 2])
    # profiles over the walls' planes z0..z1, where every ion is: an ion at its wall's minimum sits ~0.28 nm
    # from the plane, at 1.53 nm, and the nominal slit 1.5..1.5 + h had lost 2-4 of 120 ions (a new user's pass)
    return MDSystem("ions", {"n_pairs": n_pairs, "wall_separation_nm": h}, system, positions, 298.0, 0.002,
                    species, ("cation", "anion"), (1.5 - diameter / 2, 1.5 + h + diameter / 2))


def available_platforms() -> list[str]:
    """The platforms this OpenMM build loaded (CUDA and OpenCL need their plugins and drivers)."""
    return [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]


def get_platform(name: str) -> openmm.Platform:
    """The named platform, or a one-line error listing those this OpenMM has (and, when the
    platform's plugin is installed but failed to load, why: usually a missing driver library)."""
    if name not in available_platforms():
        failures = [f for f in openmm.Platform.getPluginLoadFailures() if f"libOpenMM{name}." in f]
        why = f" (its plugin did not load: {failures[0].split(': ', 1)[-1]})" if failures else ""
        raise ThriftyError(f"OpenMM platform {name} is not available here{why}; this OpenMM "
                           f"{openmm.__version__} has {', '.join(available_platforms())}")
    return openmm.Platform.getPlatformByName(name)


def make_simulation(md: MDSystem, platform: str = "Reference", seed: int = 0) -> openmm.Context:
    integrator = openmm.LangevinMiddleIntegrator(md.temperature_k * unit.kelvin, 1.0 / unit.picosecond,
                                                 md.timestep_ps * unit.picoseconds)
    integrator.setRandomNumberSeed(seed + 1)
    try:  # a loaded GPU plugin can still find no usable device
        context = openmm.Context(md.system, integrator, get_platform(platform))
    except openmm.OpenMMException as exc:
        raise ThriftyError(f"OpenMM cannot start platform {platform}: {exc}") from None
    context.setPositions(md.positions * unit.nanometer)
    context.setVelocitiesToTemperature(md.temperature_k * unit.kelvin, seed + 1)
    return context
