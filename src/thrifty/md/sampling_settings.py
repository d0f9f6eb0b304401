"""How an MD run samples its density profiles and when it stops: the one settings dataclass that
`thrifty md run`, every engine (md.engines) and every campaign run (md.campaign) share.

A run integrates in chunks of `chunk` steps; after each chunk that ends past `equilibration_steps`
it adds one sample of the ions' z to md.profiles' blocks (`samples_per_block` samples a block). It
stops at `steps` when given; otherwise when every block-averaged error bar is at or below
`tolerance_molar` (md.profiles.converged), or at `cap_steps`.
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
    tolerance_molar: float = 0.02  # converged: every error bar at or below this
    cap_steps: int = 200_000  # without steps, stop here if not converged

    def check(self) -> None:
        """One ThriftyError naming the option of the first value a run cannot have."""
        if (self.steps is not None and self.steps < 1) or self.chunk < 1 or self.cap_steps < 1:
            raise ThriftyError("--steps, --chunk and --cap-steps must be positive")
        if self.samples_per_block < 1:
            raise ThriftyError(f"samples per block must be positive, got {self.samples_per_block}")
        if not self.tolerance_molar > 0:
            raise ThriftyError(f"--tolerance must be positive, got {self.tolerance_molar}")
        if not 0 <= self.equilibration_steps < self.last_step:
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
        if prof.converged(p, self.tolerance_molar):
            return "converged"
        return "cap" if step >= self.cap_steps else None
