"""All pairs of a replica, dense: (R, N, N) distances with the minimum image in x, y and z.

Dense all-pairs costs N^2 per replica but is one batched tensor program with no rebuilds; for the
few hundred ions of a nanoconfinement system it is what we use. Measured on one CPU thread for the
default 406 ions: distances + WCA + real-space Coulomb with their gradient 23 ms, against 49 ms for the
reciprocal sum; no cell list was written to compare, and at this size it could save at most a third
of a step. The minimum image is exact while every cutoff is at most half of each box side
(NanoconfinementModel.check asks this in x and y; in z the padded Lz >= max(3 h, 2 cutoff) keeps
every z image of an ion in the slit at least a cutoff away).
"""

import torch


def distances(positions_nm: torch.Tensor, box_nm: torch.Tensor,
              mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(r, pairs): r (R, N, N) with 1.0 wherever `pairs` is False (i = j or a padded particle), so that
    neither r nor its gradient is ever 0/0; `pairs` (R, N, N) marks real pairs i != j (both orders)."""
    delta = positions_nm[:, :, None, :] - positions_nm[:, None, :, :]
    box = box_nm[:, None, None, :]
    delta = delta - box * torch.round(delta / box)
    n = positions_nm.shape[1]
    pairs = mask[:, :, None] & mask[:, None, :] & ~torch.eye(n, dtype=torch.bool, device=mask.device)
    r2 = torch.where(pairs, (delta * delta).sum(-1), torch.ones((), dtype=delta.dtype, device=delta.device))
    return torch.sqrt(r2), pairs
