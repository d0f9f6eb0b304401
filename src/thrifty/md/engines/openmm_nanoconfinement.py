# SPDX-License-Identifier: MIT
"""The nanoconfinement model (md.nanoconfinement) as an OpenMM System: PME Coulomb in the padded box
with the Yeh-Berkowitz slab correction, WCA ion-ion and ion-wall repulsions (the model's docstring
gives the physics and its sources). Force groups (for tests and diagnostics): see GROUPS.
"""

import math
from dataclasses import asdict

import numpy as np
import openmm

from thrifty.md.engines.openmm_systems import MDSystem
from thrifty.md.nanoconfinement import (
    ION_MASS_AMU,
    ONE_4PI_EPS0,
    SPECIES_NAMES,
    TEMPERATURE_K,
    TIMESTEP_PS,
    WATER_PERMITTIVITY,
    NanoconfinementModel,
    ion_layout,
    kt_kj_mol,
    radii_nm,
    slit_nm,
)

GROUPS = {"coulomb": 0, "slab": 1, "wca": 2, "wall": 3}
WCA = "4 * eps * ((s / r)^12 - (s / r)^6) + eps"


def _coulomb(model: NanoconfinementModel, charges: np.ndarray) -> openmm.NonbondedForce:
    force = openmm.NonbondedForce()
    force.setNonbondedMethod(openmm.NonbondedForce.PME)
    force.setCutoffDistance(model.cutoff_nm)
    force.setEwaldErrorTolerance(model.ewald_tolerance)
    force.setUseDispersionCorrection(False)
    for q in charges / math.sqrt(WATER_PERMITTIVITY):  # water as a continuum: q / sqrt(80) in vacuum Coulomb
        force.addParticle(q, 1.0, 0.0)
    force.setForceGroup(GROUPS["coulomb"])
    return force


def _slab(model: NanoconfinementModel, charges: np.ndarray) -> openmm.CustomCVForce:
    dipole = openmm.CustomExternalForce("q * z")  # M_z = sum_i q_i z_i
    dipole.addPerParticleParameter("q")
    for i, q in enumerate(charges):
        dipole.addParticle(i, [q])
    volume_nm3 = model.side_nm ** 2 * model.box_z_nm
    # Yeh & Berkowitz 1999: E = 2 pi / V M_z^2 (Gaussian); here 1/(4 pi eps0 eps_r) in kJ mol^-1 nm e^-2
    force = openmm.CustomCVForce(f"{ONE_4PI_EPS0 / WATER_PERMITTIVITY * 2 * math.pi / volume_nm3!r} * mz^2")
    force.addCollectiveVariable("mz", dipole)
    force.setForceGroup(GROUPS["slab"])
    return force


def _wca(model: NanoconfinementModel, diameters: np.ndarray, kt: float) -> openmm.CustomNonbondedForce:
    force = openmm.CustomNonbondedForce(f"step(2^(1/6) * s - r) * ({WCA}); s = (d1 + d2) / 2")
    force.addGlobalParameter("eps", kt)
    force.addPerParticleParameter("d")
    for d in diameters:
        force.addParticle([d])
    force.setNonbondedMethod(openmm.CustomNonbondedForce.CutoffPeriodic)
    force.setCutoffDistance(2 ** (1 / 6) * float(diameters.max()))
    force.setForceGroup(GROUPS["wca"])
    return force


def _walls(model: NanoconfinementModel, diameters: np.ndarray, kt: float) -> openmm.CustomExternalForce:
    """The shifted 12-6 repulsion in the distance r from the ion centre to each wall plane, s = d/2."""
    low, high = slit_nm(model)
    one_wall = "step(2^(1/6) * s - {r}) * (4 * eps * ((s / {r})^12 - (s / {r})^6) + eps)"
    force = openmm.CustomExternalForce(" + ".join(one_wall.format(r=r) for r in ("(z - zlo)", "(zhi - z)")) +
                                       "; s = d / 2")
    for name, value in (("eps", kt), ("zlo", low), ("zhi", high)):
        force.addGlobalParameter(name, value)
    force.addPerParticleParameter("d")
    for i, d in enumerate(diameters):
        force.addParticle(i, [d])
    force.setForceGroup(GROUPS["wall"])
    return force



def nanoconfinement_system(model: NanoconfinementModel | None = None, seed: int = 0) -> MDSystem:
    """The model (None: its defaults) as an OpenMM System, its ions on the start lattice the seed shuffles."""
    model = model or NanoconfinementModel()
    ions = ion_layout(model, seed)
    kt = kt_kj_mol()
    system = openmm.System()
    side, box_z = model.side_nm, model.box_z_nm
    system.setDefaultPeriodicBoxVectors(openmm.Vec3(side, 0, 0), openmm.Vec3(0, side, 0), openmm.Vec3(0, 0, box_z))
    for _ in ions.species:
        system.addParticle(ION_MASS_AMU)
    for force in (_coulomb(model, ions.charges_e), _slab(model, ions.charges_e), _wca(model, ions.diameters_nm, kt),
                  _walls(model, ions.diameters_nm, kt)):
        system.addForce(force)
    return MDSystem("nanoconfinement", asdict(model), system, ions.positions_nm, TEMPERATURE_K, TIMESTEP_PS,
                    ions.species, SPECIES_NAMES, slit_nm(model), radii_nm(model))
