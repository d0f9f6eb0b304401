# SPDX-License-Identifier: MIT
"""How an MD run samples its density profiles and when it stops: the one settings dataclass that
`thrifty md run`, every engine (md.engines) and every campaign run (md.campaign) share.

A run integrates in chunks of `chunk` steps; after each chunk that ends past `equilibration_steps`
it adds one sample of the ions' z to md.profiles' blocks (`samples_per_block` samples a block). It
stops at `steps` when given; otherwise when every block-averaged error bar is at or below the larger
of `relative_tolerance` x the bin's density and the absolute floor `tolerance_molar`
(md.profiles.converged), or at `cap_steps`.

The defaults (10% of each bin's density, floor 0.002 M) replace an absolute 0.02 M, which held a
2 M contact peak to 1% while passing a 0.004 M mid-plane at 500%. On the 150 converged runs of
benchmarks/data/md_replay (h 2.5-4 nm, z+ 1-3, c 0.3-0.9 M), scaling each run's error bars as
1/sqrt(samples) and halving their variance for the symmetrised profile, the new rule needs a median
0.44x (at most 0.9x) the samples the old one did, with every dilute bin held 10x tighter.
"""

from dataclasses import dataclass

from thrifty.errors import ThriftyError
from thrifty.md import profiles as prof


@dataclass(frozen=True)
class SamplingSettings:
    steps: int | None = None  # None: sample until the profiles converge, or cap_steps
    chunk: int = 100  # steps between samples and possible checkpoints
    equilibration_steps: int = 20_000  # the profiles sample chunks that end after this step
    samples_per_block: int = 10  # samples (chunks) per block of the block averages
    tolerance_molar: float = 0.002  # converged: every error bar at or below this floor, mol/L (or relative_tolerance)
    cap_steps: int = 200_000  # without steps, stop here if not converged
    relative_tolerance: float = 0.1  # or, where larger, this share of the bin's density (0: the floor alone)

    def check(self) -> None:
        """One ThriftyError naming the option of the first value a run cannot have."""
        if (self.steps is not None and self.steps < 1) or self.chunk < 1 or self.cap_steps < 1:
            raise ThriftyError("--steps, --chunk and --cap-steps must be positive")
        if self.samples_per_block < 1:
            raise ThriftyError(f"samples per block must be positive, got {self.samples_per_block}")
        if not self.tolerance_molar > 0:
            raise ThriftyError(f"--tolerance must be positive, got {self.tolerance_molar}")
        if not 0 <= self.relative_tolerance < 1:
            raise ThriftyError(f"--relative-tolerance must be at least 0 and below 1, got {self.relative_tolerance}")
        if self.equilibration_steps < 0:  # a new user's pass: -5 "leaves no steps to sample"
            raise ThriftyError(f"--equilibrate must be 0 or more, got {self.equilibration_steps}")
        if not self.equilibration_steps < self.last_step:
            raise ThriftyError(f"--equilibrate {self.equilibration_steps} leaves no steps to sample: give at least 0 "
                               f"and less than {'--cap-steps' if self.steps is None else '--steps'} "
                               f"({self.last_step})")

    @property
    def sampling(self) -> dict:
        """What a resume must share with the run it continues for its profiles to be that run's."""
        return {"equilibration_steps": self.equilibration_steps, "samples_per_block": self.samples_per_block}

    @property
    def last_step(self) -> int:
        return self.steps if self.steps is not None else self.cap_steps

    def stop_reason(self, step: int, p: prof.Profiles) -> str | None:
        """Why a replica's run ends at `step` ("steps", "converged" or "cap"), or None to go on."""
        if self.steps is not None:
            return "steps" if step >= self.steps else None
        if prof.converged(p, self.tolerance_molar, self.relative_tolerance):
            return "converged"
        return "cap" if step >= self.cap_steps else None
