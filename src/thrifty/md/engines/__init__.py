# SPDX-License-Identifier: MIT
"""MD engines behind one protocol (protocol.Engine) and the one job loop that drives them (job_loop):
OpenMM (openmm_engine: lj, ions, nanoconfinement; one replica) and the torch engine
(torch_replicas_engine: R nanoconfinement replicas; the physics is md.torch_physics). A new engine is a
class with the protocol's methods and a checkpoint format of its own; nothing else changes.
docs/md-design.md draws the data flow. Importing this package imports neither OpenMM nor torch.
"""

from thrifty.md.engines.protocol import Engine, Progress, ReplicaLayout, Saved

__all__ = ["Engine", "Progress", "ReplicaLayout", "Saved"]
