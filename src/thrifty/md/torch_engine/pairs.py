"""All pairs of a replica, dense: (R, N, N) distances with the minimum image in x, y and z.

Dense all-pairs costs N^2 per replica but is one batched tensor program with no rebuilds; for the
few hundred ions of a nanoconfinement system it is what we use (no cell list here). The minimum
image is exact while every cutoff is at most half of each box side (NanoconfinementModel.check
asks this in x and y; the padded Lz >= 2 cutoff and the slit's h <= Lz/3 give it in z).
"""

import torch


def distances(positions_nm: torch.Tensor, box_nm: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(r, pairs): r (R, N, N) with 1.0 wherever `pairs` is False (i = j or a padded particle), so that
    neither r nor its gradient is ever 0/0; `pairs` (R, N, N) marks real pairs i != j (both orders)."""
    delta = positions_nm[:, :, None, :] - positions_nm[:, None, :, :]
    box = box_nm[:, None, None, :]
    delta = delta - box * torch.round(delta / box)
    n = positions_nm.shape[1]
    pairs = mask[:, :, None] & mask[:, None, :] & ~torch.eye(n, dtype=torch.bool, device=mask.device)
    r2 = torch.where(pairs, (delta * delta).sum(-1), torch.ones((), dtype=delta.dtype, device=delta.device))
    return torch.sqrt(r2), pairs
