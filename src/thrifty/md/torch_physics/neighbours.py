# SPDX-License-Identifier: MIT
"""A Verlet neighbour list for the real-space terms (Allen & Tildesley, "Computer Simulation of
Liquids", 2nd ed., 2017, sec. 5.3).

The list holds the pairs i < j of each replica within r_cut + skin (minimum image), found among all
pairs at a build, and is reused until some ion has moved more than skin / 2 since then: a pair
outside the list was at least r_cut + skin apart, and each of its ions moved at most skin / 2, so it
is still at least r_cut apart. Each step keeps, of the listed pairs, those within r_cut, in the
list's order (replica, i, j): the pairs a step sums and the order it sums them in do not depend on
where the list was built, so a run resumed with a fresh list continues bit for bit (nothing but
exact IEEE operations, -, *, round, +, touches the listed pairs before they are chosen).

The forces take every listed pair (`listed`) with a mask of those within r_cut instead of the
chosen ones (`pairs`): a listed pair beyond r_cut adds an exact zero to each sum, and a sum that
starts at +0 is never -0, so adding zeros leaves every partial sum's bits as they were; the step
saves the gathers that choosing costs. Per-pair constants of a list (charge products, a replica's
splitting parameter) are made once per build (`per_pair`).

Flat over the batch (index replica * N + ion): padding is never listed, and replicas of any size
share one list with no padded pairs. A step's minimum image of the listed pairs is in x and y only,
by each pair's inverse side: along z the ions sit in a slit of h <= Lz / 3, so a pair's nearest z
image within the reach is the direct one (pairs.py), and the build's full minimum image keeps no
pair whose z image is nearer.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

SKIN_NM = 0.4  # rebuilt every ~50-100 steps of the default system (dt 5 fs, 298 K, 40 amu ions)


@dataclass(frozen=True)
class Pairs:
    """The pairs within r_cut at the positions given: flat ion indices, minimum-image r_i - r_j, r.
    Components first ((3, P), not (P, 3)): every operation on them is then on contiguous rows."""
    replica: torch.Tensor  # (P,)
    first: torch.Tensor  # (P,) replica * N + i
    second: torch.Tensor  # (P,) replica * N + j, i < j
    delta_nm: torch.Tensor  # (3, P)
    r_nm: torch.Tensor  # (P,)


@dataclass(frozen=True)
class Listed:
    """Every pair of the list at the positions given, as Pairs, and which are within r_cut now."""
    replica: torch.Tensor  # (L,)
    first: torch.Tensor  # (L,)
    second: torch.Tensor  # (L,)
    delta_nm: torch.Tensor  # (3, L)
    r2_nm2: torch.Tensor  # (L,)
    within: torch.Tensor  # (L,) bool


def _minimum_image(delta: torch.Tensor, box: torch.Tensor) -> torch.Tensor:
    return delta - box * torch.round(delta / box)


class NeighbourList:
    """Pairs within cutoff_nm (per replica) from a Verlet list with `skin_nm`; `builds` counts rebuilds."""

    def __init__(self, cutoff_nm: torch.Tensor, skin_nm: float = SKIN_NM) -> None:
        if not skin_nm > 0:
            raise ValueError(f"the neighbour list's skin must be positive, got {skin_nm}")
        self.cutoff_nm, self.skin_nm = cutoff_nm, skin_nm
        self.builds = 0
        self._reference: torch.Tensor | None = None
        self._replica = self._first = self._second = torch.zeros(0, dtype=torch.long)
        self._side = self._inverse_side = self._cut2 = torch.zeros(0)  # (2, L), (2, L), (L,): per listed pair
        self._constants: dict[str, torch.Tensor] = {}

    def _stale(self, positions_nm: torch.Tensor, box_nm: torch.Tensor, mask: torch.Tensor) -> bool:
        if self._reference is None or self._reference.shape != positions_nm.shape:
            return True
        moved = _minimum_image(positions_nm - self._reference, box_nm[:, None, :])
        return bool(((moved * moved).sum(-1)[mask] > (self.skin_nm / 2) ** 2).any())

    def _build(self, positions_nm: torch.Tensor, box_nm: torch.Tensor, mask: torch.Tensor) -> None:
        """All pairs i < j within cutoff + skin, one replica at a time (N^2 memory, not R N^2)."""
        n = positions_nm.shape[1]
        upper = torch.triu(torch.ones(n, n, dtype=torch.bool, device=mask.device), diagonal=1)
        found = []
        for b in range(positions_nm.shape[0]):
            x = positions_nm[b]
            delta = _minimum_image(x[:, None, :] - x[None, :, :], box_nm[b])
            reach = float(self.cutoff_nm[b]) + self.skin_nm
            near = upper & mask[b][:, None] & mask[b][None, :] & ((delta * delta).sum(-1) < reach * reach)
            i, j = near.nonzero(as_tuple=True)
            found.append((torch.full_like(i, b), b * n + i, b * n + j))
        self._replica, self._first, self._second = (torch.cat(parts) for parts in zip(*found, strict=True))
        self._side = box_nm[self._replica, :2].T.contiguous()  # (2, L): x and y sides of each pair's box
        self._inverse_side = 1 / self._side
        self._cut2 = (self.cutoff_nm * self.cutoff_nm)[self._replica]
        self._reference = positions_nm.detach().clone()
        self._constants = {}
        self.builds += 1

    def per_pair(self, name: str, make: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """A constant of each listed pair, make(replica, first, second), made once per build."""
        if name not in self._constants:
            self._constants[name] = make(self._replica, self._first, self._second)
        return self._constants[name]

    def listed(self, positions_nm: torch.Tensor, box_nm: torch.Tensor, mask: torch.Tensor) -> Listed:
        """Every listed pair now, with those within the cutoff marked (rebuilding the list first if
        some ion moved > skin / 2)."""
        if self._stale(positions_nm, box_nm, mask):
            self._build(positions_nm, box_nm, mask)
        coordinates = positions_nm.reshape(-1, 3).T.contiguous()  # (3, R N)
        delta = coordinates.index_select(1, self._first) - coordinates.index_select(1, self._second)
        plane = delta[:2]  # x and y, in place: z needs no image (module doc)
        plane -= self._side * torch.round(plane * self._inverse_side)
        r2 = delta[0] * delta[0] + delta[1] * delta[1] + delta[2] * delta[2]
        return Listed(self._replica, self._first, self._second, delta, r2, r2 < self._cut2)

    def pairs(self, positions_nm: torch.Tensor, box_nm: torch.Tensor, mask: torch.Tensor) -> Pairs:
        """The pairs within the cutoff now, chosen from the list in its order."""
        near = self.listed(positions_nm, box_nm, mask)
        keep = near.within.nonzero().squeeze(1)
        return Pairs(near.replica.index_select(0, keep), near.first.index_select(0, keep),
                     near.second.index_select(0, keep), near.delta_nm.index_select(1, keep),
                     torch.sqrt(near.r2_nm2.index_select(0, keep)))
