# SPDX-License-Identifier: MIT
"""What every engine's resume must share with the run it continues, and the one-line refusals."""

from pathlib import Path

from thrifty.errors import ThriftyError

START_OVER = "use another --checkpoint-dir (or --out) to start a new run"


def check_continuation(saved_seed: int, seed: int, saved_sampling: dict, sampling: dict, saved_step: int,
                       steps: int, where: Path) -> None:
    """The seed, how the profiles are sampled, and a target not behind the checkpoint; one line naming
    the option otherwise."""
    if saved_seed != seed:
        raise ThriftyError(f"the checkpoint in {where} is for --seed {saved_seed}, this run asked for "
                           f"--seed {seed}: give --seed {saved_seed}, or {START_OVER}")
    if saved_sampling != sampling:
        raise ThriftyError(f"the checkpoint in {where} samples profiles after step "
                           f"{saved_sampling['equilibration_steps']:,} ({saved_sampling['samples_per_block']} samples a "
                           f"block), this run after step {sampling['equilibration_steps']:,} "
                           f"({sampling['samples_per_block']} a block): give --equilibrate "
                           f"{saved_sampling['equilibration_steps']}, or {START_OVER}")
    if saved_step > steps:
        raise ThriftyError(f"the checkpoint in {where} is at step {saved_step:,}, beyond --steps {steps:,}: "
                           f"give --steps {saved_step} or more to continue that run, or {START_OVER}")


def check_profile_bins(saved_blocks: list, species: list[int], bins: list[int], where: Path) -> None:
    """Each replica's saved profile counts have this run's species and bins (the ions system's bins
    moved to the walls' planes: a checkpoint of an older thrifty had 60 where a run now has 70, and the
    resume ended in numpy's broadcast error). One line otherwise."""
    for blocks, n_species, n_bins in zip(saved_blocks, species, bins, strict=True):
        if tuple(blocks.shape[1:]) != (n_species, n_bins):
            raise ThriftyError(f"the checkpoint in {where} counts its profiles in {blocks.shape[2]} bins, this run "
                               f"in {n_bins} (a checkpoint of an older thrifty): {START_OVER}")
