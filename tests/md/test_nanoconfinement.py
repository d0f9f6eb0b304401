# SPDX-License-Identifier: MIT
"""The nanoconfinement model against formulas written out here: counts, WCA and wall repulsions
(energies and forces), and the electrostatic energy against a direct Ewald sum with the
Yeh-Berkowitz slab correction in numpy."""

import math

import numpy as np
import openmm
import pytest
from openmm import unit
from scipy.special import erfc

from thrifty.md.engines.openmm_nanoconfinement import GROUPS, nanoconfinement_system
from thrifty.md.nanoconfinement import ONE_4PI_EPS0, NanoconfinementModel, ion_counts, kt_kj_mol, slit_nm

KT = 8.314462618e-3 * 298.0
# a few ions in a small box (2.4 x 2.4 nm, h 2 nm, Lz 6 nm): 10 ions with z+ = 1, 6 with z+ = 2
SMALL = dict(h_nm=2.0, c_molar=0.8, box_nm=2.4, cutoff_nm=1.0)


def _context(md) -> openmm.Context:
    integrator = openmm.VerletIntegrator(0.001)
    return openmm.Context(md.system, integrator, openmm.Platform.getPlatformByName("Reference"))


def _energy(context, positions, group: str) -> float:
    context.setPositions(positions * unit.nanometer)
    state = context.getState(getEnergy=True, groups={GROUPS[group]})
    return state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)


def _forces(context, positions, group: str) -> np.ndarray:
    context.setPositions(positions * unit.nanometer)
    state = context.getState(getForces=True, groups={GROUPS[group]})
    return state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)


def _charges_and_diameters(md, model) -> tuple[np.ndarray, np.ndarray]:
    cation = md.species == 0
    return np.where(cation, model.z_plus, model.z_minus).astype(float), \
        np.where(cation, model.d_plus_nm, model.d_minus_nm)


def _spread(n: int, model, diameters, rng, wall_gap_nm: float = 0.0) -> np.ndarray:
    """n random positions in the slit, no two closer than 0.9 of their contact distance."""
    low, high = slit_nm(model)
    side = model.side_nm
    out = []
    while len(out) < n:
        d = diameters[len(out)]
        p = np.array([rng.uniform(0, side), rng.uniform(0, side),
                      rng.uniform(low + d / 2 + wall_gap_nm, high - d / 2 - wall_gap_nm)])
        if all(np.linalg.norm(_minimum_image(p - q, side)) > 0.9 * (d + diameters[i]) / 2 for i, q in enumerate(out)):
            out.append(p)
    return np.array(out)


def _minimum_image(delta: np.ndarray, side: float) -> np.ndarray:
    delta = np.array(delta, float)
    delta[..., :2] -= side * np.round(delta[..., :2] / side)
    return delta


def _wca(r: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Weeks-Chandler-Andersen, eps = kT, written out."""
    x = (s / r) ** 6
    return np.where(r < 2 ** (1 / 6) * s, 4 * KT * (x * x - x) + KT, 0.0)


@pytest.mark.parametrize("zp, c, box", [(1, 0.5, None), (2, 0.5, None), (3, 0.5, None), (1, 1.0, None),
                                        (3, 0.9, 10.0), (2, 0.1, 12.0)])
def test_counts_are_electroneutral_and_follow_the_concentration(zp, c, box):
    model = NanoconfinementModel(h_nm=3.0, z_plus=zp, c_molar=c, box_nm=box)
    n_plus, n_minus = ion_counts(model)
    side = box or (15.0 if c <= 0.5 else 10.0)
    expected = int(c * 0.6022 * side * side * 3.0)
    assert n_minus % zp == 0 and expected - zp < n_minus <= expected
    assert zp * n_plus == n_minus
    md = nanoconfinement_system(model)
    coulomb = md.system.getForce(0)
    charge = sum(coulomb.getParticleParameters(i)[0].value_in_unit(unit.elementary_charge)
                 for i in range(md.system.getNumParticles()))
    assert abs(charge) < 1e-9 and md.system.getNumParticles() == n_plus + n_minus
    assert coulomb.getParticleParameters(0)[0].value_in_unit(unit.elementary_charge) == pytest.approx(zp / math.sqrt(80))


def test_the_default_system_is_about_400_ions_in_a_15_nm_box():
    md = nanoconfinement_system()
    assert md.system.getNumParticles() == 406  # int(0.5 * 0.6022 * 15 * 15 * 3) = 203 of each
    box = md.system.getDefaultPeriodicBoxVectors()
    assert [box[i][i].value_in_unit(unit.nanometer) for i in range(3)] == [15.0, 15.0, 9.0]
    assert ONE_4PI_EPS0 / (80 * kt_kj_mol()) == pytest.approx(0.7009, abs=1e-4)  # Bjerrum length, nm


def test_wca_matches_the_formula_and_is_kt_at_contact():
    """Pair sigma = (d_i + d_j)/2 and the +eps shift: U(s) = kT (unshifted: 0), zero past 2^(1/6) s."""
    model = NanoconfinementModel(**SMALL)
    md = nanoconfinement_system(model)
    _, diameters = _charges_and_diameters(md, model)
    context = _context(md)
    rng = np.random.default_rng(3)
    for _ in range(3):
        positions = _spread(len(diameters), model, diameters, rng)
        delta = _minimum_image(positions[:, None] - positions[None], model.side_nm)
        r = np.linalg.norm(delta, axis=-1)
        s = (diameters[:, None] + diameters[None]) / 2
        i, j = np.triu_indices(len(r), 1)
        assert (r[i, j] < 2 ** (1 / 6) * s[i, j]).any()  # some pairs do interact
        assert _energy(context, positions, "wca") == pytest.approx(_wca(r[i, j], s[i, j]).sum(), rel=1e-10)
    # one cation-anion pair at contact, the rest more than 2^(1/6) d apart
    mid = model.box_z_nm / 2
    far = np.array([[x, y, mid + dz] for x in (0.4, 1.2, 2.0) for y in (0.4, 1.2, 2.0) for dz in (-1.5, 1.5)])
    far = far[:len(diameters)]
    pair_s = (model.d_plus_nm + model.d_minus_nm) / 2
    a, b = 0, int(np.argmax(md.species == 1))
    far[a] = [1.2, 1.2, mid - 0.3]
    far[b] = far[a] + [0, 0, pair_s]
    assert _energy(context, far, "wca") == pytest.approx(KT, rel=1e-10)
    far[b] = far[a] + [0, 0, 2 ** (1 / 6) * pair_s * 1.0001]
    assert _energy(context, far, "wca") == 0.0


def test_wall_repulsion_uses_the_ion_radius():
    """U(r) = 4 kT ((s/r)^12 - (s/r)^6) + kT for r < 2^(1/6) s, s = d/2, r the distance to a wall plane:
    kT when the centre is a radius from the wall (s = the diameter would give 4032 kT)."""
    model = NanoconfinementModel(**SMALL)
    md = nanoconfinement_system(model)
    _, diameters = _charges_and_diameters(md, model)
    low, high = slit_nm(model)
    context = _context(md)
    rng = np.random.default_rng(4)
    positions = _spread(len(diameters), model, diameters, rng)
    fractions = rng.uniform(0.8, 1.3, len(diameters))  # of the reach 2^(1/6) d/2: some in range, some out
    lower = np.arange(len(diameters)) % 2 == 0
    reach = 2 ** (1 / 6) * diameters / 2
    positions[:, 2] = np.where(lower, low + fractions * reach, high - fractions * reach)
    expected = _wca(fractions * reach, diameters / 2).sum()
    assert expected > 1.0 and _energy(context, positions, "wall") == pytest.approx(expected, rel=1e-10)
    positions[:, 2] = np.where(lower, low + diameters / 2, high - diameters / 2)
    assert _energy(context, positions, "wall") == pytest.approx(len(diameters) * KT, rel=1e-10)


@pytest.mark.parametrize("group", ["wca", "wall", "slab"])
def test_forces_are_minus_the_energy_gradient(group):
    """Central differences (step 1e-5 nm) of the group's energy against its forces, every coordinate."""
    model = NanoconfinementModel(**SMALL)
    md = nanoconfinement_system(model)
    _, diameters = _charges_and_diameters(md, model)
    context = _context(md)
    positions = _spread(len(diameters), model, diameters, np.random.default_rng(5))
    low, high = slit_nm(model)
    positions[0, 2], positions[1, 2] = low + 0.6 * diameters[0], high - 0.55 * diameters[1]  # against the walls
    positions[2] = positions[3] + [0.0, 0.95 * (diameters[2] + diameters[3]) / 2, 0.0]  # a pair inside the WCA
    forces = _forces(context, positions, group)
    step = 1e-5
    gradient = np.zeros_like(positions)
    for index in np.ndindex(positions.shape):
        plus, minus = positions.copy(), positions.copy()
        plus[index] += step
        minus[index] -= step
        gradient[index] = (_energy(context, plus, group) - _energy(context, minus, group)) / (2 * step)
    scale = np.abs(forces).max()
    assert scale > 0.1  # the configuration does exercise the force
    assert np.abs(forces + gradient).max() <= 1e-6 * scale


def _direct_ewald_kj_mol(positions, charges, box, alpha=3.0) -> tuple[float, float]:
    """(Ewald sum of the periodic box, Yeh-Berkowitz slab term) for charges in water (eps_r 80):
    real space sum_{i<j,n} q_i q_j erfc(a r)/r (+ i = j images), reciprocal (2 pi / V) sum_k
    exp(-k^2/4a^2)/k^2 |S(k)|^2, self -a/sqrt(pi) sum q^2 (Gaussian units); slab 2 pi / V M_z^2."""
    coulomb = ONE_4PI_EPS0 / 80.0
    volume = float(np.prod(box))
    real = 0.0
    for shift in np.ndindex(5, 5, 3):  # images to 2 boxes in x, y (erfc(3 * 2.4) ~ 1e-24), 1 in z
        n = (np.array(shift) - (2, 2, 1)) * box
        delta = positions[:, None] - positions[None] + n
        r = np.linalg.norm(delta, axis=-1)
        if not n.any():
            np.fill_diagonal(r, np.inf)
        real += 0.5 * np.sum(np.outer(charges, charges) * erfc(alpha * r) / r)
    k_max = 2 * alpha * 6.0  # exp(-k^2/4a^2) < 1e-15 beyond
    ranges = [np.arange(-math.ceil(k_max * L / (2 * math.pi)), math.ceil(k_max * L / (2 * math.pi)) + 1) for L in box]
    k = np.stack(np.meshgrid(*ranges, indexing="ij"), -1).reshape(-1, 3) * (2 * math.pi / box)
    k2 = (k * k).sum(1)
    k, k2 = k[k2 > 0], k2[k2 > 0]
    structure = np.exp(1j * k @ positions.T) @ charges
    reciprocal = 2 * math.pi / volume * np.sum(np.exp(-k2 / (4 * alpha ** 2)) / k2 * np.abs(structure) ** 2)
    self_term = -alpha / math.sqrt(math.pi) * np.sum(charges ** 2)
    slab = 2 * math.pi / volume * (charges @ positions[:, 2]) ** 2
    return coulomb * (real + reciprocal + self_term), coulomb * slab


@pytest.mark.parametrize("zp", [1, 2])
@pytest.mark.parametrize("layout", ["random", "dipole"])
def test_electrostatics_match_a_direct_ewald_sum_with_the_slab_correction(zp, layout):
    model = NanoconfinementModel(**SMALL, z_plus=zp, ewald_tolerance=1e-6)
    md = nanoconfinement_system(model)
    charges, diameters = _charges_and_diameters(md, model)
    context = _context(md)
    positions = _spread(len(charges), model, diameters, np.random.default_rng(6))
    if layout == "dipole":  # cations in the upper half, anions in the lower: a large M_z
        mid = model.box_z_nm / 2
        positions[:, 2] = mid + np.where(charges > 0, 1, -1) * np.abs(positions[:, 2] - mid)
    box = np.array([model.side_nm, model.side_nm, model.box_z_nm])
    ewald, slab = _direct_ewald_kj_mol(positions, charges, box)
    openmm_total = _energy(context, positions, "coulomb") + _energy(context, positions, "slab")
    assert _energy(context, positions, "slab") == pytest.approx(slab, rel=1e-10)
    assert openmm_total == pytest.approx(ewald + slab, rel=1e-4)
    if layout == "dipole":  # the test can tell the slab correction is there
        assert abs(slab) > 1e-2 * abs(ewald + slab)
