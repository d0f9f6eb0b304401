# SPDX-License-Identifier: MIT
"""The torch engine's energies and forces, term by term, against OpenMM (Reference platform, the model
built by md.nanoconfinement with its NonbondedForce switched from PME to Ewald at a tight tolerance,
so that PME's own error stays out) and its Coulomb energy against the converged numpy Ewald sum of
test_nanoconfinement; two replicas with different parameters and ion counts in one batch."""

import os

import numpy as np
import openmm
import pytest
import torch
from openmm import unit
from test_nanoconfinement import SMALL, _direct_ewald_kj_mol, _spread

from thrifty.errors import ThriftyError
from thrifty.md.engines.openmm_nanoconfinement import GROUPS, nanoconfinement_system
from thrifty.md.nanoconfinement import NanoconfinementModel, slit_nm
from thrifty.md.torch_physics import TERMS, energy_and_forces, prepare_ewald, replicas, short_range
from thrifty.md.torch_physics import ewald as ew
from thrifty.md.torch_physics.forces import pair_terms
from thrifty.md.torch_physics.neighbours import NeighbourList
from thrifty.md.torch_physics.pairs import distances
from thrifty.md.torch_physics.threads import available_cores, use_threads

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
    configurations = [_configuration(m, md, rng, dipole) for m, md in zip(MODELS, systems, strict=True)]
    positions = torch.zeros(len(MODELS), batch.mask.shape[1], 3, dtype=dtype)
    for i, c in enumerate(configurations):
        positions[i, :len(c)] = torch.as_tensor(c)
        positions[i, len(c):] = torch.tensor([MODELS[i].side_nm / 2, MODELS[i].side_nm / 2, MODELS[i].box_z_nm / 2])
    setup = prepare_ewald(batch)
    for term in TERMS:
        energy, forces = energy_and_forces(batch, setup, positions, (term,))
        assert torch.all(forces[~batch.mask] == 0)
        for i, (md, c) in enumerate(zip(systems, configurations, strict=True)):
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


def test_the_neighbour_list_rebuilds_when_an_ion_moved_over_half_the_skin_and_not_before():
    """Two ions just outside cutoff + skin approach each other. Each moved 0.19 nm (< skin / 2): no
    rebuild, and the pair is still outside the cutoff. Each moved 0.21 nm (> skin / 2): rebuilt,
    and the pair, now within the cutoff, is found. Mutations caught: the rebuild criterion at the
    whole skin (the pair is missed), a rebuild every step (builds counts it), the pair within
    cutoff + skin not listed."""
    cutoff, skin = 1.0, 0.4
    neighbours = NeighbourList(torch.tensor([cutoff], dtype=torch.float64), skin)
    box, mask = torch.tensor([[5.0, 5.0, 5.0]], dtype=torch.float64), torch.ones(1, 2, dtype=torch.bool)
    apart = cutoff + skin + 0.01

    def at(shift: float) -> torch.Tensor:
        return torch.tensor([[[1.0 + shift, 2.0, 2.5], [1.0 + apart - shift, 2.0, 2.5]]], dtype=torch.float64)

    assert len(neighbours.pairs(at(0.0), box, mask).r_nm) == 0 and neighbours.builds == 1
    assert len(neighbours.pairs(at(0.19), box, mask).r_nm) == 0 and neighbours.builds == 1
    near = neighbours.pairs(at(0.21), box, mask)
    assert neighbours.builds == 2 and near.r_nm.tolist() == pytest.approx([apart - 0.42])
    # across the periodic boundary in x: the minimum image
    wrapped = torch.tensor([[[0.1, 2.0, 2.5], [4.6, 2.0, 2.5]]], dtype=torch.float64)
    assert NeighbourList(torch.tensor([cutoff], dtype=torch.float64), skin).pairs(wrapped, box, mask).r_nm.tolist() \
        == pytest.approx([0.5])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_list_forces_equal_the_dense_all_pairs_sum_through_rebuilds_of_the_default_system(dtype):
    """The default system (406 ions, its chosen reach, 4.5 nm): forces.py's pair terms from the
    Verlet list, as the ions drift in random steps of 0.1 nm (the list rebuilt on the way), against
    autograd of the dense all-pairs energies (pairs.distances) at each step, to 1e-10 (float64) or
    2e-5 (float32) of the largest force. Mutations caught: a pair missed or counted twice, a wrong
    minimum image, a stale list kept past skin / 2, the third law's sign."""
    batch, positions = replicas([NanoconfinementModel()], dtype=dtype)
    setup = prepare_ewald(batch)
    generator = torch.Generator().manual_seed(5)
    for _ in range(4):
        step = torch.randn(positions.shape, generator=generator, dtype=torch.float64).to(dtype)
        positions = positions + 0.1 * step / step.norm(dim=-1, keepdim=True)
        for term in ("wca", "coulomb"):
            energy, forces = pair_terms(batch, setup, positions, (term,))
            x = positions.detach().requires_grad_(True)
            _, r, pairs = distances(x, batch.box_nm, batch.mask)
            dense = short_range.ion_ion_kj_mol(batch, r, pairs) if term == "wca" else ew.real_kj_mol(batch, setup, r, pairs)
            (gradient,) = torch.autograd.grad(dense.sum(), x)
            assert (forces + gradient).abs().max() <= (1e-10 if dtype == torch.float64 else 2e-5) * gradient.abs().max()
            assert float(energy[0]) == pytest.approx(float(dense.detach()[0]), rel=1e-9 if dtype == torch.float64 else 1e-4), term
    assert setup.neighbours.builds >= 2


def test_the_splitting_takes_the_reach_with_the_least_work_and_keeps_the_sum(monkeypatch):
    """The default system's real-space reach is 4.5 nm, of the candidates the one with the least
    modelled work, shorter than the longest the minimum image allows (6 nm, where a step cost 1.16x
    in float64); its Coulomb energy and forces equal the longest reach's to the Ewald tolerance's
    order; a system whose list would hold every pair keeps the longest reach (fewest k-vectors).
    Mutations caught: the reach back at the longest; the k-vector count left out of the work (the
    shortest candidate wins) or the pairs (the longest wins); alpha from a reach other than the
    pairs' cut (the sum is then off by far more than the tolerance)."""
    model = NanoconfinementModel()
    longest = ew.longest_reach_nm(model)
    chosen = ew.real_space_reach_nm(model)
    assert chosen == pytest.approx(4.5) and longest == pytest.approx(6.0)
    work = {reach: ew.splitting_work(model, reach) for reach in (0.5 * longest, chosen, longest)}
    assert work[chosen] < work[longest] and work[chosen] < work[0.5 * longest]
    batch, positions = replicas([model])
    terms = ("coulomb", "slab")
    setup = prepare_ewald(batch)
    assert float(setup.reach_nm[0]) == chosen
    energy, forces = energy_and_forces(batch, setup, positions, terms)
    monkeypatch.setattr(ew, "real_space_reach_nm", lambda m, tolerance=None: ew.longest_reach_nm(m))
    far = prepare_ewald(batch)
    assert float(far.reach_nm[0]) == longest and far.k_per_nm.shape[1] < setup.k_per_nm.shape[1]
    far_energy, far_forces = energy_and_forces(batch, far, positions, terms)
    delta = model.ewald_tolerance
    assert abs(float(energy[0] - far_energy[0])) <= 2 * delta * abs(float(far_energy[0]))
    assert float((forces - far_forces).norm() / far_forces.norm()) <= 4 * delta
    small = NanoconfinementModel(h_nm=2.0, z_plus=1, c_molar=0.5, box_nm=4.0, cutoff_nm=1.2)
    assert not ew.list_pays(small) and ew.real_space_reach_nm(small) == ew.longest_reach_nm(small)


def test_a_fresh_list_gives_the_same_forces_bit_for_bit():
    """A list built 0.15 nm of drift ago and one built now select the same pairs in the same order:
    the forces are equal bit for bit (what a resumed run needs: it builds its list afresh)."""
    batch, positions = replicas([NanoconfinementModel(h_nm=2.5, z_plus=2, c_molar=0.6)])
    setup = prepare_ewald(batch)
    energy_and_forces(batch, setup, positions)
    drift = torch.randn(positions.shape, generator=torch.Generator().manual_seed(2), dtype=positions.dtype)
    moved = positions + 0.15 * drift / drift.norm(dim=-1, keepdim=True)
    energy, forces = energy_and_forces(batch, setup, moved)
    assert setup.neighbours is not None and setup.neighbours.builds == 1
    fresh = prepare_ewald(batch)
    fresh_energy, fresh_forces = energy_and_forces(batch, fresh, moved)
    assert torch.equal(forces, fresh_forces) and torch.equal(energy, fresh_energy)


def test_a_list_is_kept_where_it_leaves_pairs_out_and_dense_pairs_where_it_would_hold_all():
    """The default system (15 nm box: the list holds 0.56 of the pairs) gets a list, the benchmark's
    4 nm replicas (every pair within reach + skin) the dense pass; a batch with one large replica
    gets a list. Mutation caught: the share's test inverted, or a list always (or never)."""
    large, small = NanoconfinementModel(), NanoconfinementModel(h_nm=2.0, box_nm=4.0, cutoff_nm=1.2)
    assert prepare_ewald(replicas([large])[0]).neighbours is not None
    assert prepare_ewald(replicas([small, small])[0]).neighbours is None
    assert prepare_ewald(replicas([small, large])[0]).neighbours is not None


def test_use_threads_sets_the_count_and_restores_it_on_errors_too():
    """Mutations caught: the count not set, the previous one not restored (after an error)."""
    before = torch.get_num_threads()
    with use_threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), use_threads(before + 2):
        raise RuntimeError("the run failed")
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), use_threads(0):
        pass
    assert 1 <= available_cores() <= (os.cpu_count() or 1)


@pytest.mark.parametrize("given, expected", [(["--threads", "1"], 1), ([], "cores")])
def test_md_run_runs_the_torch_engine_with_the_threads_asked_or_the_cores(tmp_path, run_cli, monkeypatch, given, expected):
    """Mutation caught: --threads parsed but not applied to the run (or the default left to torch)."""
    seen = []

    def fake_run(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise ThriftyError("stopped here")

    monkeypatch.setattr("thrifty.md.engines.job_loop.run_one", fake_run)
    torch.set_num_threads(3)
    code, _, err = run_cli("md", "run", "--system", "nanoconfinement", "--engine", "torch", *given,
                           "--steps", "10", "--out", tmp_path / "out")
    assert code == 2 and "stopped here" in err
    assert seen == [available_cores() if expected == "cores" else expected]
    assert torch.get_num_threads() == 3  # restored after the run
    torch.set_num_threads(1)


@pytest.mark.parametrize("args, fragment", [
    (["--engine", "torch", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["--threads", "2"], "--threads applies to --engine torch"),
])
def test_bad_threads_are_one_line_and_exit_2(tmp_path, run_cli, args, fragment):
    code, _, err = run_cli("md", "run", "--system", "nanoconfinement", *args, "--out", tmp_path / "out")
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
