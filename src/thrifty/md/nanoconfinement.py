# SPDX-License-Identifier: MIT
"""The nanoconfinement model: ions in implicit water between two uncharged planar walls.

After the Jadhao group's nanoconfinement simulations (Kadupitiya, Fox & Jadhao, "Machine learning
for parameter auto-tuning in molecular dynamics simulations: efficient dynamics of ions near
polarizable nanoparticles", 2019, and "Simulating molecular dynamics with large timesteps using
recurrent neural networks", 2020; the nanoHUB/GitHub tool softmaterialslab/nanoconfinement-md).
Units: nm, ps, kJ/mol, amu, e.

- Water is a continuum of relative permittivity 80 at 298 K (Bjerrum length 0.70 nm): charges are
  scaled by 1/sqrt(80) in vacuum Coulomb.
- Walls at z = -h/2 and +h/2 (in the box: centred at Lz/2), periodic in x and y; the box is padded
  in z to Lz = max(3 h, 2 cutoff) for the slab treatment.
- Ion-ion: WCA, 4 eps ((s/r)^12 - (s/r)^6) + eps for r < 2^(1/6) s, s = (d_i + d_j)/2, eps = kT.
- Ion-wall: the same shifted 12-6 repulsion in the distance from the ion centre to the wall plane
  with s = d/2 (the ion's radius), cut at 2^(1/6) s.
- Coulomb: PME in the padded box plus the Yeh-Berkowitz slab correction (Yeh & Berkowitz, J. Chem.
  Phys. 111, 3155 (1999)): E = 2 pi / V M_z^2 (Gaussian units), M_z = sum_i q_i z_i, V the padded
  volume; a CustomCVForce over a CustomExternalForce that computes M_z.
- Counts: N- = int(c 0.6022 V_slit) rounded down to a multiple of z+, V_slit = lx ly h;
  N+ = |z-| N- / z+ (electroneutral).

This module is the model alone (numbers, counts, geometry, the start lattice): it imports neither
OpenMM nor torch. The OpenMM system is built in md.engines.openmm_nanoconfinement, the torch
replicas in md.torch_physics.replicas.
"""

import math
from dataclasses import dataclass

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.md.thermo import GAS_CONSTANT_KJ_MOL_K

ONE_4PI_EPS0 = 138.935456  # kJ mol^-1 nm e^-2 (OpenMM's 1/(4 pi eps0))
AVOGADRO_PER_NM3_MOLAR = 0.6022  # ions per nm^3 in 1 mol/L
TEMPERATURE_K = 298.0
ION_MASS_AMU = 40.0  # equal masses: the profiles do not depend on them
TIMESTEP_PS = 0.005  # 1/90 of the period of a WCA contact vibration (s 0.55 nm, 40 amu)
PADDING = 3.0  # Lz >= 3 h (Yeh & Berkowitz 1999)
WATER_PERMITTIVITY = 80.0  # relative permittivity of water at 298 K
SPECIES_NAMES = ("cation", "anion")
# At most this many ions: the torch engine builds its neighbour list from all N (N - 1) / 2 pairs
# (md.torch_physics.neighbours), about 1.6 GB of float64 pair data at 10,000 ions; the reference
# tool's systems hold hundreds to a few thousand. A --c of 1e9 M had ended in a MemoryError.
MAX_IONS = 10_000
# Hard spheres fill at most 64% of a volume (random close packing; Scott & Kilgour 1969); ions
# packed denser than this cannot be placed, let alone equilibrated.
MAX_PACKING = 0.5


@dataclass(frozen=True)
class NanoconfinementModel:
    h_nm: float = 3.0  # wall separation
    z_plus: int = 1  # cation valency, 1..3
    z_minus: int = -1  # anion valency
    c_molar: float = 0.5  # salt concentration
    d_plus_nm: float = 0.474  # cation diameter
    d_minus_nm: float = 0.627  # anion diameter
    box_nm: float | None = None  # lx = ly; None: 15 nm up to 0.5 M, 10 nm above (as the reference tool)
    cutoff_nm: float = 2.5  # real-space Coulomb cutoff (PME)
    ewald_tolerance: float = 5e-4  # OpenMM's ewaldErrorTolerance

    @property
    def side_nm(self) -> float:
        return self.box_nm if self.box_nm is not None else (15.0 if self.c_molar <= 0.5 else 10.0)

    @property
    def box_z_nm(self) -> float:
        return max(PADDING * self.h_nm, 2 * self.cutoff_nm)

    def check(self) -> None:
        """One ThriftyError naming the first bad parameter."""
        if not 1 <= self.z_plus <= 3:
            raise ThriftyError(f"cation valency --zp {self.z_plus} is out of range: give 1, 2 or 3")
        if self.z_minus != -1:
            raise ThriftyError(f"anion valency --zn {self.z_minus} is not supported: give -1")
        for name, value in (("--c", self.c_molar), ("--d-plus", self.d_plus_nm), ("--d-minus", self.d_minus_nm),
                            ("--h", self.h_nm), ("--cutoff-nm", self.cutoff_nm)):
            if not (math.isfinite(value) and value > 0):
                raise ThriftyError(f"{name} must be a positive number, got {value}")
        if not 0 < self.ewald_tolerance < 0.1:
            raise ThriftyError(f"the Ewald error tolerance must be in (0, 0.1), got {self.ewald_tolerance}")
        largest = max(self.d_plus_nm, self.d_minus_nm)
        if self.h_nm < largest:
            raise ThriftyError(f"--h {self.h_nm} nm is below the ion diameter {largest} nm: the ions do not fit")
        wca_cutoff = 2 ** (1 / 6) * largest
        if self.box_nm is not None and not (math.isfinite(self.box_nm) and self.box_nm > 0):
            raise ThriftyError(f"--box-nm must be a positive number, got {self.box_nm}")
        if self.side_nm < 2 * max(self.cutoff_nm, wca_cutoff):
            raise ThriftyError(f"the box side {self.side_nm} nm is too small for the cutoff "
                               f"{max(self.cutoff_nm, wca_cutoff):.3f} nm: give --box-nm of at least "
                               f"{2 * max(self.cutoff_nm, wca_cutoff):.3f} (or a smaller --cutoff-nm)")
        cations, anions = ion_counts(self)
        volume = f"{self.c_molar:g} M in {self.side_nm:g}x{self.side_nm:g}x{self.h_nm:g} nm^3"
        if anions == 0:
            raise ThriftyError(f"{volume} is fewer than {self.z_plus} anions: raise --c, --h or --box-nm")
        if cations + anions > MAX_IONS:
            raise ThriftyError(f"{volume} is {cations + anions:,} ions, over the {MAX_IONS:,} the engines "
                               f"hold: lower --c, --h or --box-nm")
        packing = math.pi / 6 * (cations * self.d_plus_nm ** 3 + anions * self.d_minus_nm ** 3) / (
            self.side_nm ** 2 * self.h_nm)
        if packing > MAX_PACKING:
            raise ThriftyError(f"{volume} packs the ions to {packing:.0%} of the slit's volume, over "
                               f"{MAX_PACKING:.0%} (hard spheres fill at most 64%): lower --c")


def kt_kj_mol(temperature_k: float = TEMPERATURE_K) -> float:
    return GAS_CONSTANT_KJ_MOL_K * temperature_k


def ion_counts(model: NanoconfinementModel) -> tuple[int, int]:
    """(cations, anions): N- = int(c 0.6022 lx ly h) down to a multiple of z+; z+ N+ = |z-| N-."""
    n_minus = int(model.c_molar * AVOGADRO_PER_NM3_MOLAR * model.side_nm ** 2 * model.h_nm)
    n_minus -= n_minus % model.z_plus
    return abs(model.z_minus) * n_minus // model.z_plus, n_minus


def slit_nm(model: NanoconfinementModel) -> tuple[float, float]:
    """z of the two wall planes in the box (the slit is centred in the padded box)."""
    mid = model.box_z_nm / 2
    return mid - model.h_nm / 2, mid + model.h_nm / 2


def _start_positions(model: NanoconfinementModel, diameters: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Layers a diameter apart across the slit, a square lattice in each; ions shuffled over the sites."""
    n, largest = len(diameters), float(diameters.max())
    low, high = slit_nm(model)
    layers = int((model.h_nm - largest) // largest) + 1
    per_side = math.ceil(math.sqrt(math.ceil(n / layers)))
    z = np.linspace(low + largest / 2, high - largest / 2, layers) if layers > 1 else np.array([(low + high) / 2])
    grid = np.stack(np.meshgrid(np.arange(per_side), np.arange(per_side), z, indexing="ij"), -1).reshape(-1, 3)
    sites = grid[rng.permutation(len(grid))[:n]]
    xy = (sites[:, :2] + 0.5) / per_side * model.side_nm + rng.normal(0.0, 0.01, (n, 2))
    return np.column_stack([xy, sites[:, 2]])


@dataclass(frozen=True)
class IonLayout:
    """The ions of one system: species 0 (cations) then 1 (anions), their charges (valencies),
    diameters and start positions (nm, in the padded box)."""

    species: np.ndarray
    charges_e: np.ndarray
    diameters_nm: np.ndarray
    positions_nm: np.ndarray


def radii_nm(model: NanoconfinementModel) -> tuple[float, float]:
    """Per species (cation, anion): an ion touches a wall at this distance from it."""
    return model.d_plus_nm / 2, model.d_minus_nm / 2


def ion_layout(model: NanoconfinementModel, seed: int = 0) -> IonLayout:
    """The model's ions and their start lattice; the seed shuffles the sites (as every engine starts)."""
    model.check()
    n_plus, n_minus = ion_counts(model)
    species = np.array([0] * n_plus + [1] * n_minus)
    charges = np.where(species == 0, model.z_plus, model.z_minus).astype(float)
    diameters = np.where(species == 0, model.d_plus_nm, model.d_minus_nm)
    return IonLayout(species, charges, diameters, _start_positions(model, diameters, np.random.default_rng(seed)))
