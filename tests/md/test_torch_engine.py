"""The torch engine's energies and forces, term by term, against OpenMM (Reference platform, the model
built by md.nanoconfinement with its NonbondedForce switched from PME to Ewald at a tight tolerance,
so that PME's own error stays out) and its Coulomb energy against the converged numpy Ewald sum of
test_nanoconfinement; two replicas with different parameters and ion counts in one batch."""

import numpy as np
import openmm
import pytest
import torch
from openmm import unit
from test_nanoconfinement import SMALL, _direct_ewald_kj_mol, _spread

from thrifty.md.engines.openmm_nanoconfinement import GROUPS, nanoconfinement_system
from thrifty.md.nanoconfinement import NanoconfinementModel, slit_nm
from thrifty.md.torch_engine import TERMS, energy_and_forces, prepare_ewald, replicas

torch.set_num_threads(1)
MODELS = [NanoconfinementModel(**SMALL, ewald_tolerance=1e-10),  # 10 ions
          NanoconfinementModel(**SMALL | dict(h_nm=2.3, box_nm=2.6, d_plus_nm=0.5), z_plus=2,
                               ewald_tolerance=1e-10)]  # 9 ions: padded by 1 in the batch
TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-4}  # relative: energy, and force over the largest force


def _configuration(model: NanoconfinementModel, md, rng, dipole: bool) -> np.ndarray:
    """Random ions in the slit, two against the walls, one pair inside the WCA range; with `dipole`
    the cations in the upper half and the anions in the lower (a large slab term)."""
    diameters = np.where(md.species == 0, model.d_plus_nm, model.d_minus_nm)
    positions = _spread(len(diameters), model, diameters, rng)
    low, high = slit_nm(model)
    if dipole:
        mid = model.box_z_nm / 2
        positions[:, 2] = mid + np.where(md.species == 0, 1, -1) * np.abs(positions[:, 2] - mid)
    positions[0, 2], positions[1, 2] = low + 0.6 * diameters[0], high - 0.55 * diameters[1]
    positions[2] = positions[3] + [0.0, 0.95 * (diameters[2] + diameters[3]) / 2, 0.0]
    positions[2, :2] %= model.side_nm
    return positions


def _openmm_terms(md, positions: np.ndarray) -> dict[str, tuple[float, np.ndarray]]:
    md.system.getForce(GROUPS["coulomb"]).setNonbondedMethod(openmm.NonbondedForce.Ewald)
    context = openmm.Context(md.system, openmm.VerletIntegrator(0.001), openmm.Platform.getPlatformByName("Reference"))
    context.setPositions(positions * unit.nanometer)
    out = {}
    for term in TERMS:
        state = context.getState(getEnergy=True, getForces=True, groups={GROUPS[term]})
        out[term] = (state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole),
                     state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer))
    return out


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("dipole", [False, True])
def test_every_term_matches_openmm_in_a_batch_of_two_different_replicas(dtype, dipole):
    batch, _ = replicas(MODELS, dtype=dtype)
    rng = np.random.default_rng(7)
    systems = [nanoconfinement_system(m) for m in MODELS]
    configurations = [_configuration(m, md, rng, dipole) for m, md in zip(MODELS, systems)]
    positions = torch.zeros(len(MODELS), batch.mask.shape[1], 3, dtype=dtype)
    for i, c in enumerate(configurations):
        positions[i, :len(c)] = torch.as_tensor(c)
        positions[i, len(c):] = torch.tensor([MODELS[i].side_nm / 2, MODELS[i].side_nm / 2, MODELS[i].box_z_nm / 2])
    setup = prepare_ewald(batch)
    for term in TERMS:
        energy, forces = energy_and_forces(batch, setup, positions, (term,))
        assert torch.all(forces[~batch.mask] == 0)
        for i, (md, c) in enumerate(zip(systems, configurations)):
            expected_energy, expected_forces = _openmm_terms(md, c)[term]
            assert abs(expected_energy) > 1e-3  # every term is exercised
            assert float(energy[i]) == pytest.approx(expected_energy, rel=TOLERANCE[dtype]), term
            error = np.abs(forces[i, :len(c)].double().numpy() - expected_forces).max()
            assert error <= TOLERANCE[dtype] * np.abs(expected_forces).max(), term


def test_coulomb_converges_to_a_direct_ewald_sum_as_the_tolerance_tightens():
    """Energy of real + reciprocal + self + slab: the tolerance delta bounds the relative error."""
    model = MODELS[1]
    batch, _ = replicas([model])
    md = nanoconfinement_system(model)
    c = _configuration(model, md, np.random.default_rng(8), dipole=True)
    box = np.array([model.side_nm, model.side_nm, model.box_z_nm])
    ewald, slab = _direct_ewald_kj_mol(c, batch.charges_e[0].numpy(), box)
    for delta in (1e-4, 1e-8, 1e-12):
        energy, _ = energy_and_forces(batch, prepare_ewald(batch, delta), torch.as_tensor(c)[None], ("coulomb", "slab"))
        assert abs(float(energy[0]) - (ewald + slab)) <= 10 * delta * abs(ewald + slab)


def test_the_hand_derived_forces_match_autograd_in_size_groups():
    """forces.py (a run's hot path, replicas evaluated in groups of similar size) against autograd of
    potential.energies (the differentiable path) for every term, on jittered lattices of six replicas."""
    models = [NanoconfinementModel(h_nm=h, z_plus=zp, c_molar=c, box_nm=4.0, cutoff_nm=1.2)
              for h, zp, c in ((2.0, 1, 1.0), (3.0, 3, 0.5), (2.5, 2, 0.75), (3.0, 1, 1.0), (2.0, 3, 0.5), (2.5, 1, 0.5))]
    batch, positions = replicas(models)
    setup = prepare_ewald(batch)
    assert len(setup.groups) >= 3
    positions = positions + 0.05 * torch.randn(positions.shape, generator=torch.Generator().manual_seed(3)) * batch.mask[..., None]
    for term in TERMS:
        energy, forces = energy_and_forces(batch, setup, positions, (term,))
        expected_energy, expected_forces = energy_and_forces(batch, setup, positions, (term,), create_graph=True)
        assert torch.allclose(energy, expected_energy.detach(), rtol=1e-10, atol=0), term
        assert (forces - expected_forces.detach()).abs().max() <= 1e-10 * expected_forces.abs().max(), term
        assert torch.all(forces[~batch.mask] == 0)
