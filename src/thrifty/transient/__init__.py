# SPDX-License-Identifier: MIT
"""Preemptible VMs: lifetime models and the expected cost of running on them."""
