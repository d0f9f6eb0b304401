# SPDX-License-Identifier: MIT
"""Campaigns on Ray: which points run next (point_samplers), when a run checkpoints
(checkpoint_schedule), what runs (simulations: batch simulations; nanoconfinement_runs, standin),
where (pool: the emulated preemptible pool, placement, the bill), the store of finished runs
(store), the loop that submits batches (runner) and `md sweep` assembled (sweep)."""
