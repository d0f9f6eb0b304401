"""Active learning's pick and stopping test, with a stand-in for the ensemble whose uncertainty is
known, so the tests check the rule and not a network's training."""

import numpy as np
import pytest

from thrifty.errors import ThriftyError
from thrifty.md.active import pick_batch
from thrifty.md.params import ParameterBox

BOX = ParameterBox()


class KnownSpread:
    """Uncertainty is largest at `peak` (in the unit box) and falls off with distance from it."""

    def __init__(self, peak: np.ndarray) -> None:
        self.peak = peak

    def spread(self, points: np.ndarray) -> np.ndarray:
        return np.exp(-np.linalg.norm(BOX.unit(points) - self.peak, axis=1))


def test_a_single_pick_is_the_most_uncertain_candidate():
    """Catches a random (or least uncertain) pick."""
    pool = BOX.sample(500, np.random.default_rng(0))
    model = KnownSpread(BOX.unit(pool[137])[0])
    assert pick_batch(model, pool, 1, BOX).tolist() == [137]
    batch = pick_batch(model, pool, 4, BOX)
    assert batch[0] == 137 and model.spread(pool[batch]).min() > np.quantile(model.spread(pool), 0.9)


def test_a_batch_is_not_k_copies_of_one_point():
    """Catches a batch without the diversity rule: around the most uncertain point sit 20 near-copies,
    more uncertain than anything else; the batch takes one of them and then looks elsewhere."""
    rng = np.random.default_rng(1)
    pool = BOX.sample(300, rng)
    centre = pool[0].copy()
    copies = np.repeat(centre[None], 20, axis=0)
    copies[:, [0, 3]] += rng.normal(0, 0.005, (20, 2))  # h and c nudged by a few thousandths
    pool = np.vstack([pool, copies])
    batch = pick_batch(KnownSpread(BOX.unit(centre)[0]), pool, 4, BOX, min_distance=0.15)
    unit = BOX.unit(pool[batch])
    gaps = [np.linalg.norm(unit[i] - unit[j]) for i in range(4) for j in range(i)]
    assert len(set(batch.tolist())) == 4 and min(gaps) >= 0.15


def test_when_the_rule_leaves_too_few_the_rest_are_the_most_uncertain():
    pool = np.repeat(BOX.sample(1, np.random.default_rng(2)), 3, axis=0)
    pool[:, 3] += [0.0, 0.001, 0.002]
    assert sorted(pick_batch(KnownSpread(BOX.unit(pool[0])[0]), pool, 3, BOX).tolist()) == [0, 1, 2]


def test_a_batch_larger_than_the_pool_is_refused():
    with pytest.raises(ThriftyError, match="cannot pick 5 points from a pool of 3"):
        pick_batch(KnownSpread(np.zeros(6)), BOX.sample(3, np.random.default_rng(0)), 5, BOX)
