# SPDX-License-Identifier: MIT
"""All pairs of a replica, dense: (R, N, N) distances with the minimum image in x, y and z.

Dense all-pairs costs N^2 per replica but is one batched tensor program with no list, the reference
for potential.energies (autograd, gradients through the dynamics); a run's hand-derived forces take
their pairs from a Verlet list instead (neighbours, forces.pair_terms). The minimum image is exact for pairs within that reach: in x and y it is at most half the
side, and in z the ions sit in a slit of h <= Lz / 3, so their nearest z image is the direct one and
the next at least Lz - h >= reach away.
"""

import torch


def distances(positions_nm: torch.Tensor, box_nm: torch.Tensor,
              mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(delta, r, pairs): delta (R, N, N, 3) the minimum-image r_i - r_j; r (R, N, N) with 1.0 wherever
    `pairs` is False (i = j or a padded particle), so that neither r nor its gradient is ever 0/0;
    `pairs` (R, N, N) marks real pairs i != j (both orders)."""
    delta = positions_nm[:, :, None, :] - positions_nm[:, None, :, :]
    box = box_nm[:, None, None, :]
    delta = delta - box * torch.round(delta / box)
    n = positions_nm.shape[1]
    pairs = mask[:, :, None] & mask[:, None, :] & ~torch.eye(n, dtype=torch.bool, device=mask.device)
    r2 = torch.where(pairs, (delta * delta).sum(-1), torch.ones((), dtype=delta.dtype, device=delta.device))
    return delta, torch.sqrt(r2), pairs
